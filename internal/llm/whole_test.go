package llm

import (
	"context"
	"net/http"
	"reflect"
	"testing"
)

// A whole reply (Stream unset) is normalized exactly like a streamed one.
func TestWholeNormalization(t *testing.T) {
	tests := []struct {
		name       string
		body       string
		want       Response
		wantDeltas []Delta
	}{
		{
			name: "plain answer with usage",
			body: `{"id":"chatcmpl-7","object":"chat.completion","created":1,"model":"qwen3-32b","choices":[{"index":0,"message":{"role":"assistant","content":"Hello!"},"finish_reason":"stop"}],"usage":{"prompt_tokens":9,"completion_tokens":3,"total_tokens":12}}`,
			want: Response{Content: "Hello!", FinishReason: "stop", Usage: Usage{9, 3, 12}},
		},
		{
			name:       "reasoning_content",
			body:       `{"choices":[{"index":0,"message":{"role":"assistant","content":"4","reasoning_content":"2+2 is 4."},"finish_reason":"stop"}]}`,
			want:       Response{Content: "4", Reasoning: "2+2 is 4.", FinishReason: "stop"},
			wantDeltas: []Delta{{Kind: DeltaReasoning, Text: "2+2 is 4."}, {Kind: DeltaContent, Text: "4"}},
		},
		{
			name: "reasoning",
			body: `{"choices":[{"index":0,"message":{"role":"assistant","content":"4","reasoning":"2+2 is 4."},"finish_reason":"stop"}]}`,
			want: Response{Content: "4", Reasoning: "2+2 is 4.", FinishReason: "stop"},
		},
		{
			name: "think block in content",
			body: `{"choices":[{"index":0,"message":{"role":"assistant","content":"<think>\nThe user greets me.\n</think>\n\nHi there."},"finish_reason":"stop"}]}`,
			want: Response{Content: "Hi there.", Reasoning: "The user greets me.", FinishReason: "stop"},
		},
		{
			name: "only </think> in content",
			body: `{"choices":[{"index":0,"message":{"role":"assistant","content":"The user greets me.\n</think>\n\nHi there."},"finish_reason":"stop"}]}`,
			want: Response{Content: "Hi there.", Reasoning: "The user greets me.", FinishReason: "stop"},
		},
		{
			name: "missing ids on parallel calls",
			body: `{"choices":[{"index":0,"message":{"role":"assistant","content":null,"tool_calls":[{"type":"function","function":{"name":"run_python","arguments":"{\"code\":\"1\"}"}},{"id":"","type":"function","function":{"name":"run_python","arguments":"{\"code\":\"2\"}"}}]},"finish_reason":"tool_calls"}]}`,
			want: Response{
				ToolCalls: []ToolCall{
					{ID: synthID, Name: "run_python", Arguments: `{"code":"1"}`},
					{ID: synthID, Name: "run_python", Arguments: `{"code":"2"}`},
				},
				FinishReason: "tool_calls",
			},
		},
		{
			name: "server ids are kept",
			body: `{"choices":[{"index":0,"message":{"role":"assistant","content":"","tool_calls":[{"id":"call_k3j4h5g6","type":"function","function":{"name":"run_python","arguments":"{\"code\":\"1\"}"}}]},"finish_reason":"tool_calls"}]}`,
			want: Response{
				ToolCalls:    []ToolCall{{ID: "call_k3j4h5g6", Name: "run_python", Arguments: `{"code":"1"}`}},
				FinishReason: "tool_calls",
			},
		},
		{
			name: "arguments as a JSON object",
			body: `{"choices":[{"index":0,"message":{"role":"assistant","content":null,"tool_calls":[{"id":"7","type":"function","function":{"name":"run_python","arguments":{ "code" : "print(1)" }}}]},"finish_reason":"tool_calls"}]}`,
			want: Response{
				ToolCalls:    []ToolCall{{ID: "7", Name: "run_python", Arguments: `{"code":"print(1)"}`}},
				FinishReason: "tool_calls",
			},
		},
		{
			name: "empty arguments and no finish_reason",
			body: `{"choices":[{"index":0,"message":{"role":"assistant","tool_calls":[{"id":"call_1","type":"function","function":{"name":"list_files","arguments":""}}]}}]}`,
			want: Response{
				ToolCalls:    []ToolCall{{ID: "call_1", Name: "list_files", Arguments: "{}"}},
				FinishReason: "tool_calls",
			},
		},
		{
			name:       "answer only in reasoning, content null",
			body:       `{"choices":[{"index":0,"message":{"role":"assistant","content":null,"reasoning_content":"The file has 12 rows."},"finish_reason":"stop"}]}`,
			want:       Response{Content: "The file has 12 rows.", FinishReason: "stop", ReasoningAsAnswer: true},
			wantDeltas: []Delta{{Kind: DeltaContent, Text: "The file has 12 rows."}},
		},
		{
			name: "content as a list of parts",
			body: `{"choices":[{"index":0,"message":{"role":"assistant","content":[{"type":"text","text":"Hel"},{"type":"text","text":"lo"}]},"finish_reason":"stop"}]}`,
			want: Response{Content: "Hello", FinishReason: "stop"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := newServer(t, jsonBody(http.StatusOK, tt.body))
			c, _ := newTestClient(srv.URL, Config{})
			var deltas []Delta
			got, err := c.Complete(context.Background(), Request{Model: "m"}, collect(&deltas))
			if err != nil {
				t.Fatalf("Complete: %v", err)
			}
			checkResponse(t, got, tt.want)
			if tt.wantDeltas != nil && !reflect.DeepEqual(deltas, tt.wantDeltas) {
				t.Errorf("deltas:\n got %+v\nwant %+v", deltas, tt.wantDeltas)
			}
		})
	}
}

// Servers that ignore the stream flag are understood either way.
func TestStreamFlagIgnored(t *testing.T) {
	t.Run("whole reply to a stream request", func(t *testing.T) {
		srv := newServer(t, jsonBody(http.StatusOK, `{"choices":[{"index":0,"message":{"role":"assistant","content":"<think>hm</think>Hi"},"finish_reason":"stop"}]}`))
		c, _ := newTestClient(srv.URL, Config{Stream: true})
		var deltas []Delta
		got, err := c.Complete(context.Background(), Request{Model: "m"}, collect(&deltas))
		if err != nil {
			t.Fatal(err)
		}
		checkResponse(t, got, Response{Content: "Hi", Reasoning: "hm", FinishReason: "stop"})
		if want := []Delta{{Kind: DeltaReasoning, Text: "hm"}, {Kind: DeltaContent, Text: "Hi"}}; !reflect.DeepEqual(deltas, want) {
			t.Errorf("deltas = %+v, want %+v", deltas, want)
		}
	})
	t.Run("stream to a whole request", func(t *testing.T) {
		srv := newServer(t, sse("data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hi\"},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n"))
		c, _ := newTestClient(srv.URL, Config{})
		got, err := c.Complete(context.Background(), Request{Model: "m"}, nil)
		if err != nil {
			t.Fatal(err)
		}
		checkResponse(t, got, Response{Content: "Hi", FinishReason: "stop"})
	})
}

// Errors can come with status 200 in a whole reply too.
func TestWholeErrors(t *testing.T) {
	tests := []struct {
		name string
		body string
		kind ErrorKind
		subs []string
	}{
		{"error object with status 200", `{"error":{"message":"prompt is too long for the context window","code":400}}`, KindContextLength, []string{"prompt is too long"}},
		{"no choices", `{"id":"x","object":"chat.completion","choices":[]}`, KindBadResponse, []string{"no choices"}},
		{"not a completion", `{"choices":"nope"}`, KindBadResponse, []string{"cannot decode"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := newServer(t, jsonBody(http.StatusOK, tt.body))
			c, _ := newTestClient(srv.URL, Config{})
			_, err := c.Complete(context.Background(), Request{Model: "m"}, nil)
			wantError(t, err, tt.kind, tt.subs...)
		})
	}
}
