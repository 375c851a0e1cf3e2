package adversarial

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/terpdev/terp/internal/kernel"
)

// TestHostileKernelForks runs cells whose forked children come back into
// the kernel's worker, in one kernel with the bomb cases' process limit:
// only the worker may answer for a cell, so the parent's output arrives
// whole, nothing is reported as timed out, and the next cell runs in the
// worker itself, with its variables.
func TestHostileKernelForks(t *testing.T) {
	t.Parallel()
	hostileKernelForks(t, localTarget())
}

// TestHostileKernelForksCPUOS runs the same cells through the cpuos client.
func TestHostileKernelForksCPUOS(t *testing.T) {
	t.Parallel()
	hostileKernelForks(t, cpuosTarget(t))
}

func hostileKernelForks(t *testing.T, tg *target) {
	sbx := tg.create(t, small)
	k, err := kernel.Start(context.Background(), sbx, kernel.Options{Grace: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { k.Close() })
	run := func(code string) kernel.Result {
		t.Helper()
		res, err := k.Run(t.Context(), code, 30*time.Second)
		if err != nil {
			t.Fatalf("run: %v", err)
		}
		return res
	}
	run("import os\nx = 41\nworker = os.getpid()")

	for _, tt := range []struct {
		name, code string
		want       []string // in stdout, in this order
	}{
		{
			// The root forks until the process limit; each child sleeps and
			// then falls off the end of the cell.
			"limits/fork-bomb-children-return",
			"import os, time\nroot = os.getpid()\nn = 0\ntry:\n    while n < 10000:\n        if os.fork() == 0:\n" +
				"            time.sleep(1)\n            break\n        n += 1\nexcept OSError as e:\n" +
				"    print('fork failed:', e.strerror, flush=True)\nif os.getpid() == root:\n" +
				"    while True:\n        try:\n            os.wait()\n        except ChildProcessError:\n            break\n" +
				"    print('root done')",
			[]string{"fork failed: Resource temporarily unavailable\n", "root done\n"},
		},
		{
			// Every process forks until the limit stops it, then falls off.
			"limits/fork-bomb-everyone-forks",
			"import os\nroot = os.getpid()\nwhile True:\n    try:\n        os.fork()\n    except OSError as e:\n" +
				"        failed = e.strerror\n        break\nif os.getpid() == root:\n    print('root stopped:', failed)",
			[]string{"root stopped: Resource temporarily unavailable\n"},
		},
	} {
		res := run(tt.code)
		t.Run(tt.name, func(t *testing.T) {
			t.Logf("exit %d, notice %q, %d lines of stdout, stderr %.300q", res.ExitCode, res.Notice, strings.Count(res.Stdout, "\n"), res.Stderr)
			rest := res.Stdout
			for _, w := range tt.want {
				i := strings.Index(rest, w)
				if i < 0 {
					t.Errorf("stdout lacks %q (in order):\n%s", w, clip(res.Stdout))
					break
				}
				rest = rest[i+len(w):]
			}
			if res.ExitCode != 0 || res.TimedOut || res.Notice != "" {
				t.Errorf("exit %d, timed out %v, notice %q", res.ExitCode, res.TimedOut, res.Notice)
			}
			next := run("print(x + 1, os.getpid() == worker)")
			if next.Stdout != "42 True\n" || next.Notice != "" {
				t.Errorf("the next cell: stdout %q, notice %q, stderr %q; want it in the same worker", next.Stdout, next.Notice, next.Stderr)
			}
		})
	}
}
