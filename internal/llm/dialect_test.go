package llm

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
)

var runPython = Tool{Name: "run_python", Parameters: json.RawMessage(`{"type":"object","properties":{"code":{"type":"string"}}}`)}

// Each dialect is a reply as a server without a parser for the model's
// format sends it: the call in the content, tool_calls empty. Every case is
// written out twice, as the SSE stream and as the whole reply, byte for
// byte.
var dialectCases = []struct {
	name   string
	fenced bool // Request.FencedCode
	stream string
	whole  string
	// want is the recovered call's arguments; rest the content left.
	format, wantName, wantArgs, rest string
}{
	{
		name: "hermes",
		stream: `data: {"id":"chatcmpl-1","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}

data: {"id":"chatcmpl-1","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"I'll compute it.\n\n<tool"},"finish_reason":null}]}

data: {"id":"chatcmpl-1","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"_call>\n{\"name\": \"run_python\", "},"finish_reason":null}]}

data: {"id":"chatcmpl-1","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"\"arguments\": {\"code\": \"print(1234*5678)\"}}\n</tool_call>"},"finish_reason":null}]}

data: {"id":"chatcmpl-1","object":"chat.completion.chunk","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}

data: [DONE]

`,
		whole:    `{"id":"chatcmpl-1","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"I'll compute it.\n\n<tool_call>\n{\"name\": \"run_python\", \"arguments\": {\"code\": \"print(1234*5678)\"}}\n</tool_call>","tool_calls":[]},"finish_reason":"stop"}]}`,
		format:   FormatHermes,
		wantName: "run_python", wantArgs: `{"code":"print(1234*5678)"}`, rest: "I'll compute it.",
	},
	{
		name: "hermes with a raw newline in the code",
		stream: `data: {"choices":[{"index":0,"delta":{"content":"<tool_call>\n{\"name\": \"run_python\", \"arguments\": {\"code\": \"x = 6\nprint(x*7)\"}}"},"finish_reason":null}]}

data: {"choices":[{"index":0,"delta":{"content":"\n</tool_call>"},"finish_reason":"stop"}]}

data: [DONE]

`,
		whole:    `{"choices":[{"index":0,"message":{"role":"assistant","content":"<tool_call>\n{\"name\": \"run_python\", \"arguments\": {\"code\": \"x = 6\nprint(x*7)\"}}\n</tool_call>"},"finish_reason":"stop"}]}`,
		format:   FormatHermes,
		wantName: "run_python", wantArgs: `{"code":"x = 6\nprint(x*7)"}`,
	},
	{
		name: "fenced json",
		stream: `data: {"choices":[{"index":0,"delta":{"role":"assistant","content":"Let me check.\n` + "``" + `"},"finish_reason":null}]}

data: {"choices":[{"index":0,"delta":{"content":"` + "`" + `json\n{\"name\": \"run_python\", \"arguments\": "},"finish_reason":null}]}

data: {"choices":[{"index":0,"delta":{"content":"{\"code\": \"import math\\nprint(math.pi)\"}}\n` + "```" + `"},"finish_reason":null}]}

data: {"choices":[{"index":0,"delta":{},"finish_reason":"stop"}],"usage":{"prompt_tokens":50,"completion_tokens":20,"total_tokens":70}}

data: [DONE]

`,
		whole:    `{"choices":[{"index":0,"message":{"role":"assistant","content":"Let me check.\n` + "```json" + `\n{\"name\": \"run_python\", \"arguments\": {\"code\": \"import math\\nprint(math.pi)\"}}\n` + "```" + `"},"finish_reason":"stop"}]}`,
		format:   FormatJSON,
		wantName: "run_python", wantArgs: `{"code":"import math\nprint(math.pi)"}`, rest: "Let me check.",
	},
	{
		name: "mistral",
		stream: `data: {"choices":[{"index":0,"delta":{"role":"assistant","content":"[TOOL_"},"finish_reason":null}]}

data: {"choices":[{"index":0,"delta":{"content":"CALLS][{\"name\": \"run_python\", \"arguments\": {\"code\": "},"finish_reason":null}]}

data: {"choices":[{"index":0,"delta":{"content":"\"print(2**10)\"}}]"},"finish_reason":null}]}

data: {"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}

data: [DONE]

`,
		whole:    `{"choices":[{"index":0,"message":{"role":"assistant","content":"[TOOL_CALLS][{\"name\": \"run_python\", \"arguments\": {\"code\": \"print(2**10)\"}}]"},"finish_reason":"stop"}]}`,
		format:   FormatMistral,
		wantName: "run_python", wantArgs: `{"code":"print(2**10)"}`,
	},
	{
		name: "mistral with [ARGS]",
		stream: `data: {"choices":[{"index":0,"delta":{"content":"[TOOL_CALLS]run_python[ARGS]{\"code\": \"print(3)\"}"},"finish_reason":"stop"}]}

data: [DONE]

`,
		whole:    `{"choices":[{"index":0,"message":{"content":"[TOOL_CALLS]run_python[ARGS]{\"code\": \"print(3)\"}"},"finish_reason":"stop"}]}`,
		format:   FormatMistral,
		wantName: "run_python", wantArgs: `{"code":"print(3)"}`,
	},
	{
		name: "llama parameters",
		stream: `data: {"choices":[{"index":0,"delta":{"role":"assistant","content":"<|python_start|>{\"name\": \"run_python\", "},"finish_reason":null}]}

data: {"choices":[{"index":0,"delta":{"content":"\"parameters\": {\"code\": \"print(sum(range(10)))\"}}<|python_end|>"},"finish_reason":null}]}

data: {"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}

data: [DONE]

`,
		whole:    `{"choices":[{"index":0,"message":{"role":"assistant","content":"<|python_start|>{\"name\": \"run_python\", \"parameters\": {\"code\": \"print(sum(range(10)))\"}}<|python_end|>"},"finish_reason":"stop"}]}`,
		format:   FormatLlama,
		wantName: "run_python", wantArgs: `{"code":"print(sum(range(10)))"}`,
	},
	{
		name: "qwen xml inside tool_call",
		stream: `data: {"choices":[{"index":0,"delta":{"role":"assistant","content":"<tool_call>\n<function=run_python>\n<parameter=code>\nx = [1, 2, 3]\n"},"finish_reason":null}]}

data: {"choices":[{"index":0,"delta":{"content":"print(\"sum\", sum(x))\n</parameter>\n</function>\n</tool_call>"},"finish_reason":null}]}

data: {"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}

data: [DONE]

`,
		whole:    `{"choices":[{"index":0,"message":{"role":"assistant","content":"<tool_call>\n<function=run_python>\n<parameter=code>\nx = [1, 2, 3]\nprint(\"sum\", sum(x))\n</parameter>\n</function>\n</tool_call>"},"finish_reason":"stop"}]}`,
		format:   FormatQwenXML,
		wantName: "run_python", wantArgs: `{"code":"x = [1, 2, 3]\nprint(\"sum\", sum(x))"}`,
	},
	{
		name: "bare qwen xml",
		stream: `data: {"choices":[{"index":0,"delta":{"content":"Computing.\n<function=run_python>\n<parameter=code>\nprint(7)\n</parameter>\n</function>"},"finish_reason":"stop"}]}

data: [DONE]

`,
		whole:    `{"choices":[{"index":0,"message":{"content":"Computing.\n<function=run_python>\n<parameter=code>\nprint(7)\n</parameter>\n</function>"},"finish_reason":"stop"}]}`,
		format:   FormatQwenXML,
		wantName: "run_python", wantArgs: `{"code":"print(7)"}`, rest: "Computing.",
	},
	{
		name:   "fenced python from a model that never calls the tool",
		fenced: true,
		stream: `data: {"choices":[{"index":0,"delta":{"role":"assistant","content":"Let me calculate.\n` + "``" + `"},"finish_reason":null}]}

data: {"choices":[{"index":0,"delta":{"content":"` + "`" + `python\nprint(1234 * 5678)\n"},"finish_reason":null}]}

data: {"choices":[{"index":0,"delta":{"content":"` + "```" + `"},"finish_reason":"stop"}]}

data: [DONE]

`,
		whole:    `{"choices":[{"index":0,"message":{"role":"assistant","content":"Let me calculate.\n` + "```python" + `\nprint(1234 * 5678)\n` + "```" + `"},"finish_reason":"stop"}]}`,
		format:   FormatPython,
		wantName: "run_python", wantArgs: `{"code":"print(1234 * 5678)"}`, rest: "Let me calculate.",
	},
}

func TestTextToolCalls(t *testing.T) {
	for _, tt := range dialectCases {
		for _, mode := range []string{"stream", "whole"} {
			t.Run(tt.name+"/"+mode, func(t *testing.T) {
				h := sse(tt.stream)
				if mode == "whole" {
					h = jsonBody(http.StatusOK, tt.whole)
				}
				srv := newServer(t, h)
				c, _ := newTestClient(srv.URL, Config{Stream: mode == "stream"})
				var deltas []Delta
				got, err := c.Complete(context.Background(), Request{
					Model: "m", Tools: []Tool{runPython}, CodeTool: "run_python", FencedCode: tt.fenced,
				}, collect(&deltas))
				if err != nil {
					t.Fatal(err)
				}
				if len(got.ToolCalls) != 1 {
					t.Fatalf("tool calls = %+v, want one recovered from %q", got.ToolCalls, got.Written)
				}
				call := got.ToolCalls[0]
				if call.Name != tt.wantName || call.Arguments != tt.wantArgs {
					t.Errorf("call = %s %s, want %s %s", call.Name, call.Arguments, tt.wantName, tt.wantArgs)
				}
				if !synthPattern.MatchString(call.ID) {
					t.Errorf("id %q is not a synthesized id", call.ID)
				}
				if got.Content != tt.rest {
					t.Errorf("content = %q, want %q: the call's text must be removed", got.Content, tt.rest)
				}
				if got.CallFormat != tt.format || got.FinishReason != "tool_calls" {
					t.Errorf("format %q finish %q, want %q tool_calls", got.CallFormat, got.FinishReason, tt.format)
				}
				if got.Written == "" || !strings.Contains(got.Written, "print(") {
					t.Errorf("Written = %q, want the reply as written", got.Written)
				}
				var shown strings.Builder
				for _, d := range deltas {
					if d.Kind == DeltaContent {
						shown.WriteString(d.Text)
					}
				}
				if strings.TrimSpace(shown.String()) != tt.rest {
					t.Errorf("streamed content = %q, want only %q: call markup is no answer", shown.String(), tt.rest)
				}
			})
		}
	}
}

// Text that only looks like a call stays the answer, and is still streamed.
func TestTextThatIsNoCall(t *testing.T) {
	tests := []struct {
		name, content string
		req           Request
	}{
		{"python block when the model calls tools natively", "Use this:\n```python\nprint(1)\n```",
			Request{Tools: []Tool{runPython}, CodeTool: "run_python"}},
		{"json that names no tool", "```json\n{\"name\": \"Ada\", \"arguments\": {\"age\": 36}}\n```",
			Request{Tools: []Tool{runPython}}},
		{"bare json data", `{"name": "Ada", "age": 36}`, Request{Tools: []Tool{runPython}}},
		{"native dialect", `<tool_call>{"name": "run_python", "arguments": {"code": "1"}}</tool_call>`,
			Request{Tools: []Tool{runPython}, Dialect: DialectNative}},
		{"no tools offered", `<tool_call>{"name": "run_python", "arguments": {"code": "1"}}</tool_call>`, Request{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			body, _ := json.Marshal(map[string]any{"choices": []any{map[string]any{"index": 0,
				"delta": map[string]any{"content": tt.content}, "finish_reason": "stop"}}})
			srv := newServer(t, sse("data: "+string(body)+"\n\ndata: [DONE]\n\n"))
			c, _ := newTestClient(srv.URL, Config{Stream: true})
			var deltas []Delta
			tt.req.Model = "m"
			got, err := c.Complete(context.Background(), tt.req, collect(&deltas))
			if err != nil {
				t.Fatal(err)
			}
			if len(got.ToolCalls) != 0 || got.Content != tt.content || got.CallFormat != "" {
				t.Errorf("got %+v, want the content as the answer", got)
			}
			var shown string
			for _, d := range deltas {
				shown += d.Text
			}
			if shown != tt.content {
				t.Errorf("streamed %q, want %q", shown, tt.content)
			}
		})
	}
}

// The server's own tool calls win over text that looks like one.
func TestNativeCallPreferred(t *testing.T) {
	srv := newServer(t, sse(`data: {"choices":[{"index":0,"delta":{"content":"<tool_call>{\"name\": \"run_python\", \"arguments\": {\"code\": \"text\"}}</tool_call>","tool_calls":[{"index":0,"id":"call_native1","type":"function","function":{"name":"run_python","arguments":"{\"code\": \"native\"}"}}]},"finish_reason":"tool_calls"}]}

data: [DONE]

`))
	c, _ := newTestClient(srv.URL, Config{Stream: true})
	got, err := c.Complete(context.Background(), Request{Model: "m", Tools: []Tool{runPython}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(got.ToolCalls) != 1 || got.ToolCalls[0].ID != "call_native1" || got.CallFormat != "" {
		t.Errorf("calls = %+v (format %q), want only the native call", got.ToolCalls, got.CallFormat)
	}
}

func TestRecoverMoreForms(t *testing.T) {
	rec := &recovery{offer: offer{tools: map[string]bool{"run_python": true}, codeTool: "run_python"}}
	tests := []struct {
		name, content, format string
		calls                 []ToolCall
	}{
		{"two hermes calls", "<tool_call>{\"name\":\"run_python\",\"arguments\":{\"code\":\"1\"}}</tool_call>\n<tool_call>{\"name\":\"run_python\",\"arguments\":{\"code\":\"2\"}}</tool_call>",
			FormatHermes, []ToolCall{{Name: "run_python", Arguments: `{"code":"1"}`}, {Name: "run_python", Arguments: `{"code":"2"}`}}},
		{"hermes without closing tag", "<tool_call>\n{\"name\": \"run_python\", \"arguments\": {\"code\": \"1\"}}",
			FormatHermes, []ToolCall{{Name: "run_python", Arguments: `{"code":"1"}`}}},
		{"hermes arguments as a string", `<tool_call>{"name": "run_python", "arguments": "{\"code\": \"1\"}"}</tool_call>`,
			FormatHermes, []ToolCall{{Name: "run_python", Arguments: `{"code": "1"}`}}},
		{"hermes with broken json is still a call", `<tool_call>{"name": "run_python", "arguments": {"code": "print("hi")"}}</tool_call>`,
			FormatHermes, []ToolCall{{Name: "run_python", Arguments: `{"code": "print("hi")"}`}}},
		{"openai shape in a fence", "```json\n{\"type\": \"function\", \"function\": {\"name\": \"run_python\", \"arguments\": {\"code\": \"1\"}}}\n```",
			FormatJSON, []ToolCall{{Name: "run_python", Arguments: `{"code":"1"}`}}},
		{"bare json call", `{"name": "run_python", "parameters": {"code": "1"}}`,
			FormatJSON, []ToolCall{{Name: "run_python", Arguments: `{"code":"1"}`}}},
		{"hermes under harmony's namespace", `<tool_call>{"name": "functions.run_python", "arguments": {"code": "1"}}</tool_call>`,
			FormatHermes, []ToolCall{{Name: "run_python", Arguments: `{"code":"1"}`}}},
		{"hermes calling gpt-oss's python", `<tool_call>{"name": "python", "arguments": {"code": "1"}}</tool_call>`,
			FormatHermes, []ToolCall{{Name: "run_python", Arguments: `{"code":"1"}`}}},
		{"llama 3.1 python tag with code", "<|python_tag|>print(6*7)<|eom_id|>",
			FormatLlama, []ToolCall{{Name: "run_python", Arguments: `{"code":"print(6*7)"}`}}},
		{"llama calls separated by semicolons", `<|python_tag|>{"name": "run_python", "parameters": {"code": "1"}}; {"name": "run_python", "parameters": {"code": "2"}}`,
			FormatLlama, []ToolCall{{Name: "run_python", Arguments: `{"code":"1"}`}, {Name: "run_python", Arguments: `{"code":"2"}`}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, calls, format := rec.parse(tt.content)
			if format != tt.format || len(calls) != len(tt.calls) {
				t.Fatalf("parse = %+v %q, want %+v %q", calls, format, tt.calls, tt.format)
			}
			for i := range calls {
				if calls[i] != tt.calls[i] {
					t.Errorf("call %d = %+v, want %+v", i, calls[i], tt.calls[i])
				}
			}
		})
	}
	// Code split over several blocks runs as one call.
	fenced := &recovery{offer: rec.offer, fenced: true}
	rest, calls, _ := fenced.parse("First:\n```python\nx = 2\n```\nthen:\n```py\nprint(x)\n```\nDone.")
	if len(calls) != 1 || calls[0].Arguments != `{"code":"x = 2\n\nprint(x)"}` || rest != "First:\n\nthen:\n\nDone." {
		t.Errorf("parse = %q %+v", rest, calls)
	}
}

// In text mode no tools are sent, and the history is plain text a template
// without tool support renders: the calls as the model would write them,
// their results as user messages.
func TestTextFormHistory(t *testing.T) {
	var got sentRequest
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		_ = json.Unmarshal(b, &got)
		jsonBody(http.StatusOK, `{"choices":[{"index":0,"message":{"content":"done"},"finish_reason":"stop"}]}`)(w, r)
	})
	c, _ := newTestClient(srv.URL, Config{})
	history := []Message{
		{Role: RoleSystem, Content: "sys"},
		{Role: RoleUser, Content: "q"},
		{Role: RoleAssistant, Content: "Computing.", ToolCalls: []ToolCall{{ID: "call_1", Name: "run_python", Arguments: `{"code":"print(1)"}`}}},
		{Role: RoleTool, ToolCallID: "call_1", Content: `{"exit_code":0,"stdout":"1\n"}`},
		{Role: RoleAssistant, Written: "<tool_call>{\"name\":\"run_python\",\"arguments\":{\"code\":\"print(2)\"}}</tool_call>",
			ToolCalls: []ToolCall{{ID: "call_2", Name: "run_python", Arguments: `{"code":"print(2)"}`}}},
		{Role: RoleTool, ToolCallID: "call_2", Content: `{"exit_code":0,"stdout":"2\n"}`},
	}
	for _, tt := range []struct {
		dialect Dialect
		roles   string
		tools   int
	}{
		{DialectText, "system user assistant user assistant user", 0},
		{DialectAuto, "system user assistant tool assistant user", 1},
	} {
		t.Run(string(tt.dialect), func(t *testing.T) {
			if _, err := c.Complete(context.Background(), Request{Model: "m", Messages: history, Tools: []Tool{runPython}, Dialect: tt.dialect}, nil); err != nil {
				t.Fatal(err)
			}
			var roles []string
			for _, m := range got.Messages {
				roles = append(roles, m.Role)
			}
			if strings.Join(roles, " ") != tt.roles || len(got.Tools) != tt.tools {
				t.Fatalf("roles %v with %d tools, want %s with %d", roles, len(got.Tools), tt.roles, tt.tools)
			}
			last := got.Messages[len(got.Messages)-1]
			if *last.Content != "Output of run_python:\n{\"exit_code\":0,\"stdout\":\"2\\n\"}" {
				t.Errorf("result as text = %q", *last.Content)
			}
			if written := *got.Messages[4].Content; !strings.HasPrefix(written, "<tool_call>") || len(got.Messages[4].ToolCalls) != 0 {
				t.Errorf("the recovered call goes back as written, got %q %+v", written, got.Messages[4].ToolCalls)
			}
			if tt.dialect == DialectText && *got.Messages[2].Content != "Computing.\n\n```python\nprint(1)\n```" {
				t.Errorf("a native call in text mode = %q, want it written as a python block", *got.Messages[2].Content)
			}
		})
	}
}
