package local

import (
	"archive/zip"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/terpdev/terp/internal/egress"
	"github.com/terpdev/terp/internal/kernel"
	"github.com/terpdev/terp/internal/sandbox"
)

// fakeInternet answers for pypi.org at a public address, served by loopback
// servers on the host: the allowlist proxy refuses loopback addresses, and
// no public host is reachable where the tests run. Everything between the
// code and the proxy (namespace, bridge, socket, environment) is real.
func fakeInternet(t *testing.T) (*Backend, int) {
	t.Helper()
	wheel := demoWheel(t)
	hello := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/simple/terpdemo/":
			_, _ = fmt.Fprint(w, `<a href="/packages/terpdemo-1.0-py3-none-any.whl">terpdemo-1.0-py3-none-any.whl</a>`)
		case "/packages/terpdemo-1.0-py3-none-any.whl":
			_, _ = w.Write(wheel)
		default:
			_, _ = fmt.Fprintf(w, "hello from %s", r.Host)
		}
	})
	tlsSrv := httptest.NewTLSServer(hello)
	t.Cleanup(tlsSrv.Close)
	plain := httptest.NewServer(hello)
	t.Cleanup(plain.Close)
	pub := netip.MustParseAddr("151.101.0.223")
	resolve := func(_ context.Context, host string) ([]netip.Addr, error) {
		switch host {
		case "pypi.org", "evil.example":
			return []netip.Addr{pub}, nil
		case "intranet.pypi.org":
			return []netip.Addr{netip.MustParseAddr("10.1.2.3")}, nil
		}
		return nil, fmt.Errorf("no such host %s", host)
	}
	dial := func(ctx context.Context, network, addr string) (net.Conn, error) {
		target := tlsSrv.Listener.Addr().String()
		if strings.HasSuffix(addr, ":80") {
			target = plain.Listener.Addr().String()
		}
		var d net.Dialer
		return d.DialContext(ctx, network, target)
	}
	b, err := New(Config{Root: t.TempDir(), EgressOptions: []egress.Option{egress.WithNet(resolve, dial)}})
	if err != nil {
		t.Fatal(err)
	}
	return b, tlsSrv.Listener.Addr().(*net.TCPAddr).Port
}

// allowlistSandbox creates a sandbox of b in the allowlist mode that is
// closed when the test ends.
func allowlistSandbox(t *testing.T, b *Backend, allow ...string) *Sandbox {
	t.Helper()
	sb, err := b.Create(t.Context(), sandbox.Options{Network: sandbox.Network{Mode: sandbox.NetworkAllowlist, Allow: allow}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sb.Close(context.Background()) })
	return sb.(*Sandbox)
}

// egressProbe fetches through whatever proxy the environment names, the way
// the model's code would, and tries the ways around it.
const egressProbe = `
import os, socket, ssl, urllib.request
ctx = ssl._create_unverified_context()  # httptest's certificate; trust is not under test
def get(url):
    try:
        with urllib.request.urlopen(url, context=ctx, timeout=10) as r:
            return "%%d %%s" %% (r.status, r.read().decode())
    except Exception as e:
        return "error: %%s" %% e
print("allowed:", get("https://pypi.org/simple/"))
print("plain:", get("http://pypi.org/simple/"))
print("denied:", get("https://evil.example/"))
print("private:", get("https://intranet.pypi.org/"))
for name, addr in (("public", ("151.101.0.223", 443)), ("host", ("127.0.0.1", %d))):
    s = socket.socket()
    s.settimeout(3)
    try:
        s.connect(addr)
        print(name + " direct: connected")
    except OSError as e:
        print(name + " direct: failed")
try:
    socket.getaddrinfo("pypi.org", 443)
    print("dns: resolved")
except OSError:
    print("dns: failed")
`

func TestEgressAllowlist(t *testing.T) {
	t.Parallel()
	b, hostPort := fakeInternet(t)
	s := allowlistSandbox(t, b, "pypi.org", "*.pypi.org")

	res := runPython(t, s, "probe.py", fmt.Sprintf(egressProbe, hostPort), sandbox.ExecOptions{Timeout: time.Minute})
	t.Log(res.Stdout, res.Stderr)
	for _, want := range []string{
		"allowed: 200 hello from pypi.org",
		"plain: 200 hello from pypi.org",
		"denied: error: <urlopen error Tunnel connection failed: 403 Forbidden (evil.example is not in the sandbox's allowlist",
		"private: error: <urlopen error Tunnel connection failed: 403 Forbidden (intranet.pypi.org resolves only to private",
		"public direct: failed",
		"host direct: failed",
		"dns: failed",
	} {
		if !strings.Contains(res.Stdout, want) {
			t.Errorf("stdout lacks %q:\n%s%s", want, res.Stdout, res.Stderr)
		}
	}
	if res.ExitCode != 0 {
		t.Errorf("probe exited %d", res.ExitCode)
	}

	// The bridge becomes the command (exec), so exit codes come through.
	res, err := s.Exec(t.Context(), []string{"sh", "-c", "exit 7"}, sandbox.ExecOptions{})
	if err != nil || res.ExitCode != 7 {
		t.Errorf("exit 7 through the bridge: %d %v", res.ExitCode, err)
	}

	// After a pause the proxy is gone; after resume it serves again.
	if _, err := s.Pause(t.Context()); err != nil {
		t.Fatal(err)
	}
	sb2, err := b.Resume(t.Context(), s.ID())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sb2.Close(context.Background()) })
	res = runPython(t, sb2.(*Sandbox), "again.py", fmt.Sprintf(egressProbe, hostPort), sandbox.ExecOptions{Timeout: time.Minute})
	if !strings.Contains(res.Stdout, "allowed: 200 hello from pypi.org") {
		t.Errorf("after resume:\n%s%s", res.Stdout, res.Stderr)
	}
}

// The kernel worker kills its descendants after every run; the bridge must
// not be one of them, or the second run would find no proxy.
func TestEgressAllowlistKernel(t *testing.T) {
	t.Parallel()
	b, _ := fakeInternet(t)
	sb := allowlistSandbox(t, b, "pypi.org")
	k, err := kernel.Start(t.Context(), sb, kernel.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k.Close() })
	code := `import ssl, urllib.request
urllib.request.urlopen("https://pypi.org/", context=ssl._create_unverified_context(), timeout=10).read().decode()`
	for i := range 3 {
		res, err := k.Run(t.Context(), code, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(res.Stdout, "hello from pypi.org") {
			t.Fatalf("run %d: %+v", i+1, res)
		}
	}
}

// demoWheel is a minimal pure-Python wheel: module terpdemo with VALUE = 42.
func demoWheel(t *testing.T) []byte {
	t.Helper()
	var buf bytes.Buffer
	z := zip.NewWriter(&buf)
	for _, f := range []struct{ name, body string }{
		{"terpdemo/__init__.py", "VALUE = 42\n"},
		{"terpdemo-1.0.dist-info/METADATA", "Metadata-Version: 2.1\nName: terpdemo\nVersion: 1.0\n"},
		{"terpdemo-1.0.dist-info/WHEEL", "Wheel-Version: 1.0\nGenerator: terp-test\nRoot-Is-Purelib: true\nTag: py3-none-any\n"},
		{"terpdemo-1.0.dist-info/RECORD", "terpdemo/__init__.py,,\nterpdemo-1.0.dist-info/METADATA,,\nterpdemo-1.0.dist-info/WHEEL,,\nterpdemo-1.0.dist-info/RECORD,,\n"},
	} {
		w, err := z.Create(f.name)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.WriteString(w, f.body)
	}
	if err := z.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// pip install goes through the proxy into /work/.terp/python, and what it
// installed is importable in the next command: the allowlist's purpose.
func TestEgressPipInstall(t *testing.T) {
	t.Parallel()
	b, _ := fakeInternet(t)
	sb := allowlistSandbox(t, b, "pypi.org")
	// Plain HTTP, because the stand-in index's certificate is httptest's.
	res, err := sb.Exec(t.Context(), []string{"python3", "-m", "pip", "install", "--index-url", "http://pypi.org/simple",
		"--trusted-host", "pypi.org", "terpdemo"}, sandbox.ExecOptions{Timeout: 2 * time.Minute})
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("pip install: exit %d %v\n%s%s", res.ExitCode, err, res.Stdout, res.Stderr)
	}
	res, err = sb.Exec(t.Context(), []string{"python3", "-c", "import terpdemo; print(terpdemo.VALUE, terpdemo.__file__)"}, sandbox.ExecOptions{})
	if err != nil || !strings.Contains(res.Stdout, "42 "+egress.UserBase) {
		t.Errorf("import after install: %q %q %v", res.Stdout, res.Stderr, err)
	}
}

func TestEgressRejectsBadPolicy(t *testing.T) {
	t.Parallel()
	for _, n := range []sandbox.Network{
		{Mode: "open"},
		{Mode: sandbox.NetworkAllowlist, Allow: []string{"10.0.0.1"}},
		{Mode: sandbox.NetworkAllowlist, Allow: []string{"https://pypi.org"}},
	} {
		if sb, err := testBackend.Create(t.Context(), sandbox.Options{Network: n}); err == nil {
			_ = sb.Close(context.Background())
			t.Errorf("Create with %+v succeeded", n)
		}
	}
}
