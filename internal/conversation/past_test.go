package conversation

import (
	"reflect"
	"testing"

	"github.com/terpdev/terp/internal/agent"
	"github.com/terpdev/terp/internal/llm"
)

// pastExchanges pairs each question the user asked with the answer it got,
// without terp's own notes and nudges, and keeps the last ones.
func TestPastExchanges(t *testing.T) {
	msgs := []llm.Message{
		{Role: llm.RoleSystem, Content: "sys"},
		{Role: llm.RoleUser, Content: "(The user uploaded /work/a.csv.)\nfirst?"},
		{Role: llm.RoleAssistant, ToolCalls: []llm.ToolCall{{ID: "c", Name: "run_python", Arguments: "{}"}}},
		{Role: llm.RoleTool, ToolCallID: "c", Content: "{}"},
		{Role: llm.RoleAssistant, Content: "one"},
		{Role: llm.RoleUser, Content: "second?"},
		{Role: llm.RoleAssistant, Content: ""},
		{Role: llm.RoleUser, Content: agent.EmptyReplyNudge},
		{Role: llm.RoleAssistant, Content: "two"},
		{Role: llm.RoleUser, Content: "third?"},
	}
	got := pastExchanges(msgs, 2)
	want := []Exchange{{Question: "second?", Answer: "two"}, {Question: "third?"}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("pastExchanges = %+v, want %+v", got, want)
	}
	if all := pastExchanges(msgs, 10); len(all) != 3 || all[0] != (Exchange{Question: "first?", Answer: "one"}) {
		t.Errorf("pastExchanges(10) = %+v", all)
	}
}
