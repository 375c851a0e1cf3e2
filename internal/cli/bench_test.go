package cli

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/terpdev/terp/internal/agent"
	"github.com/terpdev/terp/internal/llm/llmtest"
	"github.com/terpdev/terp/internal/terptest"
)

// print1GB writes 1 GiB to stdout in 1 KiB lines.
var print1GB = terptest.PrintMiB(1024)

// BenchmarkPeakMemoryPrint1GB runs the terp binary on a question whose code
// prints 1 GiB, and on one whose code prints 1 (the baseline), and reports
// terp's own peak resident memory for each (VmHWM, which counts neither
// bwrap nor Python) and the peak of its anonymous part (RssAnon, polled):
// VmHWM also counts the pages of terp's binary that the process touched
// (RssFile, about 24 MB of a 48 MB binary), page cache that is shared and
// reclaimable. Output is bounded while it is read, so the peak must not
// grow with what the code prints (docs/benchmarks.md).
//
//	go test -run '^$' -bench 'PeakMemory' -benchtime 2x -count 1 ./internal/cli/
func BenchmarkPeakMemoryPrint1GB(b *testing.B) {
	dir := terptest.TempDir(b)
	bin := terptest.Binary(b)
	var hwm, anon, baseHWM, baseAnon int64
	var took time.Duration
	for b.Loop() {
		h, a, _ := askPeak(b, bin, dir, "print(1)", func(res agent.ToolMessage) bool { return res.Stdout == "1\n" })
		baseHWM, baseAnon = max(baseHWM, h), max(baseAnon, a)
		h, a, d := askPeak(b, bin, dir, print1GB, func(res agent.ToolMessage) bool {
			return strings.Contains(res.Stdout, "bytes omitted") && len(res.Stdout) <= 5000
		})
		hwm, anon = max(hwm, h), max(anon, a)
		took += d
	}
	b.ReportMetric(float64(hwm)/1024, "peak-RSS-MB")
	b.ReportMetric(float64(anon)/1024, "peak-anon-MB")
	b.ReportMetric(float64(baseHWM)/1024, "print1-peak-RSS-MB")
	b.ReportMetric(float64(baseAnon)/1024, "print1-peak-anon-MB")
	b.ReportMetric(took.Seconds()/float64(b.N), "s/question")
}

// askPeak runs `terp ask` on a question whose one step runs code, checks
// the tool result the model gets with ok, and returns the process's peak
// resident memory and the peak of its anonymous part, in kB, and how long
// it took.
func askPeak(b *testing.B, bin, dir, code string, ok func(agent.ToolMessage) bool) (hwm, anon int64, took time.Duration) {
	s := llmtest.New(b, llmtest.Fixed(llmtest.RunPython(code)), func(req llmtest.Request) llmtest.Reply {
		res, err := req.ToolResult()
		if err != nil || !ok(res) {
			b.Errorf("the model got %d bytes of stdout (%v): %.200q", len(res.Stdout), err, res.Stdout)
		}
		return llmtest.Answer("done")
	})
	cmd := exec.Command(bin, "ask", "--timeout", "5m", "print a lot")
	cmd.Env = []string{
		"PATH=" + os.Getenv("PATH"),
		"HOME=" + dir,
		"XDG_DATA_HOME=" + filepath.Join(dir, "data"),
		"XDG_CONFIG_HOME=" + filepath.Join(dir, "config"),
		"TERP_BASE_URL=" + s.BaseURL(),
	}
	start := time.Now()
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	for {
		select {
		case err := <-done:
			if err != nil {
				b.Fatalf("terp: %v", err)
			}
			return hwm, anon, time.Since(start)
		case <-time.After(20 * time.Millisecond):
			h, a := memoryKB(cmd.Process.Pid)
			hwm, anon = max(hwm, h), max(anon, a)
		}
	}
}

// memoryKB reads a process's peak resident set size and its anonymous
// resident memory now, or zeros once it is gone.
func memoryKB(pid int) (hwm, anon int64) {
	f, err := os.Open("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0, 0
	}
	defer f.Close()
	kb := func(v string) int64 {
		n, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
		return n
	}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmHWM:"); ok {
			hwm = kb(v)
		} else if v, ok := strings.CutPrefix(sc.Text(), "RssAnon:"); ok {
			anon = kb(v)
		}
	}
	return hwm, anon
}
