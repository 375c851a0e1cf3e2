package agent_test

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/terpdev/terp/internal/agent"
	"github.com/terpdev/terp/internal/llm"
	"github.com/terpdev/terp/internal/llm/llmtest"
)

// printLines is code whose output is n lines of 40 characters, each
// numbered, so a cut shows where it happened.
func printLines(tag string, n int) string {
	return fmt.Sprintf("for i in range(%d):\n    print('%s line %%05d ' %% i + 'x' * 24)", n, tag)
}

var elisionNote = regexp.MustCompile(`\[terp: [0-9,]+ characters of this output were removed to fit the context window\]`)

// toolContents returns the tool messages of a request, oldest first.
func toolContents(req llmtest.Request) []string {
	var out []string
	for _, m := range req.Messages {
		if m.Role == "tool" {
			out = append(out, m.Content)
		}
	}
	return out
}

// Near the window, the oldest output is shortened first, with a note that
// says what went; the newest output reaches the model whole.
func TestOldOutputsShortenedNearTheWindow(t *testing.T) {
	s := llmtest.New(t,
		llmtest.Fixed(llmtest.RunPython(printLines("old", 95))),
		llmtest.Fixed(llmtest.RunPython(printLines("new", 95))),
		func(req llmtest.Request) llmtest.Reply {
			outs := toolContents(req)
			if len(outs) != 2 {
				t.Fatalf("tool messages = %d", len(outs))
			}
			if !elisionNote.MatchString(outs[0]) || !strings.Contains(outs[0], "old line 00000") || !strings.Contains(outs[0], "old line 00094") {
				t.Errorf("old output = %s\nwant its head and tail with the note", outs[0])
			}
			if elisionNote.MatchString(outs[1]) || !strings.Contains(outs[1], "new line 00047") {
				t.Errorf("newest output was cut: %s", outs[1])
			}
			res, err := req.ToolResult()
			if err != nil || !strings.Contains(res.Stdout, "new line 00094") {
				t.Errorf("newest output = %+v, %v", res, err)
			}
			return llmtest.Answer("done")
		})
	a := newAgent(t, s, agent.Config{Model: "m", ContextWindow: 2500})
	res, err := a.Ask(context.Background(), "print", nil)
	if err != nil || res.Answer != "done" {
		t.Fatalf("Ask = %+v, %v", res, err)
	}
	if len(res.Notices) != 1 || !strings.Contains(res.Notices[0], "context window (2,500 tokens, configured)") {
		t.Errorf("notices = %q", res.Notices)
	}
}

// The window is asked from the server (vLLM's max_model_len) once the
// conversation is large enough to matter.
func TestWindowFromTheServer(t *testing.T) {
	s := llmtest.New(t,
		llmtest.Fixed(llmtest.RunPython(printLines("a", 95))),
		llmtest.Fixed(llmtest.RunPython(printLines("b", 95))),
		llmtest.Fixed(llmtest.RunPython(printLines("c", 95))),
		func(req llmtest.Request) llmtest.Reply {
			if outs := toolContents(req); !elisionNote.MatchString(outs[0]) {
				t.Errorf("the oldest output was not shortened to fit max_model_len")
			}
			return llmtest.Answer("done")
		})
	s.ServeModels(`{"object":"list","data":[{"id":"m","object":"model","max_model_len":3000}]}`)
	a := newAgent(t, s, agent.Config{Model: "m"})
	res, err := a.Ask(context.Background(), "print", nil)
	if err != nil || res.Answer != "done" {
		t.Fatalf("Ask = %+v, %v", res, err)
	}
	if len(res.Notices) == 0 || !strings.Contains(res.Notices[0], "reported by the server") {
		t.Errorf("notices = %q", res.Notices)
	}
}

// A context-overflow error from each server is answered by shortening the
// conversation and asking once more.
func TestContextOverflowIsTrimmedAndRetried(t *testing.T) {
	bodies := map[string]string{
		"vLLM":      `{"object":"error","message":"This model's maximum context length is 2048 tokens. However, you requested 3600 tokens (2600 in the messages, 1000 in the completion). Please reduce the length of the messages or completion.","type":"BadRequestError","param":null,"code":400}`,
		"SGLang":    `{"object":"error","message":"The input (2600 tokens) is longer than the model's context length (2048 tokens).","type":"BadRequestError","param":null,"code":400}`,
		"llama.cpp": `{"error":{"code":400,"message":"request (2600 tokens) exceeds the available context size (2048 tokens), try increasing it","type":"exceed_context_size_error","n_prompt_tokens":2600,"n_ctx":2048}}`,
		"Ollama":    `{"error":{"message":"the prompt is longer than the context length","type":"api_error","param":null,"code":null}}`,
	}
	for server, body := range bodies {
		t.Run(server, func(t *testing.T) {
			s := llmtest.New(t,
				llmtest.Fixed(llmtest.RunPython(printLines("old", 95))),
				llmtest.Fixed(llmtest.RunPython(printLines("new", 95))),
				llmtest.Fixed(llmtest.Reply{Status: 400, Body: body}),
				func(req llmtest.Request) llmtest.Reply {
					outs := toolContents(req)
					if !elisionNote.MatchString(outs[0]) {
						t.Errorf("the retry was not shortened: %s", outs[0])
					}
					if elisionNote.MatchString(outs[1]) {
						t.Errorf("the newest output was cut before the old one was gone")
					}
					return llmtest.Answer("done")
				})
			a := newAgent(t, s, agent.Config{Model: "m"})
			res, err := a.Ask(context.Background(), "print", nil)
			if err != nil || res.Answer != "done" || res.Steps != 3 {
				t.Fatalf("Ask = %+v, %v", res, err)
			}
			if len(s.Requests()) != 4 {
				t.Errorf("requests = %d, want one retry", len(s.Requests()))
			}
			if len(res.Notices) != 1 || !strings.Contains(res.Notices[0], "too long for the model's context window") {
				t.Errorf("notices = %q", res.Notices)
			}
		})
	}
}

// A second overflow ends the turn with an error that says what to do.
func TestSecondOverflowIsAClearError(t *testing.T) {
	overflow := llmtest.Fixed(llmtest.Reply{Status: 400, Body: `{"error":{"code":400,"message":"request (2600 tokens) exceeds the available context size (2048 tokens), try increasing it","type":"exceed_context_size_error","n_prompt_tokens":2600,"n_ctx":2048}}`})
	s := llmtest.New(t,
		llmtest.Fixed(llmtest.RunPython(printLines("old", 95))),
		overflow, overflow)
	a := newAgent(t, s, agent.Config{Model: "m"})
	res, err := a.Ask(context.Background(), "print", nil)
	if !llm.IsKind(err, llm.KindContextLength) || res.StopReason != agent.Errored {
		t.Fatalf("Ask = %+v, %v", res, err)
	}
	for _, want := range []string{"does not fit the context window", "(2,048 tokens)", "even after terp shortened", "Start a new conversation"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	if len(s.Requests()) != 3 {
		t.Errorf("requests = %d, want exactly one retry", len(s.Requests()))
	}
}

// Ollama cuts an overlong prompt without an error; the usage it reports
// gives it away. terp warns and fits the next request to what it kept.
func TestOllamaSilentTruncation(t *testing.T) {
	s := llmtest.New(t,
		llmtest.Fixed(llmtest.RunPython(printLines("a", 95))),
		llmtest.Fixed(llmtest.RunPython(printLines("b", 95))),
		llmtest.Fixed(llmtest.RunPython(printLines("c", 95))),
		func(req llmtest.Request) llmtest.Reply {
			r := llmtest.RunPython("print('d')")
			r.PromptTokens = 2048 // num_ctx: the rest was cut
			return r
		},
		func(req llmtest.Request) llmtest.Reply {
			if outs := toolContents(req); !elisionNote.MatchString(outs[0]) {
				t.Errorf("the request after a truncation was not fitted: %s", outs[0])
			}
			return llmtest.Answer("done")
		})
	a := newAgent(t, s, agent.Config{Model: "m"})
	var c collect
	res, err := a.Ask(context.Background(), "print", c.send)
	if err != nil || res.Answer != "done" {
		t.Fatalf("Ask = %+v, %v", res, err)
	}
	var warned bool
	for _, e := range c.events {
		if n, ok := e.(agent.Notice); ok && strings.Contains(n.Text, "counted 2,048 prompt tokens") && strings.Contains(n.Text, "num_ctx") {
			warned = true
		}
	}
	if !warned {
		t.Errorf("no notice of the truncation; notices: %q", res.Notices)
	}
}

func TestTokenBudget(t *testing.T) {
	s := llmtest.New(t,
		llmtest.Fixed(llmtest.RunPython("print(1)")),
		llmtest.Fixed(llmtest.RunPython("print(2)")))
	a := newAgent(t, s, agent.Config{Model: "m", MaxTokens: 150})
	res, err := a.Ask(context.Background(), "q", nil)
	if err != nil || res.StopReason != agent.TokenBudget || res.Steps != 2 {
		t.Fatalf("Ask = %+v, %v", res, err)
	}
	if !strings.Contains(res.Answer, "token budget (max_tokens 150)") || !strings.Contains(res.Answer, "220 tokens") {
		t.Errorf("answer = %q", res.Answer)
	}
}

func TestTimeBudget(t *testing.T) {
	s := llmtest.New(t, llmtest.Fixed(llmtest.RunPython("import time\ntime.sleep(60)")))
	a := newAgent(t, s, agent.Config{Model: "m", MaxTime: time.Second})
	start := time.Now()
	res, err := a.Ask(context.Background(), "q", nil)
	if err != nil || res.StopReason != agent.TimeBudget {
		t.Fatalf("Ask = %+v, %v", res, err)
	}
	if !strings.Contains(res.Answer, "time budget (max_time 1s) ran out") {
		t.Errorf("answer = %q", res.Answer)
	}
	if d := time.Since(start); d > 20*time.Second {
		t.Errorf("a 1s budget took %s", d)
	}
}
