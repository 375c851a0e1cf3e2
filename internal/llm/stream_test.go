package llm

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"
)

// Each case is a stream as a server really writes it (QUIRKS.md), byte for
// byte, and the Response the agent loop should see.
func TestStreamNormalization(t *testing.T) {
	tests := []struct {
		name       string
		wire       string
		want       Response
		wantDeltas []Delta // checked when set
	}{
		{
			name: "role on first chunk only, finish and usage on chunks of their own",
			wire: `data: {"id":"chatcmpl-1","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}],"usage":null}

data: {"id":"chatcmpl-1","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"The answer"},"finish_reason":null}],"usage":null}

data: {"id":"chatcmpl-1","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":" is 42."},"finish_reason":null}],"usage":null}

data: {"id":"chatcmpl-1","object":"chat.completion.chunk","choices":[{"index":0,"delta":{},"finish_reason":"stop"}],"usage":null}

data: {"id":"chatcmpl-1","object":"chat.completion.chunk","choices":[],"usage":{"prompt_tokens":12,"completion_tokens":5,"total_tokens":17}}

data: [DONE]

`,
			want: Response{Content: "The answer is 42.", FinishReason: "stop", Usage: Usage{12, 5, 17}},
			wantDeltas: []Delta{
				{Kind: DeltaContent, Text: "The answer"},
				{Kind: DeltaContent, Text: " is 42."},
			},
		},
		{
			name: "role on every chunk",
			wire: `data: {"choices":[{"index":0,"delta":{"role":"assistant","content":"Hel"},"finish_reason":null}]}

data: {"choices":[{"index":0,"delta":{"role":"assistant","content":"lo"},"finish_reason":null}]}

data: {"choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":"stop"}],"usage":{"prompt_tokens":3,"completion_tokens":2,"total_tokens":5}}

data: [DONE]

`,
			want: Response{Content: "Hello", FinishReason: "stop", Usage: Usage{3, 2, 5}},
		},
		{
			name: "id, type and name on the first delta only, arguments over many chunks",
			wire: `data: {"choices":[{"index":0,"delta":{"role":"assistant","content":null},"finish_reason":null}]}

data: {"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"chatcmpl-tool-5c1f0e2a9b","type":"function","function":{"name":"run_python","arguments":""}}]},"finish_reason":null}]}

data: {"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"code\": "}}]},"finish_reason":null}]}

data: {"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"\"print(1"}}]},"finish_reason":null}]}

data: {"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"+1)\"}"}}]},"finish_reason":null}]}

data: {"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}

data: [DONE]

`,
			want: Response{
				ToolCalls:    []ToolCall{{ID: "chatcmpl-tool-5c1f0e2a9b", Name: "run_python", Arguments: `{"code": "print(1+1)"}`}},
				FinishReason: "tool_calls",
			},
		},
		{
			name: "later deltas send empty id, type and name",
			wire: `data: {"choices":[{"index":0,"delta":{"role":"assistant","tool_calls":[{"index":0,"id":"Xk2pQ9rT4","type":"function","function":{"name":"run_python","arguments":"{\"code\":"}}]},"finish_reason":null}]}

data: {"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"","type":"","function":{"name":"","arguments":"\"x = 1\"}"}}]},"finish_reason":null}]}

data: {"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}

data: [DONE]

`,
			want: Response{
				ToolCalls:    []ToolCall{{ID: "Xk2pQ9rT4", Name: "run_python", Arguments: `{"code":"x = 1"}`}},
				FinishReason: "tool_calls",
			},
		},
		{
			name: "missing and empty ids are synthesized",
			wire: `data: {"choices":[{"index":0,"delta":{"role":"assistant","tool_calls":[{"index":0,"type":"function","function":{"name":"run_python","arguments":"{\"code\":\"1\"}"}}]},"finish_reason":null}]}

data: {"choices":[{"index":0,"delta":{"tool_calls":[{"index":1,"id":"","type":"function","function":{"name":"run_python","arguments":"{\"code\":\"2\"}"}}]},"finish_reason":null}]}

data: {"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}

data: [DONE]

`,
			want: Response{
				ToolCalls: []ToolCall{
					{ID: synthID, Name: "run_python", Arguments: `{"code":"1"}`},
					{ID: synthID, Name: "run_python", Arguments: `{"code":"2"}`},
				},
				FinishReason: "tool_calls",
			},
		},
		{
			name: "numeric id is kept as text",
			wire: `data: {"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":381920475,"type":"function","function":{"name":"run_python","arguments":"{}"}}]},"finish_reason":"tool_calls"}]}

data: [DONE]

`,
			want: Response{
				ToolCalls:    []ToolCall{{ID: "381920475", Name: "run_python", Arguments: "{}"}},
				FinishReason: "tool_calls",
			},
		},
		{
			name: "index missing on every delta: a new id starts a new call",
			wire: `data: {"choices":[{"index":0,"delta":{"role":"assistant","content":"","tool_calls":[{"id":"call_a1b2c3d4","function":{"name":"run_python","arguments":"{\"code\":\"1\"}"}}]},"finish_reason":null}]}

data: {"choices":[{"index":0,"delta":{"role":"assistant","content":"","tool_calls":[{"id":"call_e5f6g7h8","function":{"name":"run_python","arguments":"{\"code\":\"2\"}"}}]},"finish_reason":null}]}

data: {"choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":"tool_calls"}]}

data: [DONE]

`,
			want: Response{
				ToolCalls: []ToolCall{
					{ID: "call_a1b2c3d4", Name: "run_python", Arguments: `{"code":"1"}`},
					{ID: "call_e5f6g7h8", Name: "run_python", Arguments: `{"code":"2"}`},
				},
				FinishReason: "tool_calls",
			},
		},
		{
			name: "index 0 for all of several parallel calls",
			wire: `data: {"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_aaaa1111","type":"function","function":{"name":"run_python","arguments":"{\"code\":"}}]},"finish_reason":null}]}

data: {"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"\"1\"}"}}]},"finish_reason":null}]}

data: {"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_bbbb2222","type":"function","function":{"name":"run_python","arguments":"{\"code\":"}}]},"finish_reason":null}]}

data: {"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"\"2\"}"}}]},"finish_reason":null}]}

data: {"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}

data: [DONE]

`,
			want: Response{
				ToolCalls: []ToolCall{
					{ID: "call_aaaa1111", Name: "run_python", Arguments: `{"code":"1"}`},
					{ID: "call_bbbb2222", Name: "run_python", Arguments: `{"code":"2"}`},
				},
				FinishReason: "tool_calls",
			},
		},
		{
			name: "no ids and index 0 for all: a name after complete arguments starts a new call",
			wire: `data: {"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"name":"run_python","arguments":"{\"code\":\"1\"}"}}]},"finish_reason":null}]}

data: {"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"name":"run_python","arguments":"{\"code\":\"2\"}"}}]},"finish_reason":null}]}

data: {"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}

data: [DONE]

`,
			want: Response{
				ToolCalls: []ToolCall{
					{ID: synthID, Name: "run_python", Arguments: `{"code":"1"}`},
					{ID: synthID, Name: "run_python", Arguments: `{"code":"2"}`},
				},
				FinishReason: "tool_calls",
			},
		},
		{
			name: "a fresh id on a later delta without a name continues the call",
			wire: `data: {"choices":[{"index":0,"delta":{"tool_calls":[{"id":"call_first","type":"function","function":{"name":"run_python","arguments":"{\"code\":"}}]},"finish_reason":null}]}

data: {"choices":[{"index":0,"delta":{"tool_calls":[{"id":"call_other","type":"function","function":{"arguments":"\"1\"}"}}]},"finish_reason":null}]}

data: {"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}

data: [DONE]

`,
			want: Response{
				ToolCalls:    []ToolCall{{ID: "call_first", Name: "run_python", Arguments: `{"code":"1"}`}},
				FinishReason: "tool_calls",
			},
		},
		{
			name: "two entries with the same index in one delta",
			wire: `data: {"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"chatcmpl-tool-9f8e7d","type":"function","function":{"name":"run_python"}},{"index":0,"function":{"arguments":"{\"code\": \"x = 1\"}"}}]},"finish_reason":null}]}

data: {"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}

data: [DONE]

`,
			want: Response{
				ToolCalls:    []ToolCall{{ID: "chatcmpl-tool-9f8e7d", Name: "run_python", Arguments: `{"code": "x = 1"}`}},
				FinishReason: "tool_calls",
			},
		},
		{
			name: "arguments whole in one chunk",
			wire: `data: {"choices":[{"index":0,"delta":{"role":"assistant","content":null,"tool_calls":[{"index":0,"id":"chatcmpl-tool-1","type":"function","function":{"name":"run_python","arguments":"{\"code\": \"import pandas as pd\\nprint(pd.__version__)\"}"}}]},"finish_reason":null}]}

data: {"choices":[{"index":0,"delta":{"content":""},"finish_reason":"tool_calls"}]}

data: [DONE]

`,
			want: Response{
				ToolCalls:    []ToolCall{{ID: "chatcmpl-tool-1", Name: "run_python", Arguments: `{"code": "import pandas as pd\nprint(pd.__version__)"}`}},
				FinishReason: "tool_calls",
			},
		},
		{
			name: "arguments sent as a JSON object",
			wire: `data: {"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"aB3dE5gH7jK9mN1pQ3sT5vX7zA9cE1gI","type":"function","function":{"name":"run_python","arguments":{"code": "print(2)"}}}]},"finish_reason":null}]}

data: {"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}

data: [DONE]

`,
			want: Response{
				ToolCalls:    []ToolCall{{ID: "aB3dE5gH7jK9mN1pQ3sT5vX7zA9cE1gI", Name: "run_python", Arguments: `{"code":"print(2)"}`}},
				FinishReason: "tool_calls",
			},
		},
		{
			name: "empty arguments become {}",
			wire: `data: {"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_0001","type":"function","function":{"name":"list_files","arguments":""}}]},"finish_reason":null}]}

data: {"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}

data: [DONE]

`,
			want: Response{
				ToolCalls:    []ToolCall{{ID: "call_0001", Name: "list_files", Arguments: "{}"}},
				FinishReason: "tool_calls",
			},
		},
		{
			name: "invalid JSON arguments pass through as text",
			wire: `data: {"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_0002","type":"function","function":{"name":"run_python","arguments":"{\"code\": \"print(\"hi)"}}]},"finish_reason":null}]}

data: {"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}

data: [DONE]

`,
			want: Response{
				ToolCalls:    []ToolCall{{ID: "call_0002", Name: "run_python", Arguments: `{"code": "print("hi)`}},
				FinishReason: "tool_calls",
			},
		},
		{
			name: "reasoning in reasoning_content, content empty while thinking",
			wire: `data: {"choices":[{"index":0,"delta":{"role":"assistant","content":"","reasoning_content":"The user"},"finish_reason":null}]}

data: {"choices":[{"index":0,"delta":{"content":"","reasoning_content":" wants a sum."},"finish_reason":null}]}

data: {"choices":[{"index":0,"delta":{"content":"\n\nIt is 4.","reasoning_content":null},"finish_reason":null}]}

data: {"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}

data: [DONE]

`,
			want: Response{Content: "It is 4.", Reasoning: "The user wants a sum.", FinishReason: "stop"},
			wantDeltas: []Delta{
				{Kind: DeltaReasoning, Text: "The user"},
				{Kind: DeltaReasoning, Text: " wants a sum."},
				{Kind: DeltaContent, Text: "It is 4."},
			},
		},
		{
			name: "reasoning in reasoning",
			wire: `data: {"choices":[{"index":0,"delta":{"role":"assistant","reasoning":"Compute 2+2."},"finish_reason":null}]}

data: {"choices":[{"index":0,"delta":{"content":"4"},"finish_reason":null}]}

data: {"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}

data: [DONE]

`,
			want: Response{Content: "4", Reasoning: "Compute 2+2.", FinishReason: "stop"},
		},
		{
			name: "the same text in reasoning and reasoning_content counts once",
			wire: `data: {"choices":[{"index":0,"delta":{"reasoning":"Hmm.","reasoning_content":"Hmm."},"finish_reason":null}]}

data: {"choices":[{"index":0,"delta":{"content":"Yes."},"finish_reason":"stop"}]}

data: [DONE]

`,
			want: Response{Content: "Yes.", Reasoning: "Hmm.", FinishReason: "stop"},
		},
		{
			name: "think block in content, tags split across chunks",
			wire: `data: {"choices":[{"index":0,"delta":{"role":"assistant","content":"<thi"},"finish_reason":null}]}

data: {"choices":[{"index":0,"delta":{"content":"nk>\nLet me"},"finish_reason":null}]}

data: {"choices":[{"index":0,"delta":{"content":" think.</th"},"finish_reason":null}]}

data: {"choices":[{"index":0,"delta":{"content":"ink>\n\nThe answer is 4."},"finish_reason":null}]}

data: {"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}

data: [DONE]

`,
			want: Response{Content: "The answer is 4.", Reasoning: "Let me think.", FinishReason: "stop"},
			wantDeltas: []Delta{
				{Kind: DeltaReasoning, Text: "Let me"},
				{Kind: DeltaReasoning, Text: " think."},
				{Kind: DeltaContent, Text: "The answer is 4."},
			},
		},
		{
			name: "stream starts inside thinking, only </think> appears",
			wire: `data: {"choices":[{"index":0,"delta":{"role":"assistant","content":"Okay, the user"},"finish_reason":null}]}

data: {"choices":[{"index":0,"delta":{"content":" wants 2+2.\n</think>\n\n"},"finish_reason":null}]}

data: {"choices":[{"index":0,"delta":{"content":"2+2 = 4."},"finish_reason":null}]}

data: {"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}

data: [DONE]

`,
			want: Response{Content: "2+2 = 4.", Reasoning: "Okay, the user wants 2+2.", FinishReason: "stop"},
		},
		{
			name: "whole answer only in reasoning, content null: recovered as the answer",
			wire: `data: {"choices":[{"index":0,"delta":{"role":"assistant","content":null,"reasoning":"The mean"},"finish_reason":null}]}

data: {"choices":[{"index":0,"delta":{"content":null,"reasoning":" is 3.5."},"finish_reason":null}]}

data: {"choices":[{"index":0,"delta":{"content":null},"finish_reason":"stop"}]}

data: [DONE]

`,
			want: Response{Content: "The mean is 3.5.", FinishReason: "stop", ReasoningAsAnswer: true},
			wantDeltas: []Delta{
				{Kind: DeltaReasoning, Text: "The mean"},
				{Kind: DeltaReasoning, Text: " is 3.5."},
			},
		},
		{
			name: "reasoning cut off by the length limit is not an answer",
			wire: `data: {"choices":[{"index":0,"delta":{"reasoning_content":"First I need to"},"finish_reason":null}]}

data: {"choices":[{"index":0,"delta":{},"finish_reason":"length"}]}

data: [DONE]

`,
			want: Response{Reasoning: "First I need to", FinishReason: "length"},
		},
		{
			name: "finish_reason without [DONE] is a complete stream",
			wire: `data: {"choices":[{"index":0,"delta":{"content":"Done."},"finish_reason":null}]}

data: {"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}

`,
			want: Response{Content: "Done.", FinishReason: "stop"},
		},
		{
			name: "keep-alive comments, event and id lines are ignored",
			wire: `: ping

event: message
id: 1
data: {"choices":[{"index":0,"delta":{"content":"Hi"},"finish_reason":null}]}

: ping

data: {"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}

data: [DONE]

`,
			want: Response{Content: "Hi", FinishReason: "stop"},
		},
		{
			name: "CRLF line endings and no space after data:",
			wire: "data:{\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hi\"},\"finish_reason\":null}]}\r\n\r\n" +
				"data:{\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\r\n\r\n" +
				"data:[DONE]\r\n\r\n",
			want: Response{Content: "Hi", FinishReason: "stop"},
		},
		{
			name: "usage without total_tokens is summed",
			wire: `data: {"choices":[{"index":0,"delta":{"content":"Hi"},"finish_reason":"stop"}],"usage":{"prompt_tokens":7,"completion_tokens":1}}

data: [DONE]

`,
			want: Response{Content: "Hi", FinishReason: "stop", Usage: Usage{7, 1, 8}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := newServer(t, sse(tt.wire))
			c, _ := newTestClient(srv.URL, Config{Stream: true})
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

// Failures inside a stream: the reply had started with 200, so the error
// comes from the body.
func TestStreamErrors(t *testing.T) {
	tests := []struct {
		name string
		wire string
		kind ErrorKind
		subs []string
	}{
		{
			name: "error object in a data line",
			wire: `data: {"choices":[{"index":0,"delta":{"content":"Hi"},"finish_reason":null}]}

data: {"error": {"object": "error", "message": "CUDA error: an illegal memory access was encountered", "type": "InternalServerError", "param": null, "code": 500}}

`,
			kind: KindServer,
			subs: []string{"CUDA error: an illegal memory access was encountered", "failed while answering"},
		},
		{
			name: "context length error in a data line",
			wire: `data: {"error":{"message":"The input (40960 tokens) is longer than the model's context length (32768 tokens).","code":400}}

`,
			kind: KindContextLength,
			subs: []string{"context window", "40960 tokens"},
		},
		{
			name: "llama.cpp bare error line",
			wire: `data: {"choices":[{"index":0,"delta":{"content":"Hi"},"finish_reason":null}]}

error: {"code":500,"message":"failed to parse the tool call","type":"server_error"}

`,
			kind: KindServer,
			subs: []string{"failed to parse the tool call"},
		},
		{
			name: "event: error followed by data",
			wire: `event: error
data: {"message":"slot unavailable"}

`,
			kind: KindServer,
			subs: []string{"slot unavailable"},
		},
		{
			name: "error as a bare string",
			wire: `data: {"error":"Model crashed"}

`,
			kind: KindServer,
			subs: []string{"Model crashed"},
		},
		{
			name: "an HTML page instead of a stream",
			wire: "<!DOCTYPE html>\n<html><body>Welcome to nginx!</body></html>\n",
			kind: KindBadResponse,
			subs: []string{"not an OpenAI-compatible", "<!DOCTYPE html>"},
		},
		{
			name: "a chunk that is not JSON",
			wire: `data: {"choices":[{"index":0,"delta":{"content":"Hi"

`,
			kind: KindBadResponse,
			subs: []string{"cannot decode"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := newServer(t, sse(tt.wire))
			c, _ := newTestClient(srv.URL, Config{Stream: true})
			_, err := c.Complete(context.Background(), Request{Model: "m"}, nil)
			wantError(t, err, tt.kind, tt.subs...)
			if n := srv.hits.Load(); n != 1 {
				t.Errorf("server got %d requests, want 1: an error the server reported is not retried", n)
			}
		})
	}
}

// A connection that drops in the middle of a reply, every time, is a broken
// stream after every retry; the text that arrived is shown once, not once
// per attempt.
func TestStreamConnectionDropped(t *testing.T) {
	srv := newServer(t, func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hel\"},\"finish_reason\":null}]}\n\n")
		w.(http.Flusher).Flush()
		conn, _, err := w.(http.Hijacker).Hijack()
		if err == nil {
			_ = conn.Close()
		}
	})
	c, _ := newTestClient(srv.URL, Config{Stream: true})
	var deltas []Delta
	_, err := c.Complete(context.Background(), Request{Model: "m"}, collect(&deltas))
	wantError(t, err, KindBadResponse, "stopped before the model finished (after 4 retries)")
	if n := srv.hits.Load(); n != 1+defaultRetries {
		t.Errorf("server got %d requests, want %d", n, 1+defaultRetries)
	}
	if len(deltas) != 1 || deltas[0].Text != "Hel" {
		t.Errorf("deltas = %+v, want the text that arrived before the drop, once", deltas)
	}
}

// SSE framing as the specification has it (WHATWG HTML 9.2), and as servers
// bend it: each case is read the same as one chunk per event would be.
func TestStreamFraming(t *testing.T) {
	const (
		hi   = `{"choices":[{"index":0,"delta":{"content":"Hi"},"finish_reason":null}]}`
		stop = `{"choices":[{"index":0,"delta":{"content":" there."},"finish_reason":"stop"}]}`
	)
	want := Response{Content: "Hi there.", FinishReason: "stop"}
	tests := []struct {
		name string
		wire string
	}{
		{"one chunk over several data lines", "data: {\"choices\":[{\"index\":0,\ndata: \"delta\":{\"content\":\"Hi\"},\ndata: \"finish_reason\":null}]}\n\ndata: " + stop + "\n\ndata: [DONE]\n\n"},
		{"pretty-printed over data lines, CRLF", "data: {\r\ndata:   \"choices\": [{\"index\": 0, \"delta\": {\"content\": \"Hi\"}}]\r\ndata: }\r\n\r\ndata: " + stop + "\r\n\r\ndata: [DONE]\r\n\r\n"},
		{"no blank lines between events", "data: " + hi + "\ndata: " + stop + "\ndata: [DONE]\n"},
		{"a split chunk followed by another without a blank line", "data: {\"choices\":[{\"index\":0,\ndata: \"delta\":{\"content\":\"Hi\"}}]}\ndata: " + stop + "\n\n"},
		{"lone CR line ends", "data: " + hi + "\r\rdata: " + stop + "\r\rdata: [DONE]\r\r"},
		{"id, event and retry fields and comments", "retry: 1000\n: ping\nid: 1\nevent: message\ndata: " + hi + "\n\nid: 2\ndata: " + stop + "\n\n"},
		{"no newline after the last event", "data: " + hi + "\n\ndata: " + stop},
		{"a data line without a space", "data:" + hi + "\n\ndata:" + stop + "\n\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := newServer(t, sse(tt.wire))
			c, _ := newTestClient(srv.URL, Config{Stream: true, MaxRetries: -1})
			var deltas []Delta
			got, err := c.Complete(context.Background(), Request{Model: "m"}, collect(&deltas))
			if err != nil {
				t.Fatalf("Complete: %v", err)
			}
			checkResponse(t, got, want)
			if len(deltas) != 2 || deltas[0].Text != "Hi" {
				t.Errorf("deltas = %+v, want Hi, then the rest", deltas)
			}
		})
	}
}

// A chunk that is complete JSON on its data line is passed on at once, not
// held until the blank line: a server that leaves blank lines out would
// otherwise show nothing until the end.
func TestStreamChunkNotHeldBack(t *testing.T) {
	release := make(chan struct{})
	srv := newServer(t, func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hi\"},\"finish_reason\":null}]}\n")
		w.(http.Flusher).Flush()
		select {
		case <-release:
		case <-time.After(2 * time.Second):
			t.Error("the first chunk was held back until the next line")
		}
		_, _ = io.WriteString(w, "data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n")
	})
	c, _ := newTestClient(srv.URL, Config{Stream: true})
	got, err := c.Complete(context.Background(), Request{Model: "m"}, func(d Delta) {
		if d.Text == "Hi" {
			close(release)
		}
	})
	if err != nil || got.Content != "Hi" {
		t.Fatalf("Complete = %q, %v", got.Content, err)
	}
}

// A stream is read however long its lines are: Ollama sends a whole file of
// code as the arguments of one chunk.
func TestStreamLongLine(t *testing.T) {
	code := make([]byte, 200<<10)
	for i := range code {
		code[i] = 'a' + byte(i%26)
	}
	wire := `data: {"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_big","function":{"name":"run_python","arguments":"{\"code\":\"` +
		string(code) + `\"}"}}]},"finish_reason":"tool_calls"}]}` + "\n\ndata: [DONE]\n\n"
	var a assembler
	if err := readStream(bufio.NewReaderSize(strings.NewReader(wire), 4096), &a); err != nil {
		t.Fatal(err)
	}
	r := a.response()
	if len(r.ToolCalls) != 1 || r.ToolCalls[0].Arguments != `{"code":"`+string(code)+`"}` {
		t.Errorf("long arguments were not read whole (got %d calls)", len(r.ToolCalls))
	}
}
