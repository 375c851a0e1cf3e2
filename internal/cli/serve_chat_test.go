package cli

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/terpdev/terp/internal/llm/llmtest"
	"github.com/terpdev/terp/internal/terptest"
)

// startGateway runs `terp serve` with args in this process, on a real local
// sandbox under a temporary data directory, and returns the base URL it
// says it serves; the server stops when the test ends.
func startGateway(t *testing.T, env map[string]string, args ...string) string {
	t.Helper()
	home := terptest.TempDir(t)
	full := map[string]string{
		"HOME":            home,
		"XDG_CONFIG_HOME": filepath.Join(home, "config"),
		"XDG_DATA_HOME":   filepath.Join(home, "data"),
	}
	for k, v := range env {
		full[k] = v
	}
	pr, pw := io.Pipe()
	f := NewFactory()
	f.IO = IOStreams{In: strings.NewReader(""), Out: io.Discard, ErrOut: pw}
	f.Getenv = func(k string) string { return full[k] }
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int, 1)
	go func() {
		done <- Run(ctx, f, append([]string{"serve", "--no-auth", "--listen", "127.0.0.1:0"}, args...))
		pw.Close()
	}()
	t.Cleanup(func() {
		cancel()
		if code := <-done; code != 0 {
			t.Errorf("terp serve exited %d", code)
		}
	})
	sc := bufio.NewScanner(pr)
	addr := regexp.MustCompile(`serving the OpenAI API on (http://\S+/v1)`)
	var said []string
	for sc.Scan() {
		said = append(said, sc.Text())
		if m := addr.FindStringSubmatch(sc.Text()); m != nil {
			// The log goes on; it must be read for the server to write it.
			go func() { _, _ = io.Copy(io.Discard, pr) }()
			return m[1]
		}
	}
	t.Fatalf("terp serve did not say where it serves:\n%s", strings.Join(said, "\n"))
	return ""
}

// The flags reach the server: the alias suffix names the model that runs
// the code interpreter, --steps puts the steps in the content.
func TestServeChatAliasAndStepsFlags(t *testing.T) {
	s := llmtest.New(t, llmtest.Fixed(llmtest.RunPython(`print("wired")`)), answerFromTool(t))
	base := startGateway(t, serverEnv(s), "--alias-suffix", "-ci", "--steps", "content")

	resp, err := http.Post(base+"/chat/completions", "application/json",
		strings.NewReader(`{"model": "test-model-ci", "messages": [{"role": "user", "content": "Is it wired?"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var got struct {
		Model   string
		Choices []struct {
			Message struct {
				Content          string
				ReasoningContent string `json:"reasoning_content"`
			}
		}
	}
	if err := json.NewDecoder(resp.Body).Decode(&got); err != nil || resp.StatusCode != http.StatusOK || len(got.Choices) != 1 {
		t.Fatalf("status %d, %+v, %v", resp.StatusCode, got, err)
	}
	want := "```python\nprint(\"wired\")\n```\n\n```\nwired\n```\n\nThe month that grew the most: wired"
	if msg := got.Choices[0].Message; msg.Content != want || msg.ReasoningContent != "" || got.Model != "test-model-ci" {
		t.Errorf("model %q, content\n%q\nreasoning %q; want the steps in the content:\n%q", got.Model, msg.Content, msg.ReasoningContent, want)
	}
	if reqs := s.Requests(); len(reqs) != 2 || reqs[0].Model != "test-model" {
		t.Errorf("upstream got %d requests, for model %q", len(reqs), reqs[0].Model)
	}

	models, err := http.Get(base + "/models")
	if err != nil {
		t.Fatal(err)
	}
	defer models.Body.Close()
	b, _ := io.ReadAll(models.Body)
	if !strings.Contains(string(b), `"id":"test-model-ci"`) {
		t.Errorf("/v1/models lacks the alias: %s", b)
	}
}

func TestServeRefusesUnknownSteps(t *testing.T) {
	r := terp(t, nil, "", "serve", "--no-auth", "--steps", "loud")
	if r.code != 2 || !strings.Contains(r.stderr, "--steps is one of reasoning, content, none") {
		t.Errorf("exit %d, stderr:\n%s", r.code, r.stderr)
	}
}
