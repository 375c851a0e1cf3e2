package local

import (
	"strings"
	"testing"
	"time"

	"github.com/terpdev/terp/internal/sandbox"
)

// TestWorkSizeLimit: code that keeps writing files is stopped once /work
// grows past Limits.WorkBytes, told why, and holes do not count; a command
// that only deletes files while /work is over the limit runs to its end.
func TestWorkSizeLimit(t *testing.T) {
	t.Parallel()
	s := newSandbox(t, sandbox.Options{Limits: sandbox.Limits{WorkBytes: 32 << 20, FileSizeBytes: 1 << 30}})

	// A sparse file of 512 MiB holds one block: it is no reason to stop.
	res := runPython(t, s, "sparse.py", `import time
with open("/work/sparse.bin", "wb") as f:
    f.seek(512 << 20); f.write(b"x")
time.sleep(1)
print("kept")`, sandbox.ExecOptions{Timeout: time.Minute})
	if res.Stdout != "kept\n" || res.Stopped != "" {
		t.Fatalf("a sparse file stopped the code: exit %d %q %q stopped %q", res.ExitCode, res.Stdout, res.Stderr, res.Stopped)
	}

	// At most 2 GiB, so that a watch that failed fails the test without
	// filling the disk.
	res = runPython(t, s, "fill.py", `for n in range(512):
    with open(f"/work/fill{n}.bin", "wb") as f:
        f.write(b"x" * (4 << 20))`, sandbox.ExecOptions{Timeout: time.Minute})
	if res.ExitCode != 137 || !strings.Contains(res.Stopped, "max_work_size") || res.TimedOut {
		t.Fatalf("the filler was not stopped for /work's size: exit %d timed out %v stopped %q", res.ExitCode, res.TimedOut, res.Stopped)
	}
	if used := s.workUsage(); used > 1536<<20 {
		t.Errorf("/work grew to %d MiB under a 32 MiB limit", used>>20)
	}

	// Over the limit now: cleaning up must still work.
	res = runPython(t, s, "clean.py", `import glob, os, time
time.sleep(0.6)
for p in glob.glob("/work/fill*.bin"):
    os.remove(p)
print("cleaned")`, sandbox.ExecOptions{Timeout: time.Minute})
	if res.Stdout != "cleaned\n" || res.Stopped != "" {
		t.Errorf("a cleanup over the limit was stopped: exit %d %q stopped %q", res.ExitCode, res.Stderr, res.Stopped)
	}
}

// TestWorkSizeLimitStopsProcess: a long-lived process (the kernel) that
// fills /work is stopped and says why through StopReason.
func TestWorkSizeLimitStopsProcess(t *testing.T) {
	t.Parallel()
	s := newSandbox(t, sandbox.Options{Limits: sandbox.Limits{WorkBytes: 16 << 20}})
	p, err := s.Start(t.Context(), []string{"python3", "-c", `n = 0
while True:
    open(f"/work/f{n}", "wb").write(b"x" * (1 << 20)); n += 1`}, sandbox.ExecOptions{})
	if err != nil {
		t.Fatal(err)
	}
	code, _ := p.Wait()
	why := p.(sandbox.StopReporter).StopReason()
	if code != 137 || !strings.Contains(why, "16.0 MiB limit (max_work_size)") {
		t.Errorf("exit %d, stop reason %q", code, why)
	}
}
