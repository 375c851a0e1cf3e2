package terptest

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// venvBase is the Python the tests' virtual environments are made from:
// Debian's, as on a fresh machine, never the first python3 on PATH (often a
// pyenv one). Its python3-venv brings the ensurepip that `-m venv` needs.
const venvBase = "/usr/bin/python3"

// pypiTold is done once the skip of the tests that need the package index
// was announced.
var pypiTold sync.Once

// PythonVenv returns the python of a virtual environment that holds what
// installs install, for tests that run real Python clients from PyPI (Open
// WebUI's code executor, jupyter_server). Each of installs is the
// arguments of one `pip install`, run in order, so that one of them may
// carry --no-deps.
//
// The environment is made once per machine and kept in the user's cache
// directory, under a name that is a hash of the base Python's version and
// installs: a later run, or another test asking for the same, takes no
// time, and changing a pin makes a new one. A lock keeps test processes
// that ask at once from making it twice, and one that was not finished is
// made again. Without the package index, or without Debian's python3-venv,
// the test is skipped, loudly ("PYPI TESTS SKIPPED", which .ci/run looks
// for); any other failure of pip fails it.
func PythonVenv(t testing.TB, installs ...string) string {
	t.Helper()
	version, err := exec.CommandContext(context.Background(), venvBase, "-c", "import sys; print(sys.version)").Output()
	if err != nil {
		skipLoudly(t, &pypiTold, fmt.Sprintf("PYPI TESTS SKIPPED: there is no %s to make a virtual environment with (%v); run `make test-deps`", venvBase, err))
	}
	sum := sha256.Sum256([]byte(venvBase + "\n" + string(version) + strings.Join(installs, "\n")))
	dir := filepath.Join(venvRoot(t), hex.EncodeToString(sum[:8]))
	python := filepath.Join(dir, "bin", "python")
	ready := filepath.Join(dir, "terp-test-ready")

	unlock := lockFile(t, dir+".lock")
	defer unlock()
	if _, err := os.Stat(ready); err == nil {
		return python
	}
	if index, err := reachIndex(); err != nil {
		skipLoudly(t, &pypiTold, fmt.Sprintf("PYPI TESTS SKIPPED: the Python package index (%s) is not reachable from this machine (%v)", index, err))
	}
	start := time.Now()
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	if out, err := pythonCommand(venvBase, "-m", "venv", dir).CombinedOutput(); err != nil {
		skipLoudly(t, &pypiTold, fmt.Sprintf("PYPI TESTS SKIPPED: %s cannot make a virtual environment (%v: %s); run `make test-deps` (Debian's python3-venv)", venvBase, err, lastLine(out)))
	}
	for _, install := range installs {
		args := append([]string{"-m", "pip", "install", "--no-input", "--disable-pip-version-check", "--quiet"}, strings.Fields(install)...)
		if out, err := pythonCommand(python, args...).CombinedOutput(); err != nil {
			t.Fatalf("pip install %s: %v\n%s", install, err, out)
		}
	}
	if err := os.WriteFile(ready, []byte(strings.Join(installs, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("made the virtual environment %s in %s: pip install %s", dir, time.Since(start).Round(time.Second), strings.Join(installs, "; pip install "))
	return python
}

// venvRoot is the directory the virtual environments are kept in: the
// user's cache directory, or the temporary one for a user without a home
// (make test-unprivileged runs as nobody).
func venvRoot(t testing.TB) string {
	root, err := os.UserCacheDir()
	if err == nil {
		root = filepath.Join(root, "terp-test", "venvs")
		if err = os.MkdirAll(root, 0o755); err == nil {
			return root
		}
	}
	root = filepath.Join(os.TempDir(), fmt.Sprintf("terp-test-venvs-%d", os.Getuid()))
	if err := os.MkdirAll(root, 0o700); err != nil {
		t.Fatal(err)
	}
	return root
}

// lockFile takes an exclusive lock on path, made if need be, and returns
// what releases it. The lock is the kernel's, so it goes with a test
// process that dies.
func lockFile(t testing.TB, path string) (unlock func()) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX); err != nil {
		_ = f.Close()
		t.Fatalf("lock %s: %v", path, err)
	}
	return func() { _ = f.Close() }
}

// reachIndex dials the package index pip would ask, $PIP_INDEX_URL or
// PyPI's, and returns its address and whether it answered. pip retries a
// dead index for minutes before it gives up; this takes ten seconds at
// most.
func reachIndex() (string, error) {
	host := "pypi.org:443"
	if u, err := url.Parse(os.Getenv("PIP_INDEX_URL")); err == nil && u.Host != "" {
		host = u.Host
		if u.Port() == "" {
			port := "443"
			if u.Scheme == "http" {
				port = "80"
			}
			host = net.JoinHostPort(u.Hostname(), port)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := (&net.Dialer{}).DialContext(ctx, "tcp", host)
	if err != nil {
		return host, err
	}
	return host, c.Close()
}

// pythonCommand runs a Python of the tests' with the environment less what
// points a Python elsewhere (PYTHONPATH, PYTHONHOME, a virtual environment
// of the caller's).
func pythonCommand(python string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(context.Background(), python, args...)
	cmd.Env = PythonEnv(os.Environ())
	return cmd
}

// PythonEnv is env less the variables that would point a Python of the
// tests' at another one's libraries: PYTHONPATH, PYTHONHOME and
// VIRTUAL_ENV.
func PythonEnv(env []string) []string {
	var kept []string
	for _, kv := range env {
		name, _, _ := strings.Cut(kv, "=")
		switch name {
		case "PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV":
		default:
			kept = append(kept, kv)
		}
	}
	return kept
}

// lastLine is the last non-empty line of out, which is where Python says
// why it failed.
func lastLine(out []byte) string {
	lines := bytes.Split(bytes.TrimSpace(out), []byte("\n"))
	return string(lines[len(lines)-1])
}
