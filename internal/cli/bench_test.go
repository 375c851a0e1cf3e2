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

	"github.com/terpdev/terp/internal/llm/llmtest"
	"github.com/terpdev/terp/internal/terptest"
)

// print1GB writes 1 GiB to stdout in 1 KiB lines.
var print1GB = terptest.PrintMiB(1024)

// BenchmarkPeakMemoryPrint1GB runs the terp binary on a question whose code
// prints 1 GiB, and reports terp's own peak resident memory (VmHWM, which
// counts neither bwrap nor Python). Output is bounded while it is read, so
// the peak must not grow with what the code prints (docs/benchmarks.md).
func BenchmarkPeakMemoryPrint1GB(b *testing.B) {
	dir := terptest.TempDir(b)
	bin := terptest.Binary(b)
	for b.Loop() {
		s := llmtest.New(b, llmtest.Fixed(llmtest.RunPython(print1GB)), func(req llmtest.Request) llmtest.Reply {
			res, err := req.ToolResult()
			if err != nil || !strings.Contains(res.Stdout, "bytes omitted") || len(res.Stdout) > 5000 {
				b.Errorf("the model got %d bytes of stdout (%v), want a bounded excerpt", len(res.Stdout), err)
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
		var peak int64
		for waiting := true; waiting; {
			select {
			case err := <-done:
				if err != nil {
					b.Fatalf("terp: %v", err)
				}
				waiting = false
			case <-time.After(20 * time.Millisecond):
				if kb := highWaterKB(cmd.Process.Pid); kb > peak {
					peak = kb
				}
			}
		}
		b.ReportMetric(float64(peak)/1024, "peak-RSS-MB")
		b.ReportMetric(time.Since(start).Seconds(), "s/question")
	}
}

// highWaterKB reads a process's peak resident set size, or 0 once it is gone.
func highWaterKB(pid int) int64 {
	f, err := os.Open("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmHWM:"); ok {
			n, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return n
		}
	}
	return 0
}
