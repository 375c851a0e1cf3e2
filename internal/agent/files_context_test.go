package agent

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/terpdev/terp/internal/llm"
)

// When the context fills, the names of files an old step saved go before
// its output does: the model can list files again with code, but not see
// the output again.
func TestFileNamesAreCutBeforeOutput(t *testing.T) {
	var names []string
	for i := range 50 {
		names = append(names, fmt.Sprintf("partition_of_the_data_%04d.parquet", i))
	}
	stdout := strings.Repeat("a line of the old output, worth keeping\n", 40)
	old := mustJSON(toolResult{Stdout: stdout, Files: names})
	a := New(nil, nil, nil, Config{Model: "m"})
	a.history = []llm.Message{
		{Role: llm.RoleSystem, Content: "system"},
		{Role: llm.RoleUser, Content: "split the data"},
		{Role: llm.RoleAssistant, ToolCalls: []llm.ToolCall{{ID: "a", Name: ToolName, Arguments: `{"code":"split()"}`}}},
		{Role: llm.RoleTool, ToolCallID: "a", Content: old},
		{Role: llm.RoleAssistant, ToolCalls: []llm.ToolCall{{ID: "b", Name: ToolName, Arguments: `{"code":"print(1)"}`}}},
		{Role: llm.RoleTool, ToolCallID: "b", Content: mustJSON(toolResult{Stdout: "1\n"})},
	}
	_, before := a.size()
	removed := a.shrink(before - 200)
	if _, after := a.size(); removed == 0 || after > before-200 {
		t.Fatalf("shrink removed %d characters, %d tokens left of %d; want it under %d", removed, after, before, before-200)
	}
	var res toolResult
	if err := json.Unmarshal([]byte(a.history[3].Content), &res); err != nil {
		t.Fatalf("the shortened output is not a tool result: %v\n%s", err, a.history[3].Content)
	}
	if res.Stdout != stdout {
		t.Errorf("the old output was cut while its 50 file names could go first:\n%s", res.Stdout)
	}
	if len(res.Files) > 5 || !strings.Contains(res.FilesNote, "50 files") {
		t.Errorf("files = %d names, note %q; want a few names and the count of all", len(res.Files), res.FilesNote)
	}
}
