package cli

import (
	"io/fs"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/terpdev/terp/internal/terptest"
)

// A client that keeps its sandbox by a handle (sessionless HTTP) or an
// x-session-id (vLLM) finds its files again after terp mcp stops on
// SIGTERM and starts again on the same data directory, on the real local
// sandbox: its variables are gone with the old kernel, and the result says
// so. The handle is nowhere on disk. A restart after --expire-after has
// passed finds the sandbox expired, and leaves no record of it behind.
func TestMCPKeepsSandboxesAcrossARestart(t *testing.T) {
	const token = "mcp-test-0123456789abcdef"
	env := homeEnv(t, map[string]string{"TERP_MCP_TOKEN": token})
	start := func(args ...string) *serveProcess {
		return startProcess(t, env, `serving MCP on (http://\S+/mcp)`, append([]string{"mcp", "--http", "127.0.0.1:0"}, args...)...)
	}
	connect := func(p *serveProcess, tr http.RoundTripper) *client {
		t.Helper()
		cs, err := mcpClient().Connect(mcpCtx(t), &mcp.StreamableClientTransport{Endpoint: p.base, HTTPClient: &http.Client{Transport: tr}}, nil)
		if err != nil {
			t.Fatalf("connect: %v\n%s", err, p.log)
		}
		t.Cleanup(func() { _ = cs.Close() })
		return &client{ClientSession: cs}
	}
	stop := func(p *serveProcess) {
		t.Helper()
		if err := p.stop(t, syscall.SIGTERM); err != nil {
			t.Fatalf("terp mcp stopped with %v:\n%s", err, p.log)
		}
	}

	first := start()
	byHandle := connect(first, authorized{token})
	runCode(t, byHandle, "x = 41\nopen('/work/kept.txt', 'w').write('by handle')")
	if byHandle.handle == "" {
		t.Fatal("the sessionless client got no handle")
	}
	byID := connect(first, vllmClient{token, "A"})
	runCode(t, byID, "y = 1\nopen('/work/a.txt', 'w').write('by id')")
	stop(first)
	if !strings.Contains(first.log.String(), "kept the sandboxes") {
		t.Errorf("terp mcp did not say it kept the sandboxes:\n%s", first.log)
	}

	// What terp mcp keeps on disk names the sandboxes, not by the handle.
	state := filepath.Join(env["XDG_DATA_HOME"], "terp", "mcp")
	records := 0
	err := filepath.WalkDir(state, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if strings.Contains(string(b), byHandle.handle) {
			t.Errorf("%s holds the handle", p)
		}
		if strings.Contains(filepath.ToSlash(p), "/containers/") {
			records++
			if info, err := d.Info(); err != nil || info.Mode().Perm() != 0o600 {
				t.Errorf("%s: mode %v (%v), want 0600", p, info.Mode(), err)
			}
		}
		return nil
	})
	if err != nil || records != 2 {
		t.Fatalf("%d container records in %s (%v), want the 2 sandboxes", records, state, err)
	}

	second := start()
	again := connect(second, authorized{token})
	again.handle = byHandle.handle
	res := runCode(t, again, "import os\nprint(open('/work/kept.txt').read(), 'x' in globals())")
	if got := textOf(res); !strings.Contains(got, "by handle False") || !strings.Contains(got, "Python was restarted") {
		t.Errorf("the handle after a restart read %q, want its file, no variable, and a note that Python restarted", got)
	}
	if got := textOf(runCode(t, connect(second, vllmClient{token, "A"}), "print(open('/work/a.txt').read(), 'y' in globals())")); !strings.Contains(got, "by id False") {
		t.Errorf("x-session-id A after a restart read %q, want its file and no variable", got)
	}
	if got := textOf(runCode(t, connect(second, vllmClient{token, "B"}), "import os\nprint(os.listdir('/work'))")); strings.Contains(got, "a.txt") || strings.Contains(got, "kept.txt") {
		t.Errorf("x-session-id B after a restart saw %q, want a sandbox of its own", got)
	}
	forged := "sbx_" + strings.Repeat("a", 26)
	if res := call(t, again, "python", map[string]any{"code": "print(1)", "sandbox": forged}); !res.IsError || !strings.Contains(textOf(res), "no sandbox "+forged) {
		t.Errorf("a made-up handle: IsError %v, %q; want a tool error", res.IsError, textOf(res))
	}
	stop(second)

	// Stopped for longer than --expire-after: the next terp mcp expires
	// the sandboxes at start, closing their conversations, which stay.
	third := start("--expire-after", "1s")
	waitFor(t, func() bool { return strings.Count(third.log.String(), "expired a sandbox") == 3 }, "the three sandboxes to expire")
	res = call(t, connect(third, authorized{token}), "python", map[string]any{"code": "print(1)", "sandbox": byHandle.handle})
	if !res.IsError || !strings.Contains(textOf(res), "expired after 1s") {
		t.Errorf("the handle after it expired: IsError %v, %q; want a tool error saying it expired", res.IsError, textOf(res))
	}
	entries, err := os.ReadDir(filepath.Join(state, "containers"))
	if err != nil || len(entries) != 0 {
		t.Errorf("container records left after expiry: %v, %v", entries, err)
	}
	if r := terp(t, env, "", "sessions", "ls"); len(strings.Split(strings.TrimSpace(r.stdout), "\n")) != 1+3 {
		t.Errorf("terp sessions ls lists %q, want the three conversations kept", r.stdout)
	}
}

// A stdio client restarts terp mcp whenever it restarts itself: the first
// result of its session gives the sandbox's handle, and after the client
// closes terp mcp and starts a new one, a call naming the handle finds the
// files, on the real local sandbox.
func TestMCPStdioSandboxOutlivesARestart(t *testing.T) {
	env := homeEnv(t, nil)
	start := func() (*client, *lockedBuffer) {
		t.Helper()
		cmd := exec.Command(terptest.Binary(t), "mcp")
		for k, v := range env {
			cmd.Env = append(cmd.Env, k+"="+v)
		}
		cmd.Env = append(cmd.Env, "PATH="+os.Getenv("PATH"))
		stderr := &lockedBuffer{}
		cmd.Stderr = stderr
		cs, err := mcpClient().Connect(mcpCtx(t), &mcp.CommandTransport{Command: cmd}, nil)
		if err != nil {
			t.Fatalf("connect: %v\n%s", err, stderr.String())
		}
		return &client{ClientSession: cs}, stderr
	}
	first, stderr := start()
	res := runCode(t, first, "x = 1\nopen('/work/stdio.txt', 'w').write('kept')")
	if first.handle == "" || !strings.Contains(textOf(res), "after terp mcp restarts") {
		t.Fatalf("the stdio session's first result gave no handle: %q, _meta %v", textOf(res), res.Meta)
	}
	if err := first.Close(); err != nil || stderr.String() != "" {
		t.Fatalf("close: %v; terp mcp said on stderr:\n%s", err, stderr.String())
	}

	second, stderr := start()
	defer func() { _ = second.Close() }()
	second.handle = first.handle
	got := textOf(runCode(t, second, "print(open('/work/stdio.txt').read(), 'x' in globals())"))
	if !strings.Contains(got, "kept False") || !strings.Contains(got, "Python was restarted") {
		t.Errorf("the handle in a new terp mcp read %q, want the file, no variable, and a note that Python restarted", got)
	}
	if s := stderr.String(); s != "" {
		t.Errorf("terp mcp said on stderr:\n%s", s)
	}
}
