package local

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/terpdev/terp/internal/sandbox"
)

// listen opens a TCP listener on the host's loopback and reports whether
// anything connected to it.
func listen(t *testing.T) (port int, connected func() bool) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	accepted := make(chan struct{}, 1)
	go func() {
		if c, err := ln.Accept(); err == nil {
			c.Close()
			accepted <- struct{}{}
		}
	}()
	return ln.Addr().(*net.TCPAddr).Port, func() bool {
		select {
		case <-accepted:
			return true
		case <-time.After(200 * time.Millisecond):
			return false
		}
	}
}

const netProbe = `
import socket
try:
    socket.create_connection(("127.0.0.1", %d), timeout=3).close()
    print("connect: ok")
except OSError as e:
    print("connect: failed:", e)
try:
    socket.getaddrinfo("example.com", 443)
    print("dns: ok")
except OSError as e:
    print("dns: failed:", e)
# socket.if_nameindex() needs a netlink socket, which the seccomp filter
# refuses; /proc/net/dev lists the same interfaces of this network namespace.
print("interfaces:", sorted(l.split(":")[0].strip() for l in open("/proc/net/dev").readlines()[2:]))
`

func TestNoNetwork(t *testing.T) {
	t.Parallel()
	s := newSandbox(t, sandbox.Options{})
	port, connected := listen(t)
	res := runPython(t, s, "main.py", fmt.Sprintf(netProbe, port), sandbox.ExecOptions{})
	t.Log(res.Stdout)
	for _, want := range []string{"connect: failed", "dns: failed", "interfaces: ['lo']"} {
		if !strings.Contains(res.Stdout, want) {
			t.Errorf("stdout lacks %q:\n%s%s", want, res.Stdout, res.Stderr)
		}
	}
	if connected() {
		t.Error("the host listener accepted a connection from the sandbox")
	}
}

func TestNetworkOption(t *testing.T) {
	t.Parallel()
	s := newSandbox(t, sandbox.Options{Network: sandbox.Network{Mode: sandbox.NetworkFull}})
	port, connected := listen(t)
	res := runPython(t, s, "main.py", fmt.Sprintf(netProbe, port), sandbox.ExecOptions{})
	if !strings.Contains(res.Stdout, "connect: ok") || !connected() {
		t.Errorf("with Options.Network the sandbox could not reach the host:\n%s%s", res.Stdout, res.Stderr)
	}
}

func TestHostFilesInvisible(t *testing.T) {
	t.Parallel()
	s := newSandbox(t, sandbox.Options{})
	other := newSandbox(t, sandbox.Options{})
	writeFile(t, other, "other.txt", "another conversation")

	// A secret in the host's /tmp, which the sandbox's /tmp must not be.
	secret := marker(t)
	hostFile, err := os.CreateTemp("", "terp-secret-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Remove(hostFile.Name()) })
	hostFile.WriteString(secret)
	hostFile.Close()
	paths := []string{
		hostFile.Name(),
		"/etc/shadow",
		"/root",
		"/home",
		testBackend.Root(),  // terp's data, other sandboxes included
		other.HostDir(),     // another sandbox by its host path
		filepath.Dir(s.dir), // this sandbox's own host path
		"/var", "/opt", "/run", "/srv",
	}
	if cwd, _ := os.Getwd(); strings.Count(cwd, "/") > 1 {
		paths = append(paths, cwd) // the source tree, when go test runs there
	}
	var code strings.Builder
	code.WriteString("import os\n")
	for _, p := range paths {
		fmt.Fprintf(&code, "print(%q, os.path.lexists(%q))\n", p, p)
	}
	code.WriteString("print('tmp:', os.listdir('/tmp'))\n")
	// /mnt holds /mnt/data, which is /work, and nothing of the host's.
	code.WriteString("print('mnt:', os.listdir('/mnt'))\n")
	code.WriteString("print('etc:', sorted(os.listdir('/etc')))\n")
	res := runPython(t, s, "main.py", code.String(), sandbox.ExecOptions{})
	if res.ExitCode != 0 {
		t.Fatalf("exit %d: %s", res.ExitCode, res.Stderr)
	}
	t.Log(res.Stdout)
	for _, p := range paths {
		if !strings.Contains(res.Stdout, fmt.Sprintf("%s False\n", p)) {
			t.Errorf("%s is visible in the sandbox", p)
		}
	}
	if !strings.Contains(res.Stdout, "mnt: ['data']\n") {
		t.Errorf("/mnt holds more than data, the other name of /work")
	}
	if strings.Contains(res.Stdout, secret) || !strings.Contains(res.Stdout, "tmp: []") {
		t.Errorf("the host's /tmp leaks into the sandbox")
	}
	_, etc, _ := strings.Cut(res.Stdout, "etc: ")
	for _, name := range []string{"shadow", "sudoers", "ssh", "environment", "machine-id"} {
		if strings.Contains(etc, "'"+name) {
			t.Errorf("/etc holds %s, more than the sandbox needs", name)
		}
	}
}

func TestReadOnlyOutsideWork(t *testing.T) {
	t.Parallel()
	s := newSandbox(t, sandbox.Options{})
	code := `
for p in ["/usr/terp-test", "/terp-test", "/etc/terp-test", "/etc/passwd", "/bin/terp-test"]:
    try:
        open(p, "w").write("x")
        print(p, "writable")
    except OSError as e:
        print(p, "refused")
for p in ["/work/ok", "/tmp/ok", "/dev/shm/ok"]:
    open(p, "w").write("x")
    print(p, "writable")
`
	res := runPython(t, s, "main.py", code, sandbox.ExecOptions{})
	if strings.Count(res.Stdout, "refused") != 5 || strings.Count(res.Stdout, "writable") != 3 {
		t.Errorf("unexpected write permissions:\n%s%s", res.Stdout, res.Stderr)
	}
}

// TestHostEnvironmentInvisible plants a secret in terp's environment, where
// API keys live, and looks for it everywhere the code could: its own
// environment, bwrap's (pid 1 in the sandbox) and every process it can see.
func TestHostEnvironmentInvisible(t *testing.T) {
	secret := marker(t)
	t.Setenv("TERP_TEST_API_KEY", secret)
	s := newSandbox(t, sandbox.Options{})
	code := `
import os, glob
print(dict(os.environ))
for f in ["/proc/self/environ", "/proc/1/environ"] + glob.glob("/proc/[0-9]*/environ"):
    try:
        print(f, open(f, "rb").read())
    except OSError as e:
        print(f, "unreadable:", e)
`
	res := runPython(t, s, "main.py", code, sandbox.ExecOptions{})
	if res.ExitCode != 0 || !strings.Contains(res.Stdout, "/proc/1/environ") {
		t.Fatalf("exit %d\nstdout: %s\nstderr: %s", res.ExitCode, res.Stdout, res.Stderr)
	}
	if strings.Contains(res.Stdout, secret) || strings.Contains(res.Stdout, "TERP_TEST_API_KEY") {
		t.Errorf("the host environment reached the sandbox:\n%s", res.Stdout)
	}
	if home := os.Getenv("HOME"); home != "/tmp" && strings.Contains(res.Stdout, "'"+home+"'") {
		t.Errorf("the host's HOME reached the sandbox:\n%s", res.Stdout)
	}
}

func TestRunsUnprivileged(t *testing.T) {
	t.Parallel()
	s := newSandbox(t, sandbox.Options{})
	code := `
import getpass, os, pwd, subprocess
print("uid", os.getuid(), os.getgid())
print("user", getpass.getuser(), pwd.getpwuid(os.getuid()).pw_dir, os.path.expanduser("~"))
status = open("/proc/self/status").read()
print([l for l in status.splitlines() if l.startswith(("CapEff", "CapBnd"))])
r = subprocess.run(["unshare", "--user", "true"], capture_output=True)
print("nested userns", "refused" if r.returncode else "allowed")
print("owner of /work", os.stat("/work").st_uid)
`
	res := runPython(t, s, "main.py", code, sandbox.ExecOptions{})
	for _, want := range []string{
		"uid 1000 1000",
		"user sandbox /tmp /tmp",
		"CapEff:\\t0000000000000000", "CapBnd:\\t0000000000000000",
		"owner of /work 1000",
	} {
		if !strings.Contains(res.Stdout, want) {
			t.Errorf("stdout lacks %q:\n%s%s", want, res.Stdout, res.Stderr)
		}
	}
	if testBackend.features.disableUserns && !strings.Contains(res.Stdout, "nested userns refused") {
		t.Errorf("the code can create user namespaces:\n%s", res.Stdout)
	}
}
