package llm

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
)

// Reasoning arrives in three forms; each is shown as reasoning and never as
// the answer, streamed or whole. An answer that arrives only as reasoning
// is still the answer.
func TestReasoningForms(t *testing.T) {
	tests := []struct {
		name          string
		stream, whole string
		want          Response
	}{
		{
			name: "reasoning_content",
			stream: `data: {"choices":[{"index":0,"delta":{"role":"assistant","content":null,"reasoning_content":"The user wants "},"finish_reason":null}]}

data: {"choices":[{"index":0,"delta":{"reasoning_content":"a product."},"finish_reason":null}]}

data: {"choices":[{"index":0,"delta":{"content":"7006652"},"finish_reason":"stop"}]}

data: [DONE]

`,
			whole: `{"choices":[{"index":0,"message":{"role":"assistant","content":"7006652","reasoning_content":"The user wants a product."},"finish_reason":"stop"}]}`,
			want:  Response{Content: "7006652", Reasoning: "The user wants a product.", FinishReason: "stop"},
		},
		{
			name: "reasoning",
			stream: `data: {"choices":[{"index":0,"delta":{"role":"assistant","content":"","reasoning":"The user wants "},"finish_reason":null}]}

data: {"choices":[{"index":0,"delta":{"content":"","reasoning":"a product."},"finish_reason":null}]}

data: {"choices":[{"index":0,"delta":{"content":"7006652"},"finish_reason":null}]}

data: {"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}

data: [DONE]

`,
			whole: `{"choices":[{"index":0,"message":{"role":"assistant","content":"7006652","reasoning":"The user wants a product."},"finish_reason":"stop"}]}`,
			want:  Response{Content: "7006652", Reasoning: "The user wants a product.", FinishReason: "stop"},
		},
		{
			name: "think block",
			stream: `data: {"choices":[{"index":0,"delta":{"role":"assistant","content":"<thi"},"finish_reason":null}]}

data: {"choices":[{"index":0,"delta":{"content":"nk>\nThe user wants "},"finish_reason":null}]}

data: {"choices":[{"index":0,"delta":{"content":"a product.\n</th"},"finish_reason":null}]}

data: {"choices":[{"index":0,"delta":{"content":"ink>\n\n7006652"},"finish_reason":"stop"}]}

data: [DONE]

`,
			whole: `{"choices":[{"index":0,"message":{"role":"assistant","content":"<think>\nThe user wants a product.\n</think>\n\n7006652"},"finish_reason":"stop"}]}`,
			want:  Response{Content: "7006652", Reasoning: "The user wants a product.", FinishReason: "stop"},
		},
		{
			name: "answer only in reasoning",
			stream: `data: {"choices":[{"index":0,"delta":{"role":"assistant","content":null,"reasoning":"It is "},"finish_reason":null}]}

data: {"choices":[{"index":0,"delta":{"content":null,"reasoning":"7006652."},"finish_reason":"stop"}]}

data: [DONE]

`,
			whole: `{"choices":[{"index":0,"message":{"role":"assistant","content":null,"reasoning_content":"It is 7006652."},"finish_reason":"stop"}]}`,
			want:  Response{Content: "It is 7006652.", FinishReason: "stop", ReasoningAsAnswer: true},
		},
		{
			name: "answer only in an unclosed think block",
			stream: `data: {"choices":[{"index":0,"delta":{"content":"<think>It is "},"finish_reason":null}]}

data: {"choices":[{"index":0,"delta":{"content":"7006652."},"finish_reason":"stop"}]}

data: [DONE]

`,
			whole: `{"choices":[{"index":0,"message":{"content":"<think>It is 7006652."},"finish_reason":"stop"}]}`,
			want:  Response{Content: "It is 7006652.", FinishReason: "stop", ReasoningAsAnswer: true},
		},
	}
	for _, tt := range tests {
		for _, mode := range []string{"stream", "whole"} {
			t.Run(tt.name+"/"+mode, func(t *testing.T) {
				h := sse(tt.stream)
				if mode == "whole" {
					h = jsonBody(http.StatusOK, tt.whole)
				}
				srv := newServer(t, h)
				c, _ := newTestClient(srv.URL, Config{Stream: mode == "stream"})
				var deltas []Delta
				got, err := c.Complete(context.Background(), Request{Model: "m", Tools: []Tool{runPython}}, collect(&deltas))
				if err != nil {
					t.Fatal(err)
				}
				checkResponse(t, got, tt.want)
				var reasoning, content strings.Builder
				for _, d := range deltas {
					if d.Kind == DeltaReasoning {
						reasoning.WriteString(d.Text)
					} else {
						content.WriteString(d.Text)
					}
				}
				// A whole reply's answer that came as reasoning is passed on
				// once, as the answer; streamed, it was shown as reasoning.
				if shown := reasoning.String() + content.String(); !strings.Contains(shown, "7006652") {
					t.Errorf("deltas = %q, want the text shown", shown)
				}
				if tt.want.Reasoning != "" && strings.TrimSpace(reasoning.String()) != tt.want.Reasoning {
					t.Errorf("reasoning deltas = %q, want %q", reasoning.String(), tt.want.Reasoning)
				}
				if strings.Contains(content.String(), "product") || strings.Contains(content.String(), "think>") {
					t.Errorf("content deltas = %q: reasoning shown as the answer", content.String())
				}
			})
		}
	}
}

// A call written inside reasoning that never ended (the model put its
// call before closing its think block) is still recovered.
func TestCallOnlyInReasoning(t *testing.T) {
	srv := newServer(t, sse(`data: {"choices":[{"index":0,"delta":{"reasoning_content":"I need to compute. <tool_call>{\"name\": \"run_python\", \"arguments\": {\"code\": \"print(1)\"}}</tool_call>"},"finish_reason":"stop"}]}

data: [DONE]

`))
	c, _ := newTestClient(srv.URL, Config{Stream: true})
	got, err := c.Complete(context.Background(), Request{Model: "m", Tools: []Tool{runPython}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(got.ToolCalls) != 1 || got.Content != "" || got.Reasoning != "I need to compute." || got.Written != "" || got.ReasoningAsAnswer {
		t.Errorf("got %+v, want the call recovered", got)
	}
}

// Reasoning is sent back only on a message that carries it, in both fields
// servers read.
func TestReasoningSentBackOnlyWhenSet(t *testing.T) {
	var bodies []string
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		bodies = append(bodies, string(b))
		jsonBody(http.StatusOK, `{"choices":[{"index":0,"message":{"content":"ok"},"finish_reason":"stop"}]}`)(w, r)
	})
	c, _ := newTestClient(srv.URL, Config{})
	msgs := []Message{{Role: RoleUser, Content: "q"}, {Role: RoleAssistant, Content: "a"}, {Role: RoleUser, Content: "q2"}}
	if _, err := c.Complete(context.Background(), Request{Model: "m", Messages: msgs}, nil); err != nil {
		t.Fatal(err)
	}
	msgs[1].Reasoning = "kept thought"
	if _, err := c.Complete(context.Background(), Request{Model: "m", Messages: msgs}, nil); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(bodies[0], "reasoning") {
		t.Errorf("reasoning sent without being set: %s", bodies[0])
	}
	if !strings.Contains(bodies[1], `"reasoning":"kept thought"`) || !strings.Contains(bodies[1], `"reasoning_content":"kept thought"`) {
		t.Errorf("reasoning not sent back in both fields: %s", bodies[1])
	}
}
