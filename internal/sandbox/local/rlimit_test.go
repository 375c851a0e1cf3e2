package local

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/terpdev/terp/internal/sandbox"
)

// The rlimit fallback is what an ordinary user gets on a machine without a
// writable cgroup v2 subtree, e.g. this one (cgroup v1, which only root may
// use). The tests run it two ways:
//
//   - as root with the mechanism forced (forceRlimits), which is how tests,
//     never users, reach the fallback where cgroups work. The sandbox then
//     runs as a host uid of its own (hostuid.go), so RLIMIT_NPROC binds it
//     although the kernel exempts uid 0;
//   - as an unprivileged user (the test binary re-run as nobody), where
//     detection itself picks rlimits and all three limits are checked.

// unprivilegedEnv marks the re-run test binary, so that it tests instead of
// re-running itself again.
const unprivilegedEnv = "TERP_TEST_UNPRIVILEGED"

// forceRlimits makes b enforce limits with rlimits whatever the machine
// offers. It exists for tests: users get the best mechanism detectLimits
// finds.
func forceRlimits(b *Backend) { b.limits = &limitHost{kind: limitRlimit} }

// smallLimits keep the bombs quick; 512 MiB of address space is enough for
// Python and numpy under RLIMIT_AS.
var smallLimits = sandbox.Limits{MemoryBytes: 512 << 20, Processes: 32, FileSizeBytes: 4 << 20}

// rlimitBombs are the memory and file-size cases, each with the output that
// shows the limit held.
var rlimitBombs = []struct {
	name, code, want string
}{
	{"one big allocation", "b = bytearray(4 << 30)\nprint('allocated', len(b))", "MemoryError"},
	{"growing list", "x = []\nwhile True:\n    x.append(bytearray(16 << 20))", "MemoryError"},
	{"numpy array", "import numpy as np\na = np.ones((1 << 30,))\nprint('allocated', a.nbytes)", "MemoryError"},
	{"huge file", "with open('/work/big.bin', 'wb') as f:\n    while True:\n        f.write(b'x' * (1 << 20))", "File too large"},
}

// checkRlimitBombs runs rlimitBombs in a sandbox of b and checks that each
// dies with the expected error, that big.bin stopped at the file size limit
// and that the sandbox works afterwards.
func checkRlimitBombs(t *testing.T, b *Backend) {
	sb, err := b.Create(t.Context(), sandbox.Options{Limits: smallLimits})
	if err != nil {
		t.Fatal(err)
	}
	s := sb.(*Sandbox)
	t.Cleanup(func() { _ = s.Close(t.Context()) })
	for _, bomb := range rlimitBombs {
		t.Run(bomb.name, func(t *testing.T) {
			res := runPython(t, s, "bomb.py", bomb.code, sandbox.ExecOptions{Timeout: 30 * time.Second})
			t.Logf("exit %d after %s", res.ExitCode, res.Duration.Round(time.Millisecond))
			if res.ExitCode == 0 || res.TimedOut || !strings.Contains(res.Stderr, bomb.want) {
				t.Errorf("exit %d, timed out %v, want it to die with %s; stderr %.300q", res.ExitCode, res.TimedOut, bomb.want, res.Stderr)
			}
			if res := runPython(t, s, "ok.py", "print('still here')", sandbox.ExecOptions{}); res.Stdout != "still here\n" {
				t.Errorf("after the bomb: stdout %q, stderr %q", res.Stdout, res.Stderr)
			}
		})
	}
	if fi, err := os.Stat(filepath.Join(s.HostDir(), "big.bin")); err != nil || fi.Size() != smallLimits.FileSizeBytes {
		t.Errorf("big.bin on the host: %v, %v; want exactly %d bytes", fi, err, smallLimits.FileSizeBytes)
	}
}

// checkRlimitForkBomb checks that forking stops at the process limit and that
// a fork bomb leaves nothing behind.
func checkRlimitForkBomb(t *testing.T, b *Backend) {
	sb, err := b.Create(t.Context(), sandbox.Options{Limits: smallLimits})
	if err != nil {
		t.Fatal(err)
	}
	s := sb.(*Sandbox)
	t.Cleanup(func() { _ = s.Close(t.Context()) })
	mark := marker(t)
	code := `
import os, time
children = 0
try:
    while children < 1000:
        if os.fork() == 0:
            time.sleep(60)
            os._exit(0)
        children += 1
except OSError as e:
    print("refused after", children, type(e).__name__)
`
	res := runPython(t, s, mark+".py", code, sandbox.ExecOptions{Timeout: 30 * time.Second})
	var n int
	var errName string
	if _, err := fmt.Sscanf(res.Stdout, "refused after %d %s", &n, &errName); err != nil || n >= smallLimits.Processes || errName != "BlockingIOError" {
		t.Errorf("fork was not refused (EAGAIN) before %d processes: stdout %q, stderr %q", smallLimits.Processes, res.Stdout, res.Stderr)
	}
	t.Logf("fork refused (%s) after %d children under a limit of %d", errName, n, smallLimits.Processes)
	waitNoProcesses(t, mark)
	if res := runPython(t, s, "ok.py", "print('still here')", sandbox.ExecOptions{}); res.Stdout != "still here\n" {
		t.Errorf("after the fork bomb: stdout %q, stderr %q", res.Stdout, res.Stderr)
	}
}

// TestRlimitsForced runs the memory, file-size and process bombs with
// rlimits forced.
func TestRlimitsForced(t *testing.T) {
	t.Parallel()
	b, err := New(Config{Root: testBackend.Root()})
	if err != nil {
		t.Fatal(err)
	}
	forceRlimits(b)
	checkRlimitBombs(t, b)
	t.Run("fork bomb", func(t *testing.T) { checkRlimitForkBomb(t, b) })
}

// TestRlimitsUnprivileged is the fallback as an ordinary user meets it: the
// test binary re-runs itself as nobody, detection finds no usable cgroup and
// picks rlimits, and memory, process and file-size bombs are each stopped.
func TestRlimitsUnprivileged(t *testing.T) {
	if os.Getenv(unprivilegedEnv) == "" {
		if os.Geteuid() != 0 {
			t.Fatal("set " + unprivilegedEnv + " or run as root, which re-runs this test as nobody")
		}
		rerunAsNobody(t, "TestRlimitsUnprivileged")
		return
	}
	if got := testBackend.LimitsMechanism(); got != "rlimit" {
		t.Fatalf("as uid %d, LimitsMechanism() = %q, want rlimit", os.Geteuid(), got)
	}
	t.Run("memory and file size", func(t *testing.T) { checkRlimitBombs(t, testBackend) })
	t.Run("fork bomb", func(t *testing.T) { checkRlimitForkBomb(t, testBackend) })
}

// rerunAsNobody runs the named tests in a copy of this test binary as uid
// and gid 65534 and fails unless each of them passes.
func rerunAsNobody(t *testing.T, tests ...string) {
	pattern := "^(" + strings.Join(tests, "|") + ")$"
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	// The go tool's build directory is private to root: copy the binary
	// where nobody can run it.
	dir, err := os.MkdirTemp("", "terp-nobody-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "local.test")
	if err := copyExecutable(self, bin); err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(t.Context(), bin, "-test.run", pattern, "-test.count=1", "-test.v")
	cmd.Dir = dir
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + dir, "TMPDIR=/tmp", unprivilegedEnv + "=1"}
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	out, err := cmd.CombinedOutput()
	t.Logf("as nobody:\n%s", out)
	if err != nil {
		t.Fatalf("the tests run as nobody failed: %v", err)
	}
	for _, name := range tests {
		if !strings.Contains(string(out), "--- PASS: "+name+" ") {
			t.Errorf("%s did not pass as nobody", name)
		}
	}
}

func copyExecutable(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o755)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}
