package cli

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/terpdev/terp/internal/llm/llmtest"
	"github.com/terpdev/terp/internal/terptest"
)

// seedModel answers the i-th request of a turn with print(i) for i below
// steps, then with the sum of what the steps printed: an answer that only a
// loop that passed every output back can give.
func seedModel(b *testing.B, steps int) *llmtest.Server {
	return llmtest.Each(b, func(req llmtest.Request) llmtest.Reply {
		var outputs []string
		for _, m := range req.Messages {
			if m.Role == "tool" {
				outputs = append(outputs, m.Content)
			}
		}
		if len(outputs) < steps {
			return llmtest.RunPython(fmt.Sprintf("print(%d)", len(outputs)))
		}
		sum := 0
		for _, o := range outputs {
			var n int
			res, err := (llmtest.Request{Messages: []llmtest.Message{{Role: "tool", Content: o}}}).ToolResult()
			if err == nil {
				_, err = fmt.Sscan(res.Stdout, &n)
			}
			if err != nil {
				return llmtest.Answer("bad tool output " + o)
			}
			sum += n
		}
		return llmtest.Answer(fmt.Sprintf("the sum is %d", sum))
	})
}

// BenchmarkScriptModeVsSeedLoop runs the same turn, eight print(i) steps and
// an answer from the same scripted model (zero latency, real HTTP), through
// the seed's loop (testdata/seedloop.py: the product note's 40 lines of
// Python with a local bubblewrap in place of the cpuos microVM) and through
// the terp binary in script mode and in kernel mode without prewarm, one
// after the other in every iteration, so that the shared machine's load
// weighs on all of them alike. Each run is timed from process start to exit.
// It reports ms per step for each (the whole run over the 8 steps) and
// terp's time over the seed's (docs/benchmarks.md). The steps=1 run, one
// print and the answer, splits each side's time into what a run costs once
// (process start, sandbox, kernel) and what each further step costs.
//
//	go test -run '^$' -bench ScriptModeVsSeedLoop -benchtime 5x -count 3 ./internal/cli/
func BenchmarkScriptModeVsSeedLoop(b *testing.B) {
	if _, err := exec.LookPath("bwrap"); err != nil {
		b.Skip("SKIP: bubblewrap (bwrap) is not installed: neither the seed's loop nor terp's local sandbox can run")
	}
	python, err := exec.LookPath("/usr/bin/python3")
	if err != nil {
		b.Skip("SKIP: the seed's loop needs /usr/bin/python3")
	}
	peer, err := filepath.Abs(filepath.Join("testdata", "seedloop.py"))
	if err != nil {
		b.Fatal(err)
	}
	bin := terptest.Binary(b)
	for _, steps := range []int{8, 1} {
		b.Run(fmt.Sprintf("steps=%d", steps), func(b *testing.B) { benchSeedLoop(b, bin, python, peer, steps) })
	}
}

func benchSeedLoop(b *testing.B, bin, python, peer string, steps int) {
	s := seedModel(b, steps)
	want := fmt.Sprintf("the sum is %d", steps*(steps-1)/2)
	home := terptest.TempDir(b)
	env := []string{
		"PATH=" + os.Getenv("PATH"),
		"HOME=" + home,
		"XDG_CONFIG_HOME=" + filepath.Join(home, "config"),
		"XDG_DATA_HOME=" + filepath.Join(home, "data"),
		"TERP_BASE_URL=" + s.BaseURL(),
		"TERP_MODEL=test-model",
	}
	work := filepath.Join(home, "seedwork")
	if err := os.Mkdir(work, 0o755); err != nil {
		b.Fatal(err)
	}
	const question = "add up the numbers the steps print"
	terpArgs := []string{"ask", "--max-steps", "20", "--timeout", "2m"}
	sides := []struct {
		name string
		argv []string
	}{
		{"seed", []string{python, peer, s.BaseURL(), work, question}},
		{"script", append([]string{bin}, append(terpArgs, "--exec-mode", "script", question)...)},
		{"kernel-noprewarm", append([]string{bin}, append(terpArgs, "--exec-mode", "kernel", "--prewarm=", question)...)},
	}
	took := make([]time.Duration, len(sides))
	for b.Loop() {
		for i, side := range sides {
			cmd := exec.Command(side.argv[0], side.argv[1:]...)
			cmd.Env = env
			start := time.Now()
			out, err := cmd.Output()
			took[i] += time.Since(start)
			if err != nil || !strings.Contains(string(out), want) {
				var stderr []byte
				if ee, ok := err.(*exec.ExitError); ok {
					stderr = ee.Stderr
				}
				b.Fatalf("%s: %v, stdout %q, stderr %s; want %q", side.name, err, out, stderr, want)
			}
		}
	}
	perStep := func(d time.Duration) float64 { return d.Seconds() * 1000 / float64(b.N*steps) }
	for i, side := range sides {
		b.ReportMetric(perStep(took[i]), "ms/step-"+side.name)
	}
	b.ReportMetric(took[1].Seconds()/took[0].Seconds(), "terp/seed")
	b.ReportMetric(took[2].Seconds()/took[0].Seconds(), "kernel/seed")
}
