package openaiapi_test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/terpdev/terp/internal/llm/llmtest"
	"github.com/terpdev/terp/internal/terptest"
)

// litellmProxy is LiteLLM's proxy from PyPI. Its newest releases need a
// litellm-proxy package PyPI does not serve; 1.80.0 brings its own.
const litellmProxy = "litellm[proxy]==1.80.0"

// LiteLLM's proxy, with terp serve as its upstream for the alias model,
// gives its own clients the code interpreter: a question runs code in a
// container, the history sent back goes on in it, streamed and not.
func TestLiteLLMProxyInFront(t *testing.T) {
	python := terptest.PythonVenv(t, litellmProxy)
	upstream := llmtest.New(t, llmtest.Fixed(llmtest.RunPython("x = 41\nprint(x)")), answerFromOutput(t),
		llmtest.Fixed(llmtest.RunPython("print(x + 1)")), answerFromOutput(t))
	env := newChatEnv(t, chatSandboxes()[1], upstream, chatOptions{})
	dir := terptest.TempDir(t)
	cfg := filepath.Join(dir, "litellm.yaml")
	if err := os.WriteFile(cfg, []byte(fmt.Sprintf(`model_list:
  - model_name: analyst
    litellm_params:
      model: openai/test-model+python
      api_base: %s/v1
      api_key: %s
`, env.http.URL, aliceKey)), 0o600); err != nil {
		t.Fatal(err)
	}
	port := freePort(t)
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, filepath.Join(filepath.Dir(python), "litellm"), "--config", cfg, "--host", "127.0.0.1", "--port", fmt.Sprint(port), "--telemetry", "False")
	// The model price map ships with the package: nothing is fetched.
	cmd.Env = append(os.Environ(), "LITELLM_LOCAL_MODEL_COST_MAP=True", "NO_DOCKER=1")
	var log strings.Builder
	cmd.Stdout, cmd.Stderr = &log, &log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cancel(); _ = cmd.Wait() })
	base := fmt.Sprintf("http://127.0.0.1:%d", port)
	for deadline := time.Now().Add(90 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		if resp, err := http.Get(base + "/health/liveliness"); err == nil {
			resp.Body.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("LiteLLM's proxy did not start:\n%s", log.String())
		}
	}
	c := openai.NewClient(option.WithBaseURL(base+"/v1"), option.WithAPIKey("sk-anything"), option.WithMaxRetries(0))
	first, err := c.Chat.Completions.New(t.Context(), openai.ChatCompletionNewParams{Model: "analyst", Messages: userMessages("Set x to 41.")})
	if err != nil {
		t.Fatalf("%v\n%s", err, log.String())
	}
	answer := first.Choices[0].Message.Content
	if answer != "The code says: 41" {
		t.Fatalf("through LiteLLM the answer is %q", answer)
	}
	stream := c.Chat.Completions.NewStreaming(t.Context(), openai.ChatCompletionNewParams{Model: "analyst",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Set x to 41."), openai.AssistantMessage(answer), openai.UserMessage("And x + 1?")}})
	var said strings.Builder
	for stream.Next() {
		if ch := stream.Current(); len(ch.Choices) > 0 {
			said.WriteString(ch.Choices[0].Delta.Content)
		}
	}
	if err := stream.Err(); err != nil || said.String() != "The code says: 42" {
		t.Errorf("the follow-up through LiteLLM streamed %q, %v; want x kept (42)\n%s", said.String(), err, log.String())
	}
}

// freePort is a TCP port nothing listens on now.
func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}
