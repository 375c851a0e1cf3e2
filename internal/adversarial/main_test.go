package adversarial

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/terpdev/terp/internal/kernel"
	"github.com/terpdev/terp/internal/sandbox"
	"github.com/terpdev/terp/internal/sandbox/local"
	"github.com/terpdev/terp/internal/terptest"
)

// The suite runs real bubblewrap and real Python: a sandbox is only worth
// what it proves on a real kernel. Missing tools fail the run loudly rather
// than skip it, so CI cannot go green without testing anything.

// host is what the tests plant on the host for the code to go after.
var host struct {
	backend *local.Backend
	root    string // the backend's Root: terp's data dir for sandboxes
	// secret is a string that appears only in host files the code must not
	// read, and in the API key the test process holds.
	secret     string
	tmpSecret  string // a file in the host's /tmp holding secret
	rootSecret string // a file in /root holding secret
	apiKey     string // TERP_API_KEY / OPENAI_API_KEY in the test's env
	port       int    // a TCP listener on the host's 127.0.0.1
	accepted   atomic.Int64
}

func TestMain(m *testing.M) {
	code, err := setup()
	if err != nil {
		fmt.Fprintln(os.Stderr, "FAIL: the adversarial suite cannot run here:", err)
		os.Exit(1)
	}
	if code == 0 {
		code = m.Run()
	}
	teardown()
	os.Exit(code)
}

func setup() (int, error) {
	if _, err := exec.LookPath("bwrap"); err != nil {
		return 1, fmt.Errorf("it needs bubblewrap and Debian's Python libraries: " +
			"sudo apt-get install bubblewrap python3-numpy python3-pandas python3-matplotlib")
	}
	host.secret = "terpsecret" + randomHex()
	host.apiKey = "sk-terp-" + host.secret
	for _, k := range []string{"TERP_API_KEY", "OPENAI_API_KEY", "GPUOS_API_KEY"} {
		os.Setenv(k, host.apiKey)
	}
	f, err := os.CreateTemp("", "terp-adversarial-secret-")
	if err != nil {
		return 1, err
	}
	fmt.Fprintln(f, host.secret)
	f.Close()
	host.tmpSecret = f.Name()
	if home, err := os.UserHomeDir(); err == nil {
		p := filepath.Join(home, "terp-adversarial-secret-"+randomHex())
		if os.WriteFile(p, []byte(host.secret+"\n"), 0o600) == nil {
			host.rootSecret = p
		}
	}
	host.root, err = os.MkdirTemp("", "terp-adversarial-")
	if err != nil {
		return 1, err
	}
	// The backend's data dir holds the secret too: another conversation's
	// notes must not be readable from this one.
	if err := os.WriteFile(filepath.Join(host.root, "notes.txt"), []byte(host.secret), 0o600); err != nil {
		return 1, err
	}
	host.backend, err = local.New(local.Config{Root: host.root})
	if err == nil {
		err = host.backend.Check(context.Background())
	}
	if err != nil {
		return 1, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 1, err
	}
	host.port = ln.Addr().(*net.TCPAddr).Port
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			host.accepted.Add(1)
			c.Close()
		}
	}()
	return 0, nil
}

func teardown() {
	stopCPUOS()
	os.Remove(host.tmpSecret)
	if host.rootSecret != "" {
		os.Remove(host.rootSecret)
	}
	if host.root != "" {
		os.RemoveAll(host.root)
	}
	terptest.RemoveBinary()
}

func randomHex() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// newSandbox creates a sandbox that is closed when the test ends.
func newSandbox(t testing.TB, opt sandbox.Options) sandbox.Sandbox {
	t.Helper()
	if opt.Timeout == 0 {
		opt.Timeout = 10 * time.Minute
	}
	sbx, err := host.backend.Create(context.Background(), opt)
	if err != nil {
		t.Fatalf("create sandbox: %v", err)
	}
	t.Cleanup(func() {
		if err := sbx.Close(context.Background()); err != nil {
			t.Errorf("close sandbox: %v", err)
		}
	})
	return sbx
}

// runScript runs code the way script mode does and fails the test only if
// the sandbox itself fails.
func runScript(t testing.TB, sbx sandbox.Sandbox, code string, timeout time.Duration) kernel.Result {
	t.Helper()
	k, err := kernel.Start(t.Context(), sbx, kernel.Options{Fresh: true, MaxStdout: 64 << 10, MaxStderr: 64 << 10})
	if err != nil {
		t.Fatalf("start: %v", err)
	}
	defer func() { _ = k.Close() }()
	res, err := k.Run(t.Context(), code, timeout)
	if err != nil {
		t.Fatalf("run: %v", err)
	}
	return res
}

// pidsInNamespace lists the host pids of the processes in pid namespace
// ino, as an administrator would look for leftovers.
func pidsInNamespace(ino uint64) []int {
	entries, _ := os.ReadDir("/proc")
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		var st unix.Stat_t
		if unix.Stat("/proc/"+e.Name()+"/ns/pid", &st) == nil && st.Ino == ino {
			pids = append(pids, pid)
		}
	}
	return pids
}

// waitNamespaceEmpty fails unless no host process is left in the pid
// namespace the code reported as "PIDNS <inode>". It allows the kernel a
// moment to remove killed processes from /proc.
func waitNamespaceEmpty(t testing.TB, stdout string) {
	t.Helper()
	ino := namespaceOf(t, stdout)
	// The kernel kills what is left once the namespace's init exits; on a
	// loaded machine the dying can take a few seconds. Survival is what
	// counts here, not speed.
	deadline := time.Now().Add(10 * time.Second)
	for {
		pids := pidsInNamespace(ino)
		if len(pids) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("host processes %v of the sandbox's pid namespace survived the step", pids)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func namespaceOf(t testing.TB, stdout string) uint64 {
	t.Helper()
	for line := range strings.Lines(stdout) {
		if rest, ok := strings.CutPrefix(line, "PIDNS "); ok {
			ino, err := strconv.ParseUint(strings.TrimSpace(rest), 10, 64)
			if err == nil {
				return ino
			}
		}
	}
	t.Fatalf("the code did not report its pid namespace:\n%s", stdout)
	return 0
}

// reportNS is Python that prints the sandbox's pid namespace inode for
// waitNamespaceEmpty.
const reportNS = "import os as _os\nprint('PIDNS', _os.stat('/proc/self/ns/pid').st_ino, flush=True)\n"

// hasSecret reports whether out holds the secret the tests plant.
func hasSecret(out string) bool {
	return strings.Contains(out, host.secret)
}
