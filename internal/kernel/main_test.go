package kernel

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/terpdev/terp/internal/sandbox"
	"github.com/terpdev/terp/internal/sandbox/local"
)

// These tests run the real worker in the real bubblewrap sandbox: what the
// kernel promises (output captured at the descriptor level, processes
// killed, figures saved, crashes survived) only holds if it holds there.

// testBackend is shared by the tests: creating a Backend checks the sandbox's
// Python once, which costs a second. Each test makes its own sandboxes.
var testBackend *local.Backend

func TestMain(m *testing.M) {
	if _, err := exec.LookPath("bwrap"); err != nil {
		fmt.Fprintln(os.Stderr, "FAIL: the kernel tests need bubblewrap and Debian's Python libraries:\n"+
			"    sudo apt-get install bubblewrap python3-numpy python3-pandas python3-matplotlib")
		os.Exit(1)
	}
	root, err := os.MkdirTemp("", "terp-kernel-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "FAIL:", err)
		os.Exit(1)
	}
	testBackend, err = local.New(local.Config{Root: root})
	if err == nil {
		err = testBackend.Check(context.Background())
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "FAIL: the local sandbox cannot run here:", err)
		os.RemoveAll(root)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(root)
	os.Exit(code)
}

// newSandbox creates a sandbox that is closed when the test ends.
func newSandbox(t testing.TB) sandbox.Sandbox {
	t.Helper()
	sbx, err := testBackend.Create(context.Background(), sandbox.Options{Timeout: 10 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sbx.Close(context.Background()) })
	return sbx
}

// startKernel starts a kernel that is closed when the test ends.
func startKernel(t testing.TB, sbx sandbox.Sandbox, opt Options) *Kernel {
	t.Helper()
	k, err := Start(context.Background(), sbx, opt)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := k.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return k
}

// run runs code with a generous timeout; an error fails the test.
func run(t testing.TB, k *Kernel, code string) Result {
	t.Helper()
	return runWithin(t, k, code, time.Minute)
}

func runWithin(t testing.TB, k *Kernel, code string, timeout time.Duration) Result {
	t.Helper()
	res, err := k.Run(context.Background(), code, timeout)
	if err != nil {
		t.Fatalf("Run(%q): %v (result %+v)", code, err, res)
	}
	return res
}

// wantOK fails unless res is a clean exit printing exactly stdout.
func wantOK(t testing.TB, res Result, stdout string) {
	t.Helper()
	if res.ExitCode != 0 || res.Stdout != stdout || res.Notice != "" {
		t.Errorf("got exit %d, stdout %q, notice %q, stderr:\n%s\nwant exit 0, stdout %q",
			res.ExitCode, res.Stdout, res.Notice, res.Stderr, stdout)
	}
}

// readFile downloads a file from the sandbox.
func readFile(t testing.TB, sbx sandbox.Sandbox, path string) []byte {
	t.Helper()
	rc, err := sbx.ReadFile(context.Background(), path)
	if err != nil {
		t.Fatalf("ReadFile(%s): %v", path, err)
	}
	defer rc.Close()
	data, err := io.ReadAll(rc)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func writeFile(t testing.TB, sbx sandbox.Sandbox, path, content string) {
	t.Helper()
	if err := sbx.WriteFile(context.Background(), path, strings.NewReader(content)); err != nil {
		t.Fatal(err)
	}
}

// hostProcesses returns the host pids whose command line contains marker.
func hostProcesses(marker string) []int {
	entries, _ := os.ReadDir("/proc")
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		cmdline, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err == nil && bytes.Contains(cmdline, []byte(marker)) {
			pids = append(pids, pid)
		}
	}
	return pids
}

// modes are the two ways terp runs code.
var modes = []struct {
	name  string
	fresh bool
}{{"kernel", false}, {"script", true}}

// eachMode runs f in a subtest per mode, each with a sandbox and a kernel of
// its own.
func eachMode(t *testing.T, f func(t *testing.T, k *Kernel, sbx sandbox.Sandbox)) {
	t.Helper()
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			t.Parallel()
			sbx := newSandbox(t)
			f(t, startKernel(t, sbx, Options{Fresh: m.fresh}), sbx)
		})
	}
}
