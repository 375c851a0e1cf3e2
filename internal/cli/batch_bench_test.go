package cli

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/terpdev/terp/internal/llm/llmtest"
	"github.com/terpdev/terp/internal/terptest"
)

// BenchmarkBatchScaling runs 64 cases against a fake model that takes 200 ms
// per reply; each case runs print(1) in its sandbox, then answers, so every
// case waits 400 ms on the model. It reports the batch's wall time at -j 1,
// 4 and 8 in script mode, kernel mode, and kernel mode without prewarmed
// imports; the CPU time terp and everything it started used (bwrap, Python,
// and the fake model, which is in the same process); and the speedup over
// -j 1 of the same mode. Ideal is wall(-j 1)/j, but not below cpu/cores: on
// a small machine the sandboxes' own work (in kernel mode the imports of
// numpy, pandas and matplotlib at each kernel's start) can make the cores,
// not the model, the limit. x-ideal is the wall time over that ideal
// (docs/benchmarks.md).
//
// The CPU time comes from a cgroup v1 cpuacct group made for the benchmark
// (as root, where the hierarchy is mounted), which counts every descendant
// even when it is killed; elsewhere it is the whole machine's busy time from
// /proc/stat, which counts whatever else runs too.
//
//	go test -run '^$' -bench BatchScaling -benchtime 1x ./internal/cli
func BenchmarkBatchScaling(b *testing.B) {
	const cases, latency = 64, 200 * time.Millisecond
	meter := newCPUMeter(b)
	for _, mode := range []string{"script", "kernel", "kernel-noprewarm"} {
		var serial time.Duration
		for _, jobs := range []int{1, 4, 8} {
			b.Run(fmt.Sprintf("mode=%s/j=%d", mode, jobs), func(b *testing.B) {
				for b.Loop() {
					wall, cpu := benchBatch(b, meter, mode, jobs, cases, latency)
					if jobs == 1 {
						serial = wall
					}
					b.ReportMetric(wall.Seconds(), "wall-s")
					b.ReportMetric(cpu.Seconds(), "cpu-s")
					b.ReportMetric(cpu.Seconds()/cases*1000, "cpu-ms/case")
					if serial > 0 {
						ideal := max(serial/time.Duration(jobs), cpu/time.Duration(runtime.NumCPU()))
						b.ReportMetric(serial.Seconds()/wall.Seconds(), "speedup")
						b.ReportMetric(wall.Seconds()/ideal.Seconds(), "x-ideal")
					}
				}
			})
		}
	}
}

func benchBatch(b *testing.B, meter *cpuMeter, mode string, jobs, n int, latency time.Duration) (wall, cpu time.Duration) {
	s := scriptedModel(b, func(req llmtest.Request) llmtest.Reply {
		time.Sleep(latency)
		if opensTurn(req) {
			return llmtest.RunPython("print(1)")
		}
		res, _ := req.ToolResult()
		return llmtest.Answer("printed " + strings.TrimSpace(res.Stdout))
	})
	home := terptest.TempDir(b)
	env := map[string]string{
		"HOME": home, "XDG_CONFIG_HOME": filepath.Join(home, "config"), "XDG_DATA_HOME": filepath.Join(home, "data"),
		"TERP_BASE_URL": s.BaseURL(), "TERP_MODEL": "test-model", "TERP_EXEC_MODE": strings.TrimSuffix(mode, "-noprewarm"),
	}
	args := []string{"batch", "-j", fmt.Sprint(jobs)}
	if strings.HasSuffix(mode, "-noprewarm") {
		args = append(args, "--prewarm=")
	}
	var lines strings.Builder
	for i := range n {
		fmt.Fprintf(&lines, `{"id": "c%d", "question": "case %d", "expect": {"contains": "printed 1"}}`+"\n", i, i)
	}
	suite := filepath.Join(home, "cases.jsonl")
	if err := os.WriteFile(suite, []byte(lines.String()), 0o644); err != nil {
		b.Fatal(err)
	}
	var out, errOut bytes.Buffer
	f := NewFactory()
	f.IO = IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &errOut}
	f.Getenv = func(k string) string { return env[k] }

	before := meter.used()
	start := time.Now()
	code := Run(context.Background(), f, append(args, suite))
	wall = time.Since(start)
	cpu = meter.used() - before
	if code != 0 {
		b.Fatalf("exit %d\n%s\n%s", code, out.String(), errOut.String())
	}
	return wall, cpu
}

// cpuMeter measures CPU time: of a cpuacct cgroup holding this process and
// its descendants when dir is set, else of the whole machine.
type cpuMeter struct{ dir string }

// newCPUMeter moves the test process into a cpuacct cgroup of its own, if
// the machine has a cgroup v1 cpuacct hierarchy and lets it, and moves it
// back when the benchmark ends.
func newCPUMeter(b *testing.B) *cpuMeter {
	own, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return &cpuMeter{}
	}
	var parent string
	for _, line := range strings.Split(string(own), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) == 3 && slices.Contains(strings.Split(parts[1], ","), "cpuacct") {
			parent = filepath.Join("/sys/fs/cgroup/cpuacct", parts[2])
		}
	}
	if parent == "" {
		b.Log("CPU time: the whole machine's (no cpuacct cgroup)")
		return &cpuMeter{}
	}
	dir := filepath.Join(parent, fmt.Sprintf("terp-bench-%d", os.Getpid()))
	pid := []byte(strconv.Itoa(os.Getpid()))
	if err := os.Mkdir(dir, 0o755); err != nil {
		b.Logf("CPU time: the whole machine's (%v)", err)
		return &cpuMeter{}
	}
	if err := os.WriteFile(filepath.Join(dir, "cgroup.procs"), pid, 0o644); err != nil {
		os.Remove(dir)
		b.Logf("CPU time: the whole machine's (%v)", err)
		return &cpuMeter{}
	}
	b.Cleanup(func() {
		_ = os.WriteFile(filepath.Join(parent, "cgroup.procs"), pid, 0o644)
		os.Remove(dir)
	})
	return &cpuMeter{dir: dir}
}

// used is the CPU time counted so far.
func (m *cpuMeter) used() time.Duration {
	if m.dir == "" {
		return machineCPUTime()
	}
	b, err := os.ReadFile(filepath.Join(m.dir, "cpuacct.usage"))
	if err != nil {
		return 0
	}
	ns, _ := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	return time.Duration(ns)
}

// machineCPUTime is the CPU time the machine has spent busy since it
// started, from the first line of /proc/stat. (getrusage cannot count the
// sandboxes: a kernel is killed at the end of its case, and the time of
// processes killed under bwrap never reaches terp's children's total.)
func machineCPUTime() time.Duration {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0
	}
	line, _, _ := strings.Cut(string(b), "\n")
	fields := strings.Fields(line) // cpu user nice system idle iowait irq softirq steal
	var ticks int64
	for i, f := range fields[1:min(len(fields), 9)] {
		if i == 3 || i == 4 { // idle, iowait
			continue
		}
		n, _ := strconv.ParseInt(f, 10, 64)
		ticks += n
	}
	return time.Duration(ticks) * time.Second / 100 // USER_HZ
}
