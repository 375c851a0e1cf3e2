package llm

import (
	"bufio"
	"bytes"
	"fmt"
	"testing"
)

// benchStream is a 200-chunk reply as vLLM streams it: reasoning, an answer,
// then a tool call whose arguments arrive in pieces, finish and usage.
func benchStream() []byte {
	var b bytes.Buffer
	b.WriteString("data: {\"id\":\"chatcmpl-1\",\"object\":\"chat.completion.chunk\",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"\"},\"finish_reason\":null}],\"usage\":null}\n\n")
	for i := range 60 {
		fmt.Fprintf(&b, "data: {\"id\":\"chatcmpl-1\",\"object\":\"chat.completion.chunk\",\"choices\":[{\"index\":0,\"delta\":{\"reasoning_content\":\"step %d of the plan \"},\"finish_reason\":null}],\"usage\":null}\n\n", i)
	}
	for i := range 77 {
		fmt.Fprintf(&b, "data: {\"id\":\"chatcmpl-1\",\"object\":\"chat.completion.chunk\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"word%d \"},\"finish_reason\":null}],\"usage\":null}\n\n", i)
	}
	b.WriteString("data: {\"id\":\"chatcmpl-1\",\"object\":\"chat.completion.chunk\",\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"id\":\"chatcmpl-tool-1\",\"type\":\"function\",\"function\":{\"name\":\"run_python\",\"arguments\":\"{\\\"code\\\": \\\"\"}}]},\"finish_reason\":null}],\"usage\":null}\n\n")
	for i := range 58 {
		fmt.Fprintf(&b, "data: {\"id\":\"chatcmpl-1\",\"object\":\"chat.completion.chunk\",\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"function\":{\"arguments\":\"x%d = %d\\\\n\"}}]},\"finish_reason\":null}],\"usage\":null}\n\n", i, i)
	}
	b.WriteString("data: {\"id\":\"chatcmpl-1\",\"object\":\"chat.completion.chunk\",\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"function\":{\"arguments\":\"\\\"}\"}}]},\"finish_reason\":null}],\"usage\":null}\n\n")
	b.WriteString("data: {\"id\":\"chatcmpl-1\",\"object\":\"chat.completion.chunk\",\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"tool_calls\"}],\"usage\":null}\n\n")
	b.WriteString("data: {\"id\":\"chatcmpl-1\",\"object\":\"chat.completion.chunk\",\"choices\":[],\"usage\":{\"prompt_tokens\":900,\"completion_tokens\":200,\"total_tokens\":1100}}\n\n")
	b.WriteString("data: [DONE]\n\n")
	return b.Bytes()
}

func BenchmarkReadStream(b *testing.B) {
	wire := benchStream()
	if n := bytes.Count(wire, []byte("data: {")); n != 200 {
		b.Fatalf("stream has %d chunks, want 200", n)
	}
	deltas := 0
	onDelta := func(Delta) { deltas++ }
	b.SetBytes(int64(len(wire)))
	b.ReportAllocs()
	for b.Loop() {
		r, err := readReply(bufio.NewReader(bytes.NewReader(wire)), onDelta, Request{})
		if err != nil {
			b.Fatal(err)
		}
		if len(r.ToolCalls) != 1 || r.Usage.TotalTokens != 1100 {
			b.Fatalf("unexpected reply: %+v", r)
		}
	}
}

// BenchmarkReadStreamRepeatedName is the same reply from a server that
// repeats the id and the whole name on every tool-call delta (MiniMax on
// NIM, Fireworks): telling a repeat from a new call must not cost a decode
// of the arguments so far on every delta.
func BenchmarkReadStreamRepeatedName(b *testing.B) {
	wire := bytes.ReplaceAll(benchStream(), []byte(`{"index":0,"function":{"arguments"`),
		[]byte(`{"index":0,"id":"chatcmpl-tool-1","type":"function","function":{"name":"run_python","arguments"`))
	b.SetBytes(int64(len(wire)))
	b.ReportAllocs()
	for b.Loop() {
		r, err := readReply(bufio.NewReader(bytes.NewReader(wire)), nil, Request{})
		if err != nil {
			b.Fatal(err)
		}
		if len(r.ToolCalls) != 1 || r.ToolCalls[0].Name != "run_python" {
			b.Fatalf("unexpected reply: %+v", r.ToolCalls)
		}
	}
}
