package llm

import (
	"context"
	"encoding/json"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"
)

// chunks makes an SSE stream of the given delta objects, then a finish.
func chunks(deltas ...string) string {
	var b strings.Builder
	for _, d := range deltas {
		b.WriteString(`data: {"choices":[{"index":0,"delta":` + d + `,"finish_reason":null}]}` + "\n\n")
	}
	b.WriteString(`data: {"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}` + "\n\ndata: [DONE]\n\n")
	return b.String()
}

// A streamed character cut between chunks reaches the display whole: no
// Delta carries half of it, as raw UTF-8 bytes or as one half of a UTF-16
// surrogate pair, whether it is content or reasoning.
func TestDeltasNeverCarryHalfACharacter(t *testing.T) {
	e, smile := "é", "😀"
	wire := chunks(
		`{"reasoning_content":"Thinking `+smile[:1]+`"}`,
		`{"reasoning_content":"`+smile[1:]+` hard"}`,
		`{"content":"Caf`+e[:1]+`"}`,
		`{"content":"`+e[1:]+` \ud83d"}`,
		`{"content":"\ude00"}`,
		`{"content":" and \\ud83d"}`,
		`{"content":" is text"}`,
	)
	srv := newServer(t, sse(wire))
	c, _ := newTestClient(srv.URL, Config{Stream: true})
	var deltas []Delta
	got, err := c.Complete(context.Background(), Request{Model: "m"}, collect(&deltas))
	if err != nil {
		t.Fatal(err)
	}
	var content, reasoning strings.Builder
	for _, d := range deltas {
		if !utf8.ValidString(d.Text) || strings.ContainsRune(d.Text, utf8.RuneError) {
			t.Errorf("delta %q carries part of a character", d.Text)
		}
		if d.Kind == DeltaContent {
			content.WriteString(d.Text)
		} else {
			reasoning.WriteString(d.Text)
		}
	}
	wantContent, wantReasoning := `Café 😀 and \ud83d is text`, "Thinking 😀 hard"
	if content.String() != wantContent || got.Content != wantContent {
		t.Errorf("content: deltas %q, response %q, want %q", content.String(), got.Content, wantContent)
	}
	if reasoning.String() != wantReasoning || got.Reasoning != wantReasoning {
		t.Errorf("reasoning: deltas %q, response %q, want %q", reasoning.String(), got.Reasoning, wantReasoning)
	}
}

// Half a character at the very end of a broken reply is not lost silently
// nor held forever: it comes out as U+FFFD when the reply ends.
func TestHalfACharacterAtTheEnd(t *testing.T) {
	srv := newServer(t, sse(chunks(`{"content":"ok `+"😀"[:2]+`"}`)))
	c, _ := newTestClient(srv.URL, Config{Stream: true})
	var deltas []Delta
	got, err := c.Complete(context.Background(), Request{Model: "m"}, collect(&deltas))
	if err != nil {
		t.Fatal(err)
	}
	if got.Content == "ok " || strings.TrimRight(got.Content, "\uFFFD") != "ok " {
		t.Errorf("content = %q, want the broken character as U+FFFD", got.Content)
	}
}

// Shapes at the edges of the merging rules, which no recorded reply covers.
func TestToolCallMergeEdges(t *testing.T) {
	tests := []struct {
		name string
		wire string
		want []ToolCall
	}{
		{
			name: "a name restated as it grows is not doubled",
			wire: chunks(
				`{"tool_calls":[{"index":0,"id":"c1","function":{"name":"run_"}}]}`,
				`{"tool_calls":[{"index":0,"function":{"name":"run_python"}}]}`,
				`{"tool_calls":[{"index":0,"function":{"arguments":"{\"code\":\"1\"}"}}]}`),
			want: []ToolCall{{ID: "c1", Name: "run_python", Arguments: `{"code":"1"}`}},
		},
		{
			name: "index 0 and no id for two calls of one function: different arguments are two calls",
			wire: chunks(
				`{"tool_calls":[{"index":0,"function":{"name":"run_python","arguments":"{\"code\":\"1\"}"}}]}`,
				`{"tool_calls":[{"index":0,"function":{"name":"run_python","arguments":"{\"code\":\"2\"}"}}]}`),
			want: []ToolCall{{ID: synthID, Name: "run_python", Arguments: `{"code":"1"}`}, {ID: synthID, Name: "run_python", Arguments: `{"code":"2"}`}},
		},
		{
			name: "a restatement spaced differently is still a restatement",
			wire: chunks(
				`{"tool_calls":[{"index":0,"id":"c1","function":{"name":"run_python","arguments":"{\"code\": \"caf\\u00e9\"}"}}]}`,
				`{"tool_calls":[{"index":0,"function":{"name":"run_python","arguments":"{ \"code\":\"café\" }"}}]}`),
			want: []ToolCall{{ID: "c1", Name: "run_python", Arguments: `{"code": "caf\u00e9"}`}},
		},
		{
			name: "a nested object after the arguments began is appended, not taken for a restatement",
			wire: chunks(
				`{"tool_calls":[{"index":0,"id":"c1","function":{"name":"f","arguments":"{\"a\":"}}]}`,
				`{"tool_calls":[{"index":0,"function":{"arguments":"{\"b\":1}"}}]}`,
				`{"tool_calls":[{"index":0,"function":{"arguments":"}"}}]}`),
			want: []ToolCall{{ID: "c1", Name: "f", Arguments: `{"a":{"b":1}}`}},
		},
		{
			name: "a name after the arguments began does not extend the name",
			wire: chunks(
				`{"tool_calls":[{"index":0,"id":"c1","function":{"name":"run_python","arguments":"{\"code\":"}}]}`,
				`{"tool_calls":[{"index":0,"id":"c1","function":{"name":"python","arguments":"\"1\"}"}}]}`),
			want: []ToolCall{{ID: "c1", Name: "run_python", Arguments: `{"code":"1"}`}},
		},
		{
			name: "a streamed function_call is one call",
			wire: chunks(
				`{"function_call":{"name":"run_python","arguments":""}}`,
				`{"function_call":{"name":"run_python","arguments":"{\"code\":"}}`,
				`{"function_call":{"arguments":"\"1\"}"}}`),
			want: []ToolCall{{ID: synthID, Name: "run_python", Arguments: `{"code":"1"}`}},
		},
		{
			name: "a function_call beside a tool call with other arguments is a call of its own",
			wire: chunks(
				`{"tool_calls":[{"index":0,"id":"c1","function":{"name":"run_python","arguments":"{\"code\":\"1\"}"}}],"function_call":{"name":"run_python","arguments":"{\"code\":\"2\"}"}}`),
			want: []ToolCall{{ID: "c1", Name: "run_python", Arguments: `{"code":"1"}`}, {ID: synthID, Name: "run_python", Arguments: `{"code":"2"}`}},
		},
		{
			name: "a function_call that repeats a tool call, spaced differently, is dropped",
			wire: chunks(
				`{"tool_calls":[{"index":0,"id":"c1","function":{"name":"functions.run_python","arguments":"{\"code\":\"1\"}"}}],"function_call":{"name":"run_python","arguments":"{ \"code\": \"1\" }"}}`),
			want: []ToolCall{{ID: "c1", Name: "run_python", Arguments: `{"code":"1"}`}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := newServer(t, sse(tt.wire))
			c, _ := newTestClient(srv.URL, Config{Stream: true})
			got, err := c.Complete(context.Background(), Request{Model: "m", Tools: []Tool{runPythonTool}, Dialect: DialectNative}, nil)
			if err != nil {
				t.Fatal(err)
			}
			checkResponse(t, got, Response{ToolCalls: tt.want, FinishReason: "stop"})
		})
	}
}

// A call the server sends as a tool call and also passes on as <tool_call>
// text is not shown as text: the deltas hold the words around it, not the
// markup.
func TestEchoedCallIsNotShown(t *testing.T) {
	wire := chunks(
		`{"content":"Let me compute it.\n"}`,
		`{"content":"<tool_call>\n{\"name\": \"run_python\", "}`,
		`{"content":"\"arguments\": {\"code\": \"print(6*7)\"}}\n</tool_call>\nBack soon."}`,
		`{"tool_calls":[{"index":0,"id":"t1","type":"function","function":{"name":"run_python","arguments":"{\"code\": \"print(6*7)\"}"}}]}`)
	srv := newServer(t, sse(wire))
	c, _ := newTestClient(srv.URL, Config{Stream: true})
	var deltas []Delta
	got, err := c.Complete(context.Background(), Request{Model: "m", Tools: []Tool{runPythonTool}}, collect(&deltas))
	if err != nil {
		t.Fatal(err)
	}
	var shown strings.Builder
	for _, d := range deltas {
		shown.WriteString(d.Text)
	}
	if strings.Contains(shown.String(), "<tool_call>") || !strings.Contains(shown.String(), "Back soon.") {
		t.Errorf("shown %q, want the text without the call markup", shown.String())
	}
	if got.Content != "Let me compute it.\n\nBack soon." || len(got.ToolCalls) != 1 {
		t.Errorf("response = %+v, want the text and one call", got)
	}
}

// A model that shows its code in a ```python block and also calls the tool
// with it keeps the block in its answer: that is prose, not call markup.
func TestShownCodeIsNotAnEcho(t *testing.T) {
	content := "I will run:\n```python\nprint(1)\n```"
	r := Response{Content: content, ToolCalls: []ToolCall{{ID: "c", Name: "run_python", Arguments: `{"code":"print(1)"}`}}}
	rec := newRecovery(Request{Tools: []Tool{runPythonTool}, CodeTool: "run_python", FencedCode: true})
	rec.apply(&r)
	if r.Content != content {
		t.Errorf("content = %q, want the code block kept", r.Content)
	}
}

// Every recorded stream with tool calls reports their arguments as they
// arrive: the pieces of each call, joined in order, are its arguments, once
// (a restated call is not shown again), under the id and name the Response
// gives the call.
func TestStreamArgumentDeltas(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "replies", "*.sse"))
	if err != nil {
		t.Fatal(err)
	}
	for _, path := range files {
		body, how := recordedBody(t, path)
		if how.status != 0 || how.cut {
			continue
		}
		t.Run(filepath.Base(path), func(t *testing.T) {
			srv := newServer(t, sse(string(body)))
			c, _ := newTestClient(srv.URL, Config{Stream: true, MaxRetries: -1})
			var deltas []Delta
			req := Request{Model: "m", Messages: []Message{{Role: RoleUser, Content: "q"}}, Tools: []Tool{runPythonTool}, CodeTool: "run_python"}
			r, err := c.Complete(context.Background(), req, collect(&deltas))
			if err != nil {
				t.Skipf("not a reply: %v", err)
			}
			if r.CallFormat != "" {
				return // calls written as text: their markup streams as content
			}
			args := make([]strings.Builder, len(r.ToolCalls))
			for _, d := range deltas {
				if d.Kind != DeltaArguments {
					continue
				}
				if d.Index >= len(r.ToolCalls) {
					t.Fatalf("a piece for call %d of %d", d.Index, len(r.ToolCalls))
				}
				call := r.ToolCalls[d.Index]
				if d.ID != call.ID || (d.Name != "" && d.Name != call.Name) {
					t.Errorf("a piece of call %d says id %q name %q, the call has %q %q", d.Index, d.ID, d.Name, call.ID, call.Name)
				}
				args[d.Index].WriteString(d.Text)
			}
			for i, call := range r.ToolCalls {
				got := args[i].String()
				if got != call.Arguments && unwrapArguments(got) != call.Arguments && (got != "" || call.Arguments != "{}") {
					t.Errorf("call %d: pieces joined = %q, arguments %q", i, got, call.Arguments)
				}
			}
		})
	}
}

// The pieces come in the order the server sent them, each as it arrives.
func TestStreamArgumentPieces(t *testing.T) {
	srv := newServer(t, sse(chunks(
		`{"tool_calls":[{"index":0,"function":{"name":"run_python","arguments":""}}]}`,
		`{"tool_calls":[{"index":0,"function":{"arguments":"{\"code\": \"print("}}]}`,
		`{"tool_calls":[{"index":0,"function":{"arguments":"'\ud83d"}}]}`,
		`{"tool_calls":[{"index":0,"function":{"arguments":"\ude00')\"}"}}]}`,
		`{"tool_calls":[{"index":0,"id":"late_id","function":{"arguments":""}}]}`,
	)))
	c, _ := newTestClient(srv.URL, Config{Stream: true})
	var deltas []Delta
	r, err := c.Complete(context.Background(), Request{Model: "m"}, collect(&deltas))
	if err != nil {
		t.Fatal(err)
	}
	if len(r.ToolCalls) != 1 {
		t.Fatalf("calls = %+v, want one", r.ToolCalls)
	}
	id := r.ToolCalls[0].ID
	want := []Delta{
		{Kind: DeltaArguments, Text: `{"code": "print(`, ID: id, Name: "run_python"},
		{Kind: DeltaArguments, Text: `'`, ID: id, Name: "run_python"},
		{Kind: DeltaArguments, Text: `😀')"}`, ID: id, Name: "run_python"},
	}
	if !reflect.DeepEqual(deltas, want) {
		t.Errorf("deltas:\n got %+v\nwant %+v", deltas, want)
	}
}

// Names and arguments are put right against what the request offers, the
// same in a stream and in a whole reply, and a stream's argument pieces show
// the arguments as the Response gives them, under the name it gives them.
func TestCallsNormalizedAgainstTheOffer(t *testing.T) {
	pythonTool := Tool{Name: "python", Parameters: runPythonTool.Parameters}
	tests := []struct {
		name     string
		tools    []Tool
		codeTool string
		call     string   // the name the server sends
		args     []string // the pieces of the arguments, as decoded text
		want     ToolCall
	}{
		{"harmony's namespace is cut from an offered tool", nil, "", "functions.run_python",
			[]string{`{"code":`, `"1"}`}, ToolCall{Name: "run_python", Arguments: `{"code":"1"}`}},
		{"harmony's namespace stays on a tool not offered", nil, "", "functions.get_weather",
			[]string{`{}`}, ToolCall{Name: "functions.get_weather", Arguments: `{}`}},
		{"channel markup is cut from the name", nil, "", "run_python<|channel|>commentary",
			[]string{`{"code":"1"}`}, ToolCall{Name: "run_python", Arguments: `{"code":"1"}`}},
		{"gpt-oss's python is the code tool, its raw source the code", nil, "run_python", "python",
			[]string{"import math\n", "print(math.pi < 4 & True)"}, ToolCall{Name: "run_python", Arguments: `{"code":"import math\nprint(math.pi < 4 & True)"}`}},
		{"and so is functions.python", nil, "run_python", "functions.python",
			[]string{"\n", "print('é')\n"}, ToolCall{Name: "run_python", Arguments: `{"code":"\nprint('é')\n"}`}},
		{"a tool named python is that tool", []Tool{runPythonTool, pythonTool}, "run_python", "python",
			[]string{`{"code":"1"}`}, ToolCall{Name: "python", Arguments: `{"code":"1"}`}},
		{"without a code tool, python stays python", nil, "", "python",
			[]string{"print(1)"}, ToolCall{Name: "python", Arguments: "print(1)"}},
		{"the code tool's raw source", nil, "run_python", "run_python",
			[]string{"x = [1, 2]\n", "print(x)"}, ToolCall{Name: "run_python", Arguments: `{"code":"x = [1, 2]\nprint(x)"}`}},
		{"broken JSON is left for the caller to report", nil, "run_python", "run_python",
			[]string{`{"code": "print(`, `1)`}, ToolCall{Name: "run_python", Arguments: `{"code": "print(1)`}},
		{"a string with raw newlines is broken JSON too", nil, "run_python", "run_python",
			[]string{`"import os`, "\nprint(1)\""}, ToolCall{Name: "run_python", Arguments: "\"import os\nprint(1)\""}},
		{"code as a JSON string is left for the caller to take", nil, "run_python", "run_python",
			[]string{`"print(1)"`}, ToolCall{Name: "run_python", Arguments: `"print(1)"`}},
	}
	for _, tt := range tests {
		tools := tt.tools
		if tools == nil {
			tools = []Tool{runPythonTool}
		}
		req := Request{Model: "m", Tools: tools, CodeTool: tt.codeTool, Dialect: DialectNative}
		want := Response{ToolCalls: []ToolCall{{ID: "c1", Name: tt.want.Name, Arguments: tt.want.Arguments}}, FinishReason: "tool_calls"}
		t.Run(tt.name+"/streamed", func(t *testing.T) {
			deltas := []string{`{"tool_calls":[{"index":0,"id":"c1","type":"function","function":{"name":` + quote(tt.call) + `,"arguments":""}}]}`}
			for _, p := range tt.args {
				deltas = append(deltas, `{"tool_calls":[{"index":0,"function":{"arguments":`+quote(p)+`}}]}`)
			}
			wire := strings.Replace(chunks(deltas...), `"finish_reason":"stop"`, `"finish_reason":"tool_calls"`, 1)
			srv := newServer(t, sse(wire))
			c, _ := newTestClient(srv.URL, Config{Stream: true})
			var got []Delta
			r, err := c.Complete(context.Background(), req, collect(&got))
			if err != nil {
				t.Fatal(err)
			}
			checkResponse(t, r, want)
			var shown strings.Builder
			for _, d := range got {
				if d.Name != tt.want.Name || d.ID != "c1" {
					t.Errorf("a piece comes as %q %q, want %q c1", d.Name, d.ID, tt.want.Name)
				}
				shown.WriteString(d.Text)
			}
			if shown.String() != tt.want.Arguments {
				t.Errorf("pieces joined = %q, want the arguments %q", shown.String(), tt.want.Arguments)
			}
		})
		t.Run(tt.name+"/whole", func(t *testing.T) {
			body := `{"choices":[{"index":0,"message":{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":` +
				quote(tt.call) + `,"arguments":` + quote(strings.Join(tt.args, "")) + `}}]},"finish_reason":"tool_calls"}]}`
			srv := newServer(t, jsonBody(200, body))
			c, _ := newTestClient(srv.URL, Config{})
			r, err := c.Complete(context.Background(), req, nil)
			if err != nil {
				t.Fatal(err)
			}
			checkResponse(t, r, want)
		})
	}
}

// quote returns s as a JSON string.
func quote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// A call whose id an earlier turn already used gets a new one, streamed and
// whole, so that the next request's tool messages answer one call each.
func TestIDOfAnEarlierTurnIsNotReused(t *testing.T) {
	history := []Message{
		{Role: RoleUser, Content: "q"},
		{Role: RoleAssistant, ToolCalls: []ToolCall{{ID: "0", Name: "run_python", Arguments: `{"code":"1"}`}}},
		{Role: RoleTool, ToolCallID: "0", Content: "1"},
	}
	req := Request{Model: "m", Messages: history, Tools: []Tool{runPythonTool}, Dialect: DialectNative}
	for _, stream := range []bool{true, false} {
		h := jsonBody(200, `{"choices":[{"message":{"tool_calls":[{"id":"0","type":"function","function":{"name":"run_python","arguments":"{\"code\":\"2\"}"}}]},"finish_reason":"tool_calls"}]}`)
		if stream {
			h = sse(chunks(`{"tool_calls":[{"index":0,"id":"0","type":"function","function":{"name":"run_python","arguments":"{\"code\":\"2\"}"}}]}`))
		}
		srv := newServer(t, h)
		c, _ := newTestClient(srv.URL, Config{Stream: stream})
		var deltas []Delta
		r, err := c.Complete(context.Background(), req, collect(&deltas))
		if err != nil {
			t.Fatal(err)
		}
		if len(r.ToolCalls) != 1 || !synthPattern.MatchString(r.ToolCalls[0].ID) {
			t.Errorf("stream %v: calls = %+v, want one with an id of its own", stream, r.ToolCalls)
		}
		for _, d := range deltas {
			if d.Kind == DeltaArguments && d.ID != r.ToolCalls[0].ID {
				t.Errorf("a piece of the call says id %q, the call has %q", d.ID, r.ToolCalls[0].ID)
			}
		}
	}
}
