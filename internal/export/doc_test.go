package export

import (
	"errors"
	"strings"
	"testing"

	"github.com/terpdev/terp/internal/llm"
	"github.com/terpdev/terp/internal/store"
)

// sample is a stored conversation of two turns: one with two runs (the
// second saving a chart and a CSV) and an answer, one with a failing run
// and an answer.
func sample() *store.Conversation {
	call := func(id, code string) llm.ToolCall {
		return llm.ToolCall{ID: id, Name: "run_python", Arguments: `{"code": ` + quote(code) + `}`}
	}
	return &store.Conversation{
		ID: "c0ffee", Title: "sales by month", Settings: store.Settings{Model: "qwen3-32b", ExecMode: "kernel"},
		Inputs: []store.File{{Name: "sales.csv", Path: "/home/u/sales.csv", Bytes: 10}},
		Messages: []llm.Message{
			{Role: llm.RoleSystem, Content: "You are terp."},
			{Role: llm.RoleUser, Content: "(New files uploaded: /work/sales.csv)\nWhich month sold most?"},
			{Role: llm.RoleAssistant, Content: "Let me look.", ToolCalls: []llm.ToolCall{call("a", "import pandas as pd\ndf = pd.read_csv('sales.csv')\ndf.head()")}},
			{Role: llm.RoleTool, ToolCallID: "a", Content: `{"exit_code":0,"stdout":"   month  revenue\n0  2025-01  100\n","stderr":""}`},
			{Role: llm.RoleAssistant, ToolCalls: []llm.ToolCall{call("b", "df.plot()\nplt.savefig('chart.png')\ndf.to_csv('out.csv')")}},
			{Role: llm.RoleTool, ToolCallID: "b", Content: `{"exit_code":0,"stdout":"","stderr":"","files":["/work/chart.png","/work/out.csv"]}`},
			{Role: llm.RoleAssistant, Content: "December sold most."},
			{Role: llm.RoleUser, Content: "And the least?"},
			{Role: llm.RoleAssistant, ToolCalls: []llm.ToolCall{call("c", "1/0")}},
			{Role: llm.RoleTool, ToolCallID: "c", Content: `{"exit_code":1,"stdout":"","stderr":"Traceback (most recent call last):\n  File \"<cell 3>\", line 1, in <module>\nZeroDivisionError: division by zero\n"}`},
			{Role: llm.RoleAssistant, Content: "February."},
		},
	}
}

func quote(s string) string {
	r := strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`)
	return `"` + r.Replace(s) + `"`
}

func TestBuild(t *testing.T) {
	var asked []string
	d := Build(sample(), func(name string, limit int64) ([]byte, error) {
		asked = append(asked, name)
		if name == "chart.png" {
			return []byte("\x89PNG"), nil
		}
		return nil, errors.New("gone")
	})
	if d.ID != "c0ffee" || d.Model != "qwen3-32b" || d.ExecMode != "kernel" || strings.Join(d.Inputs, ",") != "sales.csv" {
		t.Errorf("doc = %+v", d)
	}
	if len(d.Turns) != 2 {
		t.Fatalf("%d turns, want 2: %+v", len(d.Turns), d.Turns)
	}
	one, two := d.Turns[0], d.Turns[1]
	if one.Question != "Which month sold most?" || strings.Join(one.Notes, "|") != "New files uploaded: /work/sales.csv" ||
		one.Answer != "December sold most." || len(one.Steps) != 2 {
		t.Errorf("turn 1 = %+v", one)
	}
	if s := one.Steps[0]; s.Said != "Let me look." || !strings.HasSuffix(s.Code, "df.head()") || !strings.Contains(s.Stdout, "2025-01") {
		t.Errorf("step 1 = %+v", s)
	}
	if s := one.Steps[1]; strings.Join(s.Saved, ",") != "chart.png,out.csv" || len(s.Images) != 1 || string(s.Images[0].Data) != "\x89PNG" || s.Images[0].Type != "image/png" {
		t.Errorf("step 2 = %+v", s)
	}
	if s := two.Steps[0]; two.Question != "And the least?" || s.ExitCode != 1 || !strings.Contains(s.Stderr, "ZeroDivisionError") || two.Answer != "February." {
		t.Errorf("turn 2 = %+v", two)
	}
	if strings.Join(d.Saved, ",") != "chart.png,out.csv" || strings.Join(asked, ",") != "chart.png" {
		t.Errorf("saved %v, read %v; want both saved and only the chart read", d.Saved, asked)
	}
	d = Build(sample(), func(string, int64) ([]byte, error) { return nil, errors.New("the sandbox is gone") })
	if len(d.Warnings) != 1 || !strings.Contains(d.Warnings[0], "/work/chart.png") || len(d.Turns[0].Steps[1].Images) != 0 {
		t.Errorf("warnings %v, want one naming the chart it could not read", d.Warnings)
	}
}

// A run's value (its last expression's repr, which the model read at the
// end of stdout) is told apart from what it printed.
func TestBuildValue(t *testing.T) {
	c := sample()
	c.Messages[3].Content = `{"exit_code":0,"stdout":"loaded\n   month  revenue\n0  2025-01  100\n","stderr":""}`
	c.Values = map[string]string{"a": "   month  revenue\n0  2025-01  100", "b": "not what it printed"}
	d := Build(c, nil)
	one, two := d.Turns[0].Steps[0], d.Turns[0].Steps[1]
	if one.Stdout != "loaded\n" || one.Value != "   month  revenue\n0  2025-01  100" || one.Printed() != "loaded\n   month  revenue\n0  2025-01  100\n" {
		t.Errorf("step 1: stdout %q, value %q", one.Stdout, one.Value)
	}
	if two.Value != "" {
		t.Errorf("step 2 printed no such value, yet has %q", two.Value)
	}
	var nb strings.Builder
	if err := WriteNotebook(&nb, d); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(nb.String(), `"output_type": "execute_result"`) || !strings.Contains(nb.String(), `"execution_count": 1`) {
		t.Errorf("the notebook has no execute_result for the value:\n%s", nb.String())
	}
}
