package agent_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/terpdev/terp/internal/agent"
	"github.com/terpdev/terp/internal/kernel"
	"github.com/terpdev/terp/internal/llm"
	"github.com/terpdev/terp/internal/llm/llmtest"
)

// textOutput decodes the tool result a text-mode request carries in its
// last user message.
func textOutput(t *testing.T, req llmtest.Request) (stdout string) {
	t.Helper()
	last := req.Messages[len(req.Messages)-1]
	text, ok := strings.CutPrefix(last.Content, "Output of run_python:\n")
	if last.Role != "user" || !ok {
		t.Fatalf("last message = %+v, want the output as a user message", last)
	}
	var res struct {
		Stdout string `json:"stdout"`
	}
	if err := json.Unmarshal([]byte(text), &res); err != nil {
		t.Fatalf("output %q: %v", text, err)
	}
	return res.Stdout
}

// A weak model that never calls the tool and only writes fenced code: the
// code runs in the real sandbox, its output goes back as text, and the
// answer is the first reply without code.
func TestWeakModelWritingFencedCode(t *testing.T) {
	s := llmtest.New(t,
		func(req llmtest.Request) llmtest.Reply {
			if len(req.Tools) != 1 {
				t.Errorf("auto mode sends the tool first, got %d tools", len(req.Tools))
			}
			return llmtest.Answer("I'll compute it.\n\n```python\nprint(1234 * 5678)\n```")
		},
		func(req llmtest.Request) llmtest.Reply {
			if len(req.Tools) != 0 {
				t.Errorf("text mode sends no tools, got %d", len(req.Tools))
			}
			if sys := req.Messages[0].Content; !strings.Contains(sys, "```python") {
				t.Errorf("the system prompt does not say how to call the tool in text mode:\n%s", sys)
			}
			for _, m := range req.Messages {
				if m.Role == "tool" || len(m.ToolCalls) > 0 {
					t.Errorf("text mode sent %+v", m)
				}
			}
			if prev := req.Messages[len(req.Messages)-2]; prev.Role != "assistant" || !strings.Contains(prev.Content, "```python\nprint(1234 * 5678)") {
				t.Errorf("the model's message goes back as written, got %+v", prev)
			}
			got := strings.TrimSpace(textOutput(t, req))
			return llmtest.Answer("Checking once more:\n```python\nprint(" + got + " // 1234)\n```")
		},
		func(req llmtest.Request) llmtest.Reply {
			return llmtest.Answer("1234 * 5678 = 7006652 (and 7006652 / 1234 = " + strings.TrimSpace(textOutput(t, req)) + ").")
		})
	a := newAgent(t, s, agent.Config{Model: "m"})
	var c collect
	res, err := a.Ask(context.Background(), "What is 1234 * 5678?", c.send)
	if err != nil || res.StopReason != agent.Answered || res.Steps != 3 {
		t.Fatalf("Ask = %+v, %v", res, err)
	}
	if res.Answer != "1234 * 5678 = 7006652 (and 7006652 / 1234 = 5678)." {
		t.Errorf("answer = %q", res.Answer)
	}
	var calls []string
	for _, e := range c.events {
		if call, ok := e.(agent.ToolCall); ok {
			calls = append(calls, call.Code)
			if !strings.HasPrefix(call.ID, "call_") {
				t.Errorf("a recovered call has id %q, want a synthesized one", call.ID)
			}
		}
	}
	if len(calls) != 2 || calls[0] != "print(1234 * 5678)" {
		t.Errorf("calls = %q", calls)
	}
	if len(res.Notices) != 1 || !strings.Contains(res.Notices[0], "python block") {
		t.Errorf("notices = %q, want one about text mode", res.Notices)
	}
}

// A model that calls the tool natively keeps its ```python examples as
// part of its answer.
func TestFencedCodeIsAnAnswerOnceTheModelCalledTheTool(t *testing.T) {
	s := llmtest.New(t,
		llmtest.Fixed(llmtest.RunPython("print(2)")),
		llmtest.Fixed(llmtest.Answer("Run this yourself:\n```python\nprint(2)\n```")))
	a := newAgent(t, s, agent.Config{Model: "m"})
	res, err := a.Ask(context.Background(), "q", nil)
	if err != nil || res.Steps != 2 || !strings.Contains(res.Answer, "```python") {
		t.Fatalf("Ask = %+v, %v", res, err)
	}
}

// Text mode from the start: no tools are ever sent.
func TestTextDialectConfigured(t *testing.T) {
	s := llmtest.New(t,
		func(req llmtest.Request) llmtest.Reply {
			if len(req.Tools) != 0 || !strings.Contains(req.Messages[0].Content, "Function calling is not available") {
				t.Errorf("request = %+v, want text mode", req)
			}
			return llmtest.Answer("<tool_call>\n{\"name\": \"run_python\", \"arguments\": {\"code\": \"print(6*7)\"}}\n</tool_call>")
		},
		func(req llmtest.Request) llmtest.Reply {
			return llmtest.Answer(strings.TrimSpace(textOutput(t, req)))
		})
	a := newAgent(t, s, agent.Config{Model: "m", Dialect: llm.DialectText})
	res, err := a.Ask(context.Background(), "6*7?", nil)
	if err != nil || res.Answer != "42" {
		t.Fatalf("Ask = %+v, %v", res, err)
	}
}

// A model whose calls the server leaves in the content (no parser for its
// format) is understood, and the history goes back in its own format.
func TestHermesCallsInContent(t *testing.T) {
	s := llmtest.New(t,
		llmtest.Fixed(llmtest.Answer("<tool_call>\n{\"name\": \"run_python\", \"arguments\": {\"code\": \"print(6*7)\"}}\n</tool_call>")),
		func(req llmtest.Request) llmtest.Reply {
			if len(req.Tools) != 1 {
				t.Errorf("auto mode keeps sending the tool, got %d", len(req.Tools))
			}
			if prev := req.Messages[len(req.Messages)-2]; !strings.HasPrefix(prev.Content, "<tool_call>") || len(prev.ToolCalls) != 0 {
				t.Errorf("the written call goes back as written, got %+v", prev)
			}
			return llmtest.Answer(strings.TrimSpace(textOutput(t, req)))
		})
	a := newAgent(t, s, agent.Config{Model: "m"})
	res, err := a.Ask(context.Background(), "6*7?", nil)
	if err != nil || res.Answer != "42" || len(res.Notices) != 0 {
		t.Fatalf("Ask = %+v, %v", res, err)
	}
}

// A server that refuses tools gets the same step again in text mode.
func TestServerRefusingToolsFallsBackToText(t *testing.T) {
	for name, body := range map[string]string{
		"vLLM":   `{"object":"error","message":"\"auto\" tool choice requires --enable-auto-tool-choice and --tool-call-parser to be set","type":"BadRequestError","param":null,"code":400}`,
		"Ollama": `{"error":{"message":"registry.ollama.ai/library/gemma3:4b does not support tools","type":"api_error","param":null,"code":null}}`,
	} {
		t.Run(name, func(t *testing.T) {
			refuse := func(req llmtest.Request) llmtest.Reply {
				if len(req.Tools) > 0 {
					return llmtest.Reply{Status: 400, Body: body}
				}
				return llmtest.Answer("```python\nprint(1234 * 5678)\n```")
			}
			s := llmtest.New(t, refuse, refuse,
				func(req llmtest.Request) llmtest.Reply {
					return llmtest.Answer("It is " + strings.TrimSpace(textOutput(t, req)) + ".")
				})
			a := newAgent(t, s, agent.Config{Model: "m"})
			res, err := a.Ask(context.Background(), "1234*5678?", nil)
			if err != nil || res.Answer != "It is 7006652." || res.Steps != 2 {
				t.Fatalf("Ask = %+v, %v", res, err)
			}
			if len(res.Notices) != 1 || !strings.Contains(res.Notices[0], "without function calling") {
				t.Errorf("notices = %q", res.Notices)
			}
		})
	}
	t.Run("native dialect reports the refusal", func(t *testing.T) {
		s := llmtest.New(t, llmtest.Fixed(llmtest.Reply{Status: 400, Body: `{"error":{"message":"m does not support tools"}}`}))
		a := newAgent(t, s, agent.Config{Model: "m", Dialect: llm.DialectNative})
		_, err := a.Ask(context.Background(), "q", nil)
		if !llm.IsKind(err, llm.KindToolsUnsupported) {
			t.Fatalf("err = %v", err)
		}
	})
}

// Reasoning in each of its three forms is shown, never the answer, never
// sent back; gpt-oss-like models that need it get it back when configured.
func TestReasoningFormsInTheLoop(t *testing.T) {
	for _, tt := range []struct {
		name  string
		reply llmtest.Reply
	}{
		{"reasoning_content", llmtest.Reply{Reasoning: "secret thought", Content: "42"}},
		{"reasoning", llmtest.Reply{Reasoning: "secret thought", ReasoningField: "reasoning", Content: "42"}},
		{"think", llmtest.Reply{Content: "<think>secret thought</think>42"}},
	} {
		for _, send := range []bool{false, true} {
			t.Run(tt.name, func(t *testing.T) {
				s := llmtest.New(t, llmtest.Fixed(tt.reply), func(req llmtest.Request) llmtest.Reply {
					b, _ := json.Marshal(req.Messages)
					if strings.Contains(string(b), "secret") != send {
						t.Errorf("reasoning sent back = %v, want %v: %s", !send, send, b)
					}
					return llmtest.Answer("ok")
				})
				a := newAgent(t, s, agent.Config{Model: "m", SendReasoning: send})
				var c collect
				res, err := a.Ask(context.Background(), "q", c.send)
				if err != nil || res.Answer != "42" {
					t.Fatalf("Ask = %+v, %v", res, err)
				}
				var thought string
				for _, e := range c.events {
					if r, ok := e.(agent.ReasoningDelta); ok {
						thought += r.Text
					}
				}
				if thought != "secret thought" {
					t.Errorf("reasoning shown = %q", thought)
				}
				if _, err := a.Ask(context.Background(), "again", nil); err != nil {
					t.Fatal(err)
				}
			})
		}
	}
}

func TestProbe(t *testing.T) {
	tests := []struct {
		name    string
		reply   llmtest.Step
		dialect llm.Dialect
		format  string
		refused bool
	}{
		{"native", llmtest.Fixed(llmtest.RunPython("print(1234*5678)")), "", "native", false},
		{"hermes in the content", llmtest.Fixed(llmtest.Answer("<tool_call>{\"name\": \"run_python\", \"arguments\": {\"code\": \"print(1234*5678)\"}}</tool_call>")), "", llm.FormatHermes, false},
		{"refused, then text", func(req llmtest.Request) llmtest.Reply {
			if len(req.Tools) > 0 {
				return llmtest.Reply{Status: 400, Body: `{"error":{"message":"m does not support tools"}}`}
			}
			return llmtest.Answer("```python\nprint(1234*5678)\n```")
		}, "", llm.FormatPython, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := llmtest.New(t, tt.reply, tt.reply)
			model := llm.New(llm.Config{BaseURL: s.BaseURL(), MaxRetries: -1})
			res, err := agent.Probe(context.Background(), model, agent.Config{Model: "m", Dialect: tt.dialect, ExecMode: kernel.ModeKernel})
			if err != nil || res.Format != tt.format || (res.Refused != nil) != tt.refused || res.Code != "print(1234*5678)" {
				t.Errorf("Probe = %+v, %v", res, err)
			}
		})
	}
}

// gpt-oss calls the python tool it was trained on, with the source itself
// as the arguments, as servers that know harmony's built-in tools pass it on.
// The source runs once, as run_python, its code shows as it streams, and the
// history that goes back is one the strictest servers accept.
func TestGptOssPythonCallWithRawSource(t *testing.T) {
	source := "write n.txt 42\nprint ran"
	s := llmtest.New(t,
		llmtest.Fixed(llmtest.Reply{Reasoning: "Run it.", Calls: []llmtest.Call{{ID: "call_py", Name: "python", Arguments: source}}}),
		func(req llmtest.Request) llmtest.Reply {
			if err := req.Check(); err != nil {
				t.Errorf("a strict server would reject the history: %v", err)
			}
			var calls, results int
			for _, m := range req.Messages {
				for _, c := range m.ToolCalls {
					calls++
					var args struct{ Code string }
					if c.Function.Name != "run_python" || json.Unmarshal([]byte(c.Function.Arguments), &args) != nil || args.Code != source {
						t.Errorf("the call goes back as %s %s, want run_python with the source as its code", c.Function.Name, c.Function.Arguments)
					}
				}
				if m.Role == "tool" {
					results++
				}
			}
			if res, err := req.ToolResult(); err != nil || res.Stdout != "ran\n" || calls != 1 || results != 1 {
				t.Errorf("%d calls, %d results, the last %+v (%v); want the source run once", calls, results, res, err)
			}
			return llmtest.Answer("done")
		})
	a := newMemoryAgent(t, s, agent.Config{Model: "m"})
	var c collect
	res, err := a.Ask(context.Background(), "go", c.send)
	if err != nil || res.Answer != "done" {
		t.Fatalf("Ask = %+v, %v", res, err)
	}
	var shown strings.Builder
	var ran []agent.ToolCall
	for _, e := range c.events {
		switch e := e.(type) {
		case agent.CodeDelta:
			shown.WriteString(e.Text)
		case agent.ToolCall:
			ran = append(ran, e)
		}
	}
	if len(ran) != 1 || ran[0].Name != "run_python" || ran[0].Code != source {
		t.Errorf("calls run = %+v, want one run_python call of the source", ran)
	}
	if shown.String() != source {
		t.Errorf("code shown as it streamed = %q, want %q", shown.String(), source)
	}
	if len(res.Files) != 1 || res.Files[0].Path != "n.txt" {
		t.Errorf("files = %+v, want the n.txt the source wrote", res.Files)
	}
}
