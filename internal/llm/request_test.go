package llm

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"reflect"
	"testing"
)

// sentRequest is what a server receives, decoded loosely enough to see every
// field terp sends.
type sentRequest struct {
	Model         string          `json:"model"`
	Stream        bool            `json:"stream"`
	StreamOptions map[string]bool `json:"stream_options"`
	Messages      []struct {
		Role       string  `json:"role"`
		Content    *string `json:"content"`
		ToolCallID string  `json:"tool_call_id"`
		ToolCalls  []struct {
			ID       string `json:"id"`
			Type     string `json:"type"`
			Function struct {
				Name      string `json:"name"`
				Arguments string `json:"arguments"`
			} `json:"function"`
		} `json:"tool_calls"`
	} `json:"messages"`
	Tools []struct {
		Type     string `json:"type"`
		Function struct {
			Name        string          `json:"name"`
			Description string          `json:"description"`
			Parameters  json.RawMessage `json:"parameters"`
		} `json:"function"`
	} `json:"tools"`
}

func TestRequestBody(t *testing.T) {
	var (
		got    sentRequest
		header http.Header
	)
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		header = r.Header.Clone()
		b, _ := io.ReadAll(r.Body)
		if err := json.Unmarshal(b, &got); err != nil {
			t.Errorf("request body is not JSON: %v\n%s", err, b)
		}
		sse("data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"ok\"},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n")(w, r)
	})
	c, _ := newTestClient(srv.URL, Config{Stream: true, APIKey: "sk-test"})
	schema := json.RawMessage(`{"type":"object","properties":{"code":{"type":"string"}},"required":["code"]}`)
	req := Request{
		Model: "qwen3-32b",
		Messages: []Message{
			{Role: RoleSystem, Content: "You are a data analyst."},
			{Role: RoleUser, Content: "Sum 1..10"},
			{Role: RoleAssistant, ToolCalls: []ToolCall{
				{ID: "chatcmpl-tool-abc", Name: "run_python", Arguments: `{"code":"print(sum(range(11)))"}`},
				{ID: "call_x", Name: "list_files", Arguments: ""},
				{ID: "call_y", Name: "run_python", Arguments: `print("bare code")`},
			}},
			{Role: RoleTool, ToolCallID: "chatcmpl-tool-abc", Content: `{"exit_code":0,"stdout":"55\n"}`},
			{Role: RoleTool, ToolCallID: "call_x", Content: ""},
			{Role: RoleTool, ToolCallID: "call_y", Content: "error: arguments are not a JSON object"},
		},
		Tools: []Tool{
			{Name: "run_python", Description: "Run Python.", Parameters: schema},
			{Name: "list_files", Description: "List files."},
		},
	}
	if _, err := c.Complete(context.Background(), req, nil); err != nil {
		t.Fatal(err)
	}

	if got.Model != "qwen3-32b" || !got.Stream || !got.StreamOptions["include_usage"] {
		t.Errorf("model %q, stream %v, stream_options %v: want qwen3-32b, true, include_usage", got.Model, got.Stream, got.StreamOptions)
	}
	if h := header.Get("Authorization"); h != "Bearer sk-test" {
		t.Errorf("Authorization = %q", h)
	}
	if len(got.Tools) != 2 {
		t.Fatalf("tools = %d, want 2", len(got.Tools))
	}
	if tool := got.Tools[0]; tool.Type != "function" || tool.Function.Name != "run_python" || string(tool.Function.Parameters) != string(schema) {
		t.Errorf("tool 0 = %+v", tool)
	}
	if p := string(got.Tools[1].Function.Parameters); p != `{"type":"object","properties":{}}` {
		t.Errorf("tool without parameters sends %s, want an empty object schema", p)
	}

	if len(got.Messages) != 6 {
		t.Fatalf("messages = %d, want 6", len(got.Messages))
	}
	type call struct{ ID, Type, Name, Args string }
	var calls []call
	for _, tc := range got.Messages[2].ToolCalls {
		calls = append(calls, call{tc.ID, tc.Type, tc.Function.Name, tc.Function.Arguments})
	}
	wantCalls := []call{
		{"chatcmpl-tool-abc", "function", "run_python", `{"code":"print(sum(range(11)))"}`},
		{"call_x", "function", "list_files", "{}"},
		{"call_y", "function", "run_python", `{"unparsed_arguments":"print(\"bare code\")"}`},
	}
	if !reflect.DeepEqual(calls, wantCalls) {
		t.Errorf("assistant tool calls:\n got %+v\nwant %+v", calls, wantCalls)
	}
	for i, want := range []struct{ id, content string }{
		{"chatcmpl-tool-abc", `{"exit_code":0,"stdout":"55\n"}`},
		{"call_x", emptyToolOutput},
		{"call_y", "error: arguments are not a JSON object"},
	} {
		m := got.Messages[3+i]
		if m.Role != "tool" || m.ToolCallID != want.id || m.Content == nil || *m.Content != want.content {
			t.Errorf("tool message %d = %+v, want id %q content %q", i, m, want.id, want.content)
		}
	}
}

func TestRequestWithoutKeyOrStream(t *testing.T) {
	var (
		got    sentRequest
		header http.Header
	)
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		header = r.Header.Clone()
		_ = json.NewDecoder(r.Body).Decode(&got)
		jsonBody(http.StatusOK, `{"choices":[{"index":0,"message":{"role":"assistant","content":"ok"},"finish_reason":"stop"}]}`)(w, r)
	})
	c, _ := newTestClient(srv.URL, Config{})
	if _, err := c.Complete(context.Background(), Request{Model: "m", Messages: []Message{{Role: RoleUser, Content: "hi"}}}, nil); err != nil {
		t.Fatal(err)
	}
	if _, ok := header["Authorization"]; ok {
		t.Errorf("Authorization sent without a key: %q", header.Get("Authorization"))
	}
	if got.Stream || got.StreamOptions != nil {
		t.Errorf("stream %v, stream_options %v: want neither", got.Stream, got.StreamOptions)
	}
	if len(got.Tools) != 0 {
		t.Errorf("tools sent: %+v", got.Tools)
	}
}

// A caller's http.Client is copied, not modified.
func TestHTTPClientNotModified(t *testing.T) {
	hc := &http.Client{}
	c := New(Config{BaseURL: "http://127.0.0.1:1/v1", HTTPClient: hc})
	if hc.Transport != nil {
		t.Errorf("caller's Transport was replaced with %T", hc.Transport)
	}
	if c.retry.base != http.DefaultTransport {
		t.Errorf("retries wrap %T, want http.DefaultTransport", c.retry.base)
	}
}

// A history saved before the assembler cleaned such replies still goes back
// clean: a call that is both a tool call and <tool_call> text in the content
// goes back once, and double-encoded arguments go back as the object.
func TestStoredHistoryGoesBackOnce(t *testing.T) {
	var got sentRequest
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		_ = json.NewDecoder(r.Body).Decode(&got)
		jsonBody(http.StatusOK, `{"choices":[{"index":0,"message":{"role":"assistant","content":"42"},"finish_reason":"stop"}]}`)(w, r)
	})
	c, _ := newTestClient(srv.URL, Config{})
	req := Request{
		Model: "m",
		Tools: []Tool{runPythonTool},
		Messages: []Message{
			{Role: RoleUser, Content: "6*7?"},
			{Role: RoleAssistant,
				Content: "Let me compute it.\n<tool_call>\n{\"name\": \"run_python\", \"arguments\": {\"code\": \"print(6*7)\"}}\n</tool_call>",
				ToolCalls: []ToolCall{
					{ID: "call_a", Name: "run_python", Arguments: `{"code": "print(6*7)"}`},
					{ID: "call_b", Name: "run_python", Arguments: `"{\"code\": \"print(1)\"}"`},
				}},
			{Role: RoleTool, ToolCallID: "call_a", Content: "42"},
			{Role: RoleTool, ToolCallID: "call_b", Content: "1"},
		},
	}
	if _, err := c.Complete(context.Background(), req, nil); err != nil {
		t.Fatal(err)
	}
	if len(got.Messages) != 4 {
		t.Fatalf("messages = %d, want 4", len(got.Messages))
	}
	m := got.Messages[1]
	if m.Content == nil || *m.Content != "Let me compute it." {
		t.Errorf("assistant content = %v, want the text without the call it repeats", m.Content)
	}
	if len(m.ToolCalls) != 2 || m.ToolCalls[1].Function.Arguments != `{"code": "print(1)"}` {
		t.Errorf("tool calls = %+v, want the double-encoded arguments as the object", m.ToolCalls)
	}
	if req.Messages[1].Content == "Let me compute it." {
		t.Error("the caller's history was modified")
	}
}

// A call written in the content that the server did not also send is the
// model's text, and goes back as it was.
func TestHistoryKeepsOtherWrittenCalls(t *testing.T) {
	content := "Next I would run:\n<tool_call>\n{\"name\": \"run_python\", \"arguments\": {\"code\": \"print(2)\"}}\n</tool_call>"
	msgs := []Message{{Role: RoleAssistant, Content: content, ToolCalls: []ToolCall{{ID: "c", Name: "run_python", Arguments: `{"code":"print(1)"}`}}}}
	if got := withoutEchoes(msgs, []Tool{runPythonTool}); got[0].Content != content {
		t.Errorf("content = %q, want it unchanged", got[0].Content)
	}
}
