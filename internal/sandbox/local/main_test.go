package local

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/terpdev/terp/internal/sandbox"
)

// These tests run real bubblewrap and real Python: the sandbox is only worth
// what it proves on a real kernel. Missing tools fail the run loudly instead
// of skipping, so CI cannot go green without testing anything.

// testBackend is shared by the tests; each test makes its own sandboxes.
var testBackend *Backend

func TestMain(m *testing.M) {
	if _, err := exec.LookPath("bwrap"); err != nil {
		fmt.Fprintln(os.Stderr, "FAIL: the local sandbox tests need bubblewrap and Debian's Python libraries:\n"+
			"    sudo apt-get install bubblewrap python3-numpy python3-pandas python3-matplotlib")
		os.Exit(1)
	}
	root, err := os.MkdirTemp("", "terp-sandboxes-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "FAIL:", err)
		os.Exit(1)
	}
	testBackend, err = New(Config{Root: root})
	if err == nil {
		err = testBackend.Check(context.Background())
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "FAIL: the local sandbox cannot run here:", err)
		os.RemoveAll(root)
		os.Exit(1)
	}
	code := m.Run()
	if code == 0 {
		// Every test closes its sandboxes: anything left is a leak.
		// (The passing probe's record and the font cache stay, as they
		// would.)
		entries, _ := os.ReadDir(root)
		var names []string
		for _, e := range entries {
			if e.Name() != filepath.Base(testBackend.probeRecordPath()) && e.Name() != filepath.Base(testBackend.fontSeedRoot()) {
				names = append(names, e.Name())
			}
		}
		if len(names) > 0 {
			fmt.Fprintln(os.Stderr, "FAIL: sandbox directories left behind:", names)
			code = 1
		}
	}
	removeTree(root)
	os.Exit(code)
}

// newSandbox creates a sandbox that is closed when the test ends.
func newSandbox(t testing.TB, opt sandbox.Options) *Sandbox {
	t.Helper()
	sb, err := testBackend.Create(t.Context(), opt)
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	s := sb.(*Sandbox)
	t.Cleanup(func() {
		if err := s.Close(context.Background()); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return s
}

// writeFile uploads content to the sandbox or fails the test.
func writeFile(t testing.TB, s *Sandbox, path, content string) {
	t.Helper()
	if err := s.WriteFile(t.Context(), path, strings.NewReader(content)); err != nil {
		t.Fatalf("WriteFile(%q): %v", path, err)
	}
}

// readFile downloads a file from the sandbox or fails the test.
func readFile(t testing.TB, s *Sandbox, path string) string {
	t.Helper()
	rc, err := s.ReadFile(t.Context(), path)
	if err != nil {
		t.Fatalf("ReadFile(%q): %v", path, err)
	}
	defer rc.Close()
	var b bytes.Buffer
	if _, err := b.ReadFrom(rc); err != nil {
		t.Fatalf("ReadFile(%q): %v", path, err)
	}
	return b.String()
}

// runPython saves code as file and runs it the way the agent does, with
// `python3 file`. A sandbox failure fails the test; the code's own failure
// is in the result.
func runPython(t testing.TB, s *Sandbox, file, code string, opt sandbox.ExecOptions) sandbox.ExecResult {
	t.Helper()
	writeFile(t, s, file, code)
	res, err := s.Exec(t.Context(), []string{"python3", file}, opt)
	if err != nil {
		t.Fatalf("Exec(%s): %v\nstderr: %s", file, err, res.Stderr)
	}
	return res
}

// hostProcesses returns the host pids whose command line contains marker,
// the way an administrator would look for leftovers with ps.
func hostProcesses(marker string) []int {
	entries, _ := os.ReadDir("/proc")
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		cmdline, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err != nil {
			continue
		}
		if bytes.Contains(cmdline, []byte(marker)) {
			// Zombies have an empty cmdline, so a match is alive.
			pids = append(pids, pid)
		}
	}
	return pids
}

// waitNoProcesses fails unless no process with marker exists. It allows the
// kernel a moment: a SIGKILLed process is gone from /proc a little after its
// parent learns of it.
func waitNoProcesses(t testing.TB, marker string) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Second)
	for {
		pids := hostProcesses(marker)
		if len(pids) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("processes %v (%q) survived", pids, marker)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// marker is a string unique to one test, to find its processes on the host.
func marker(t testing.TB) string {
	id, err := newID()
	if err != nil {
		t.Fatal(err)
	}
	return "terpmark" + id
}
