package openaiapi

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/terpdev/terp/internal/llm/llmtest"
	"github.com/terpdev/terp/internal/terptest"
)

// Codex CLI (npm's @openai/codex), with terp serve as a custom provider on
// the Responses API, sends function tools only: terp serve answers it as
// an adapter, the model's call to Codex's shell tool comes out, Codex runs
// it and sends its output back, and the answer comes from it.
func TestCodexThroughTheAdapter(t *testing.T) {
	node := terptest.Node(t, nodeSDK, "@openai/codex")
	codex, err := filepath.Abs(filepath.Join(nodeSDK, "node_modules", "@openai", "codex", "bin", "codex.js"))
	if err != nil {
		t.Fatal(err)
	}
	s := llmtest.New(t,
		func(req llmtest.Request) llmtest.Reply {
			offered := false
			for _, tool := range req.Tools {
				offered = offered || tool.Function.Name == "exec_command"
			}
			if !offered {
				t.Errorf("the model is not offered Codex's exec_command: %+v", req.Tools)
			}
			return llmtest.Reply{Calls: []llmtest.Call{{Name: "exec_command", Arguments: `{"cmd": "echo terp-was-here"}`}}}
		},
		func(req llmtest.Request) llmtest.Reply {
			last := req.Messages[len(req.Messages)-1]
			if last.Role != "tool" || !strings.Contains(last.Content, "terp-was-here") {
				t.Errorf("the model got %+v; want the command's output", last)
			}
			return llmtest.Answer("Codex ran it: terp-was-here.")
		})
	ts := newTestServer(t, s)
	home, work := terptest.TempDir(t), terptest.TempDir(t)
	config := `model = "test-model"
model_provider = "terp"
[model_providers.terp]
name = "terp serve"
base_url = "` + ts.URL + `/v1"
env_key = "TERP_SERVE_KEY"
wire_api = "responses"
`
	if err := os.WriteFile(filepath.Join(home, "config.toml"), []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	c, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	// Codex's own sandbox (Landlock and seccomp) is not what is tested,
	// and may not start where the tests run as root in a container.
	cmd := exec.CommandContext(c, node, codex, "exec", "--skip-git-repo-check", "--sandbox", "danger-full-access", "Say something from the shell.")
	cmd.Dir = work
	cmd.Env = append(os.Environ(), "CODEX_HOME="+home, "TERP_SERVE_KEY="+aliceKey)
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "Codex ran it: terp-was-here.") {
		t.Fatalf("codex exec: %v\n%s", err, out)
	}
	if n := len(s.Requests()); n != 2 {
		t.Errorf("the model was asked %d times, want 2", n)
	}
}
