package cli

import (
	"context"
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/terpdev/terp/internal/llm/llmtest"
	"github.com/terpdev/terp/internal/sandbox/local"
	"github.com/terpdev/terp/internal/terptest"
)

// TestAskOnCpuosServedSandbox runs terp ask with --sandbox cpuos against
// what `terp sandbox serve` runs, over real HTTP on 127.0.0.1: the answer is
// computed by code that ran in a sandbox of the server.
func TestAskOnCpuosServedSandbox(t *testing.T) {
	root := terptest.TempDir(t)
	backend, err := local.New(local.Config{Root: root})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- serveSandboxes(ctx, &strings.Builder{}, ln, backend, "served-token") }()
	defer func() {
		cancel()
		if err := <-served; err != nil {
			t.Errorf("serve: %v", err)
		}
	}()

	s := llmtest.New(t, llmtest.Fixed(llmtest.RunPython(growthCode)), answerFromTool(t))
	env := serverEnv(s)
	env["CPUOS_API_KEY"] = "served-token"
	out := filepath.Join(terptest.TempDir(t), "out")
	r := terp(t, env, "", "ask", "--json", "--sandbox", "cpuos", "--cpuos-url", "http://"+ln.Addr().String(),
		"-o", out, "-f", salesCSV(t), "Which month grew the most?")
	if r.code != 0 {
		t.Fatalf("exit %d, stderr:\n%s", r.code, r.stderr)
	}
	var got askJSON
	if err := json.Unmarshal([]byte(r.stdout), &got); err != nil {
		t.Fatalf("stdout is not one JSON object: %v\n%s", err, r.stdout)
	}
	if want := "The month that grew the most: 2025-12 26450"; got.Answer != want {
		t.Errorf("answer = %q, want %q", got.Answer, want)
	}
	if len(got.Files) != 1 || got.Files[0].SandboxPath != "/work/chart.png" {
		t.Errorf("files = %+v, want only /work/chart.png", got.Files)
	}
	entries, _ := os.ReadDir(root)
	if !slices.ContainsFunc(entries, os.DirEntry.IsDir) {
		t.Error("the server's backend holds no sandbox: the code did not run there")
	}

	// A wrong key is refused with the variable named.
	env["CPUOS_API_KEY"] = "wrong"
	r = terp(t, env, "", "ask", "--sandbox", "cpuos", "--cpuos-url", "http://"+ln.Addr().String(), "What is 1+1?")
	if r.code == 0 || !strings.Contains(r.stderr, "CPUOS_API_KEY") {
		t.Errorf("wrong key: exit %d, stderr:\n%s", r.code, r.stderr)
	}
}

func TestSandboxServeRefuses(t *testing.T) {
	r := terp(t, nil, "", "sandbox", "serve", "--listen", "127.0.0.1:0")
	if r.code != 2 || !strings.Contains(r.stderr, "CPUOS_API_KEY") {
		t.Errorf("no token: exit %d, stderr:\n%s", r.code, r.stderr)
	}
	r = terp(t, map[string]string{"MY_TOKEN": "x"}, "", "sandbox", "serve", "--token-env", "MY_TOKEN", "--listen", "0.0.0.0:0")
	if r.code != 2 || !strings.Contains(r.stderr, "--allow-remote") {
		t.Errorf("remote address: exit %d, stderr:\n%s", r.code, r.stderr)
	}
	tok := map[string]string{"CPUOS_API_KEY": "x"}
	r = terp(t, tok, "", "sandbox", "serve", "--isolation", "vm", "--listen", "127.0.0.1:0")
	if r.code != 2 || !strings.Contains(r.stderr, "use bwrap") {
		t.Errorf("unknown isolation: exit %d, stderr:\n%s", r.code, r.stderr)
	}
	// Pod mode runs the code as serve's own user, which must not be root,
	// in a /work that must be a volume of its own (see package pod).
	if os.Geteuid() == 0 {
		r = terp(t, tok, "", "sandbox", "serve", "--isolation", "pod", "--listen", "127.0.0.1:0")
		if r.code == 0 || !strings.Contains(r.stderr, "refusing to run the code as root") {
			t.Errorf("pod mode as root: exit %d, stderr:\n%s", r.code, r.stderr)
		}
	}
	for addr, ok := range map[string]bool{"127.0.0.1:1": true, "[::1]:1": true, "localhost:1": true, "10.0.0.1:1": false, ":1": false} {
		if err := checkListen(addr, false); (err == nil) != ok {
			t.Errorf("checkListen(%q) = %v", addr, err)
		}
	}
}
