package local

import (
	"context"
	"fmt"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/terpdev/terp/internal/sandbox"
)

// The three benchmarks below run the same `python3 -c 'print(1)'`: through
// Exec, through the bwrap command line Exec builds but started by hand with
// os/exec (so without the limits handshake and the seccomp filter), and with
// no sandbox at all. Exec minus BwrapByHand is terp's overhead; BwrapByHand
// minus PythonDirect is bubblewrap's. BenchmarkSeccompCost isolates the
// filter's share.

var print1 = []string{"python3", "-c", "print(1)"}

func BenchmarkExecPrint1(b *testing.B) {
	s := newSandbox(b, sandbox.Options{})
	for b.Loop() {
		res, err := s.Exec(b.Context(), print1, sandbox.ExecOptions{})
		if err != nil || res.Stdout != "1\n" {
			b.Fatalf("Exec = %+v, %v", res, err)
		}
	}
}

// syscallTimer is Python that times two syscalls itself, so that the
// sandbox's start-up noise stays out of the numbers: getppid, which the
// filter does not name (the kernel's per-syscall action cache lets it skip
// the filter entirely), and personality(0xffffffff), whose rule is near the
// end of the list and depends on an argument, so the whole program runs for
// every call.
const syscallTimer = `import ctypes, os, time
libc = ctypes.CDLL(None)
n = 100000
t = time.perf_counter_ns()
for _ in range(n): os.getppid()
a = (time.perf_counter_ns() - t) / n
f = libc.personality; f.argtypes = [ctypes.c_ulong]
t = time.perf_counter_ns()
for _ in range(n): f(0xffffffff)
b = (time.perf_counter_ns() - t) / n
print(a, b)
`

// BenchmarkSeccompCost measures what the filter costs, with and without it
// in alternation, so that the load of a shared machine, which drifts over a
// run, weighs on both sides alike. Per command (the filter is piped to bwrap,
// which loads it): ms/exec-seccomp against ms/exec-no-seccomp for print(1).
// Per syscall, timed by Python itself: ns/getppid-* and ns/personality-*.
func BenchmarkSeccompCost(b *testing.B) {
	sides := []struct {
		name    string
		backend *Backend
	}{
		{"seccomp", testBackend},
		{"no-seccomp", unfilteredBackend(b)},
	}
	sbxs := make([]sandbox.Sandbox, len(sides))
	for i, side := range sides {
		sb, err := side.backend.Create(b.Context(), sandbox.Options{})
		if err != nil {
			b.Fatal(err)
		}
		defer sb.Close(context.Background())
		sbxs[i] = sb
	}
	exec := make([]time.Duration, len(sides))
	getppid := make([]float64, len(sides))
	personality := make([]float64, len(sides))
	for b.Loop() {
		for i, sb := range sbxs {
			start := time.Now()
			res, err := sb.Exec(b.Context(), print1, sandbox.ExecOptions{})
			exec[i] += time.Since(start)
			if err != nil || res.Stdout != "1\n" {
				b.Fatalf("Exec = %+v, %v", res, err)
			}
			res, err = sb.Exec(b.Context(), []string{"python3", "-c", syscallTimer}, sandbox.ExecOptions{})
			var x, y float64
			if err == nil {
				_, err = fmt.Sscan(res.Stdout, &x, &y)
			}
			if err != nil {
				b.Fatalf("Exec = %+v, %v", res, err)
			}
			getppid[i] += x
			personality[i] += y
		}
	}
	n := float64(b.N)
	for i, side := range sides {
		b.ReportMetric(float64(exec[i].Milliseconds())/n, "ms/exec-"+side.name)
		b.ReportMetric(getppid[i]/n, "ns/getppid-"+side.name)
		b.ReportMetric(personality[i]/n, "ns/personality-"+side.name)
	}
}

func BenchmarkBwrapByHand(b *testing.B) {
	s := newSandbox(b, sandbox.Options{})
	argv, err := s.Argv(print1, sandbox.ExecOptions{})
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		cmd := exec.Command(argv[0], argv[1:]...)
		cmd.Env = []string{}
		// As the sandbox's own uid when terp is root, as terp starts it.
		cmd.Dir = "/"
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: credential(s.meta.HostUID)}
		out, err := cmd.Output()
		if err != nil || string(out) != "1\n" {
			b.Fatalf("bwrap = %q, %v", out, err)
		}
	}
}

func BenchmarkPythonDirect(b *testing.B) {
	for b.Loop() {
		cmd := exec.Command(DefaultPython, print1[1:]...)
		cmd.Env = []string{}
		out, err := cmd.Output()
		if err != nil || string(out) != "1\n" {
			b.Fatalf("python3 = %q, %v", out, err)
		}
	}
}
