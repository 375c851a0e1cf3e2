package adversarial

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/terpdev/terp/internal/llm/llmtest"
	"github.com/terpdev/terp/internal/sandbox"
	"github.com/terpdev/terp/internal/terptest"
)

// TestAskDockerHostile runs the real binary with --sandbox docker through
// one conversation of hostile steps: escape sequences and binary output,
// an infinite loop, a loop that ignores SIGINT, SIGKILL to the parent, pid
// 1, -1 and terp's own host pid, a fork bomb and an environment dump. After
// each, the next step must work; terp must finish with the answer and
// never print a raw escape sequence; the API key must never reach a tool
// result.
func TestAskDockerHostile(t *testing.T) {
	t.Parallel()
	dockerTarget(t)
	bin := terptest.Binary(t)
	var terpPid atomic.Int64
	hostile := []func() string{
		fixedCode(`import sys, os
evil = "\x1b]0;pwned\x07\x1b[2J\x1b]52;c;ZXZpbA==\x07\u202eblue\x9b1m"
print(evil); print(evil, file=sys.stderr)
sys.stdout.flush(); os.write(1, bytes(range(256)) + b"\xff\xfe\xc0\x80")
`),
		fixedCode("while True:\n    pass\n"),
		fixedCode("import signal\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\nwhile True:\n    pass\n"),
		func() string {
			return fmt.Sprintf(`import os, signal
for pid in [os.getppid(), 1, %d] + list(range(2, 300)):
    if pid != os.getpid():
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
os.kill(-1, signal.SIGKILL)
`, terpPid.Load())
		},
		fixedCode("import os, time\nn = 0\ntry:\n    while n < 10000:\n        if os.fork() == 0:\n            time.sleep(60); os._exit(0)\n        n += 1\nexcept OSError:\n    pass\nprint(n)\n"),
		fixedCode("import os\nprint(dict(os.environ))\nprint(open('/proc/self/environ', 'rb').read())\n"),
	}
	noKey := func(req llmtest.Request) {
		if strings.Contains(req.LastTool(), host.apiKey) || strings.Contains(req.LastTool(), "API_KEY") {
			t.Errorf("a tool result holds the API key: %s", req.LastTool())
		}
	}
	var steps []llmtest.Step
	for i, code := range hostile {
		if i == 0 {
			steps = append(steps, func(llmtest.Request) llmtest.Reply { return llmtest.RunPython(code()) })
		} else {
			steps = append(steps, func(req llmtest.Request) llmtest.Reply {
				if res, _ := req.ToolResult(); strings.TrimSpace(res.Stdout) != "alive" {
					t.Errorf("after hostile step %d the next step printed %q (%s)", i-1, res.Stdout, res.Note)
				}
				return llmtest.RunPython(code())
			})
		}
		steps = append(steps, thenRun(noKey, aliveCode))
	}
	steps = append(steps, answerIfAlive(t))
	srv := model(t, steps...)

	home := terptest.TempDir(t)
	cmd := exec.Command(bin, "ask", "--prewarm=", "--sandbox", "docker", "--docker-image", terptest.DockerImage(t), "be hostile")
	cmd.Env = []string{
		"PATH=" + os.Getenv("PATH"),
		"HOME=" + home,
		"XDG_DATA_HOME=" + filepath.Join(home, "data"),
		"XDG_CONFIG_HOME=" + filepath.Join(home, "config"),
		"TERP_BASE_URL=" + srv.BaseURL(),
		"TERP_MODEL=test-model",
		"TERP_API_KEY=" + host.apiKey,
		"TERP_MAX_STEPS=20",
		"TERP_PROCESS_LIMIT=64",
		"TERP_TIMEOUT=3s",
	}
	if h := os.Getenv("DOCKER_HOST"); h != "" {
		cmd.Env = append(cmd.Env, "DOCKER_HOST="+h)
	}
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	terpPid.Store(int64(cmd.Process.Pid))
	err := cmd.Wait()
	t.Cleanup(func() { removeConversationSandboxes(t, home) })
	if err != nil || strings.TrimSpace(out.String()) != "alive" {
		t.Errorf("terp: %v, stdout %q\nstderr:\n%s", err, out.String(), clip(errOut.String()))
	}
	for name, b := range map[string]string{"stdout": out.String(), "stderr": errOut.String()} {
		for _, bad := range []string{"\x1b", "\x07", "\u202e", "\u009b"} {
			if strings.Contains(b, bad) {
				t.Errorf("%s passes %q through", name, bad)
			}
		}
	}
	for i, req := range srv.Requests()[1:] {
		if res, err := req.ToolResult(); err == nil && i%2 == 0 {
			t.Logf("hostile step %d: exit %d, timed out %v, note %q", i/2, res.ExitCode, res.TimedOut, clip(res.Note))
		}
	}
}

func fixedCode(code string) func() string { return func() string { return code } }

// removeConversationSandboxes resumes and closes the Docker sandboxes the
// conversations under home left paused, so the test leaves no container or
// volume on the daemon.
func removeConversationSandboxes(t *testing.T, home string) {
	files, _ := filepath.Glob(filepath.Join(home, "data", "*", "conversations", "*", "conversation.json"))
	more, _ := filepath.Glob(filepath.Join(home, "data", "conversations", "*", "conversation.json"))
	files = append(files, more...)
	if len(files) == 0 {
		t.Errorf("no conversation was stored under %s", home)
	}
	b := dockerTarget(t).b
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Error(err)
			continue
		}
		var conv struct {
			Sandbox struct {
				SessionID string `json:"session_id"`
			} `json:"sandbox"`
		}
		if err := json.Unmarshal(data, &conv); err != nil || conv.Sandbox.SessionID == "" {
			t.Errorf("%s: no sandbox session (%v)", f, err)
			continue
		}
		sbx, err := b.Resume(context.Background(), sandbox.SessionID(conv.Sandbox.SessionID))
		if err != nil {
			t.Errorf("resume the conversation's sandbox to remove it: %v", err)
			continue
		}
		if err := sbx.Close(context.Background()); err != nil {
			t.Errorf("remove the conversation's sandbox: %v", err)
		}
	}
}
