package cli

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/terpdev/terp/internal/llm/llmtest"
)

// gateway is a `terp serve` running in this process.
type gateway struct {
	// base is the URL it says it serves; env its environment.
	base string
	env  map[string]string
	// log is what it printed on stderr so far.
	log *lockedBuffer
	// stop is Ctrl+C: it returns the exit code once serve has stopped.
	stop func() int
}

// startGateway runs `terp serve --listen 127.0.0.1:0` with args in this
// process, on a real local sandbox under a home of the test's own, and
// waits until it says where it serves. The server stops when the test ends
// unless stop was called.
func startGateway(t *testing.T, env map[string]string, args ...string) *gateway {
	t.Helper()
	g := &gateway{env: homeEnv(t, env), log: &lockedBuffer{}}
	pr, pw := io.Pipe()
	f := NewFactory()
	f.IO = IOStreams{In: strings.NewReader(""), Out: io.Discard, ErrOut: pw}
	f.Getenv = func(k string) string { return g.env[k] }
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int, 1)
	go func() {
		// No drain unless the test asks (TestServeDrains).
		done <- Run(ctx, f, append([]string{"serve", "--listen", "127.0.0.1:0", "--shutdown-delay", "0s"}, args...))
		pw.Close()
	}()
	var once sync.Once
	code := 0
	// copied is closed once the log has all the server wrote.
	copied := make(chan struct{})
	g.stop = func() int {
		once.Do(func() {
			cancel()
			code = <-done
			select {
			case <-copied:
			case <-time.After(10 * time.Second):
			}
		})
		return code
	}
	t.Cleanup(func() {
		if code := g.stop(); code != 0 {
			t.Errorf("terp serve exited %d:\n%s", code, g.log)
		}
	})
	sc := bufio.NewScanner(pr)
	addr := regexp.MustCompile(`serving the OpenAI API on (http://\S+/v1)`)
	for sc.Scan() {
		fmt.Fprintln(g.log, sc.Text())
		if m := addr.FindStringSubmatch(sc.Text()); m != nil {
			// The log goes on; it must be read for the server to write it.
			go func() { _, _ = io.Copy(g.log, pr); close(copied) }()
			g.base = m[1]
			return g
		}
	}
	t.Fatalf("terp serve did not say where it serves:\n%s", g.log)
	return nil
}

// The flags reach the server: the alias suffix names the model that runs
// the code interpreter, --steps puts the steps in the content.
func TestServeChatAliasAndStepsFlags(t *testing.T) {
	s := llmtest.New(t, llmtest.Fixed(llmtest.RunPython(`print("wired")`)), answerFromTool(t))
	base := startGateway(t, serverEnv(s), "--no-auth", "--alias-suffix", "-ci", "--steps", "content").base

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
