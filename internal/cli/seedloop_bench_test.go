package cli

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/responses"
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

// analysisModel answers a turn with the five steps of
// terptest.AnalysisSteps, one per request, then with the line of the last
// step's output that gives the total revenue: an answer only a loop that
// ran every step and passed its output back can give. A step that failed
// makes the answer say so.
func analysisModel(b *testing.B) *llmtest.Server {
	steps := terptest.AnalysisSteps
	return llmtest.Each(b, func(req llmtest.Request) llmtest.Reply {
		done := 0
		for _, m := range req.Messages {
			if m.Role == "tool" {
				done++
			}
		}
		if done > 0 {
			res, err := req.ToolResult()
			if err != nil || res.ExitCode != 0 {
				return llmtest.Answer(fmt.Sprintf("step %d failed: %s", done, req.LastTool()))
			}
			if done == len(steps) {
				for _, line := range strings.Split(res.Stdout, "\n") {
					if strings.HasPrefix(line, "total revenue") {
						return llmtest.Answer(line)
					}
				}
				return llmtest.Answer("no total in " + res.Stdout)
			}
		}
		return llmtest.RunPython(steps[done])
	})
}

// salesTotal is the total revenue of examples/sales.csv, as the last
// analysis step prints it.
func salesTotal(b *testing.B, csv string) string {
	data, err := os.ReadFile(csv)
	if err != nil {
		b.Fatal(err)
	}
	total := 0
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n")[1:] {
		var n int
		if _, err := fmt.Sscan(line[strings.Index(line, ",")+1:], &n); err != nil {
			b.Fatalf("%s: %q: %v", csv, line, err)
		}
		total += n
	}
	s := strconv.Itoa(total)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return "total revenue " + s
}

// BenchmarkScriptModeVsSeedLoop runs the same turn from the same scripted
// model (zero latency, real HTTP) through the seed's loop
// (testdata/seedloop.py: the product note's 40 lines of Python with a
// local bubblewrap in place of the cpuos microVM) and through the terp
// binary in script mode and in kernel mode, each without prewarm and with
// the default one (script mode's preload), one after the other in every
// iteration, so that the shared machine's load weighs on all of them
// alike. Each run is timed from process start to exit. It reports ms per
// step for each (the whole run over its steps) and terp's time over the
// seed's (docs/benchmarks.md).
//
// steps=8 is eight print(i) steps and an answer with their sum; steps=1,
// one print and the answer, splits each side's time into what a run costs
// once (process start, sandbox, kernel) and what each further step costs.
// analysis is the five steps of terptest.AnalysisSteps on
// examples/sales.csv, uploaded before the first step, each importing
// pandas (and one matplotlib), as a model writes them for a script.
//
//	go test -run '^$' -bench ScriptModeVsSeedLoop -benchtime 5x -count 3 ./internal/cli/
func BenchmarkScriptModeVsSeedLoop(b *testing.B) {
	python, peer, csv := seedLoop(b)
	bin := terptest.Binary(b)
	for _, steps := range []int{8, 1} {
		b.Run(fmt.Sprintf("steps=%d", steps), func(b *testing.B) {
			benchSeedLoop(b, bin, python, peer, seedModel(b, steps), fmt.Sprintf("the sum is %d", steps*(steps-1)/2), steps, "")
		})
	}
	b.Run("analysis", func(b *testing.B) {
		benchSeedLoop(b, bin, python, peer, analysisModel(b), salesTotal(b, csv), len(terptest.AnalysisSteps), csv)
	})
}

// seedLoop returns the seed's loop (its Python and testdata/seedloop.py)
// and the analysis's data, examples/sales.csv; it skips, loudly, where the
// loop cannot run.
func seedLoop(b *testing.B) (python, peer, csv string) {
	if _, err := exec.LookPath("bwrap"); err != nil {
		b.Skip("SKIP: bubblewrap (bwrap) is not installed: neither the seed's loop nor terp's local sandbox can run")
	}
	python, err := exec.LookPath("/usr/bin/python3")
	if err != nil {
		b.Skip("SKIP: the seed's loop needs /usr/bin/python3")
	}
	if peer, err = filepath.Abs(filepath.Join("testdata", "seedloop.py")); err != nil {
		b.Fatal(err)
	}
	if csv, err = filepath.Abs(filepath.Join("..", "..", "examples", "sales.csv")); err != nil {
		b.Fatal(err)
	}
	return python, peer, csv
}

// benchSeedLoop times the sides against the model s, whose turn takes
// steps steps and whose answer holds want. upload, if not empty, is a file
// each side has in /work before the first step.
func benchSeedLoop(b *testing.B, bin, python, peer string, s *llmtest.Server, want string, steps int, upload string) {
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
	if upload != "" {
		// The seed's loop has no upload: its sandbox is a directory the
		// file is copied into once.
		data, err := os.ReadFile(upload)
		if err != nil {
			b.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(work, filepath.Base(upload)), data, 0o644); err != nil {
			b.Fatal(err)
		}
		terpArgs = append(terpArgs, "-f", upload)
	}
	sides := []struct {
		name string
		argv []string
	}{
		{"seed", []string{python, peer, s.BaseURL(), work, question}},
		{"script", append([]string{bin}, append(terpArgs, "--exec-mode", "script", question)...)},
		{"script-noprewarm", append([]string{bin}, append(terpArgs, "--exec-mode", "script", "--prewarm=", question)...)},
		{"kernel-noprewarm", append([]string{bin}, append(terpArgs, "--exec-mode", "kernel", "--prewarm=", question)...)},
		{"kernel", append([]string{bin}, append(terpArgs, "--exec-mode", "kernel", question)...)},
	}
	run := func(side int) time.Duration {
		cmd := exec.Command(sides[side].argv[0], sides[side].argv[1:]...)
		cmd.Env = env
		cmd.Dir = home // where terp ask downloads the chart
		start := time.Now()
		out, err := cmd.Output()
		took := time.Since(start)
		if err != nil || !strings.Contains(string(out), want) {
			var stderr []byte
			if ee, ok := err.(*exec.ExitError); ok {
				stderr = ee.Stderr
			}
			b.Fatalf("%s: %v, stdout %q, stderr %s; want %q", sides[side].name, err, out, stderr, want)
		}
		return took
	}
	// Untimed, as on a machine where terp has run before: what a terp
	// keeps in its data directory once per boot (the probe's record,
	// matplotlib's font cache) is there.
	run(1)
	took := make([]time.Duration, len(sides))
	for b.Loop() {
		for i := range sides {
			took[i] += run(i)
		}
	}
	perStep := func(d time.Duration) float64 { return d.Seconds() * 1000 / float64(b.N*steps) }
	for i, side := range sides {
		b.ReportMetric(perStep(took[i]), "ms/step-"+side.name)
	}
	b.ReportMetric(took[1].Seconds()/took[0].Seconds(), "terp/seed")
	b.ReportMetric(took[2].Seconds()/took[0].Seconds(), "script-noprewarm/seed")
	b.ReportMetric(took[3].Seconds()/took[0].Seconds(), "kernel/seed")
	b.ReportMetric(took[4].Seconds()/took[0].Seconds(), "kernel-prewarm/seed")
}

// BenchmarkServeWarmVsSeedLoop runs the analysis of
// BenchmarkScriptModeVsSeedLoop through `terp serve` (the binary, with its
// default --warm 1), in kernel mode and in script mode, and in kernel mode
// with --warm 0 (serve-kernel-cold), as a client of the
// Responses API asks it: the file uploaded, then one response whose
// container runs the five steps. Each side is timed from the upload to the
// response. The server's sandbox is the one it made ahead: each iteration
// starts once the server reports one ready with its imports done
// (terp_warm_sandboxes), as a server whose conversations do not all come at
// once has it; the seed's loop starts its interpreters as always.
//
//	go test -run '^$' -bench ServeWarmVsSeedLoop -benchtime 5x -count 3 ./internal/cli/
func BenchmarkServeWarmVsSeedLoop(b *testing.B) {
	python, peer, csv := seedLoop(b)
	data, err := os.ReadFile(csv)
	if err != nil {
		b.Fatal(err)
	}
	want := salesTotal(b, csv)
	s := analysisModel(b)
	home := terptest.TempDir(b)
	work := filepath.Join(home, "seedwork")
	if err := os.Mkdir(work, 0o755); err != nil {
		b.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(work, "sales.csv"), data, 0o644); err != nil {
		b.Fatal(err)
	}
	const question = "What is the total revenue?"
	seed := func() time.Duration {
		cmd := exec.Command(python, peer, s.BaseURL(), work, question)
		cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + home}
		start := time.Now()
		out, err := cmd.Output()
		took := time.Since(start)
		if err != nil || !strings.Contains(string(out), want) {
			b.Fatalf("seed: %v, stdout %q; want %q", err, out, want)
		}
		return took
	}
	type server struct {
		name    string
		warm    int
		p       *serveProcess
		metrics string
	}
	servers := []server{{name: "serve-kernel", warm: 1}, {name: "serve-script", warm: 1}, {name: "serve-kernel-cold", warm: 0}}
	for i, sv := range servers {
		mode, _, _ := strings.Cut(strings.TrimPrefix(sv.name, "serve-"), "-")
		p := startGatewayProcess(b, homeEnv(b, map[string]string{"TERP_BASE_URL": s.BaseURL(), "TERP_MODEL": "test-model"}),
			"--no-auth", "--metrics-listen", "127.0.0.1:0", "--exec-mode", mode, "--warm", strconv.Itoa(sv.warm))
		m := regexp.MustCompile(`serving metrics on (http://\S+)/metrics`).FindStringSubmatch(p.log.String())
		if m == nil {
			b.Fatalf("terp serve did not say where its metrics are:\n%s", p.log)
		}
		servers[i].p, servers[i].metrics = p, m[1]
	}
	ctx := context.Background()
	ask := func(sv server) time.Duration {
		waitFor(b, func() bool { return warmGauge(b, sv.metrics) == sv.warm }, "a warm sandbox")
		c := sv.p.client()
		start := time.Now()
		file, err := c.Files.New(ctx, openai.FileNewParams{File: openai.File(bytes.NewReader(data), "sales.csv", "text/csv"),
			Purpose: openai.FilePurposeUserData})
		if err != nil {
			b.Fatal(err)
		}
		resp, err := c.Responses.New(ctx, responses.ResponseNewParams{
			Model: "test-model", Input: responses.ResponseNewParamsInputUnion{OfString: openai.String(question)},
			Tools: []responses.ToolUnionParam{responses.ToolParamOfCodeInterpreter(
				responses.ToolCodeInterpreterContainerCodeInterpreterContainerAutoParam{FileIDs: []string{file.ID}})},
		})
		took := time.Since(start)
		if err != nil || !strings.Contains(resp.OutputText(), want) {
			b.Fatalf("%s: %v, %q; want %q\n%s", sv.name, err, resp.OutputText(), want, sv.p.log)
		}
		return took
	}
	// Untimed, as in BenchmarkScriptModeVsSeedLoop.
	seed()
	for _, sv := range servers {
		ask(sv)
	}
	var seedTook time.Duration
	took := make([]time.Duration, len(servers))
	for b.Loop() {
		seedTook += seed()
		for i, sv := range servers {
			took[i] += ask(sv)
		}
	}
	steps := float64(b.N * len(terptest.AnalysisSteps))
	b.ReportMetric(seedTook.Seconds()*1000/steps, "ms/step-seed")
	for i, sv := range servers {
		b.ReportMetric(took[i].Seconds()*1000/steps, "ms/step-"+sv.name)
		b.ReportMetric(took[i].Seconds()/seedTook.Seconds(), sv.name+"/seed")
	}
}
