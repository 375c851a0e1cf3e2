package local

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/terpdev/terp/internal/egress"
	"github.com/terpdev/terp/internal/egress/egresstest"
	"github.com/terpdev/terp/internal/kernel"
	"github.com/terpdev/terp/internal/sandbox"
	"github.com/terpdev/terp/internal/terptest"
)

// fakeInternet is a backend whose allowlist proxy reaches egresstest's
// stand-in hosts, and a port on the host's loopback the code must not reach.
func fakeInternet(t *testing.T) (*Backend, int) {
	t.Helper()
	b, err := New(Config{Root: terptest.TempDir(t), EgressOptions: egresstest.Options(t)})
	if err != nil {
		t.Fatal(err)
	}
	port, _ := listen(t)
	return b, port
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

func TestEgressAllowlist(t *testing.T) {
	t.Parallel()
	b, hostPort := fakeInternet(t)
	s := allowlistSandbox(t, b, "pypi.org", "*.pypi.org")

	res := runPython(t, s, "probe.py", fmt.Sprintf(egresstest.Probe, hostPort), sandbox.ExecOptions{Timeout: time.Minute})
	t.Log(res.Stdout, res.Stderr)
	for _, want := range egresstest.Want {
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
	res = runPython(t, sb2.(*Sandbox), "again.py", fmt.Sprintf(egresstest.Probe, hostPort), sandbox.ExecOptions{Timeout: time.Minute})
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
