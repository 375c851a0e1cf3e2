package export

import (
	"bytes"
	"encoding/json"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/terpdev/terp/internal/llm"
	"github.com/terpdev/terp/internal/store"
	"github.com/terpdev/terp/internal/terptest"
)

const salesCSV = "month,revenue\n2025-01,100\n2025-02,200\n2025-03,300\n"

// ranConversation is a stored kernel-mode conversation whose runs really
// print what is recorded: run again by Jupyter, each must print the same.
// The code reads and writes /work paths, as terp's models do, and the
// fourth run fails, as recorded.
func ranConversation() *store.Conversation {
	call := func(id, code string) llm.ToolCall {
		return llm.ToolCall{ID: id, Name: "run_python", Arguments: `{"code": ` + quote(code) + `}`}
	}
	result := func(id string, code int, stdout, stderr string, files ...string) llm.Message {
		b, _ := json.Marshal(map[string]any{"exit_code": code, "stdout": stdout, "stderr": stderr, "files": files})
		return llm.Message{Role: llm.RoleTool, ToolCallID: id, Content: string(b)}
	}
	return &store.Conversation{
		ID: "feed01", Title: "revenue <by> month", Settings: store.Settings{Model: "qwen3-32b", ExecMode: "kernel"},
		Created: time.Date(2025, 4, 1, 9, 30, 0, 0, time.UTC),
		Inputs:  []store.File{{Name: "sales.csv", Bytes: int64(len(salesCSV))}},
		Messages: []llm.Message{
			{Role: llm.RoleSystem, Content: "You are terp."},
			{Role: llm.RoleUser, Content: "(New files uploaded: /work/sales.csv)\nWhat is the total revenue, and the best month? Chart it."},
			{Role: llm.RoleAssistant, Content: "I'll read the file & sum it.", ToolCalls: []llm.ToolCall{call("a",
				"import pandas as pd\ndf = pd.read_csv('/work/sales.csv')\nprint(df['revenue'].sum())")}},
			result("a", 0, "600\n", ""),
			{Role: llm.RoleAssistant, ToolCalls: []llm.ToolCall{call("b", "df.loc[df['revenue'].idxmax(), 'month']")}},
			result("b", 0, "'2025-03'\n", ""),
			{Role: llm.RoleAssistant, ToolCalls: []llm.ToolCall{call("c",
				"import matplotlib.pyplot as plt\nax = df.plot(x='month', y='revenue', title='Revenue by month')\nplt.savefig('/work/chart.png')\nprint('saved /work/chart.png')")}},
			result("c", 0, "saved /work/chart.png\n", "", "/work/chart.png"),
			{Role: llm.RoleAssistant, Content: "600 in all; March sold most. The chart is chart.png."},
			{Role: llm.RoleUser, Content: "And the profit? How big is the file?"},
			{Role: llm.RoleAssistant, ToolCalls: []llm.ToolCall{call("d", "df['profit'].sum()")}},
			result("d", 1, "", "Traceback (most recent call last):\n  File \"<cell 4>\", line 1, in <module>\n    df['profit'].sum()\nKeyError: 'profit'\n"),
			{Role: llm.RoleAssistant, Content: "There is no profit column.", ToolCalls: []llm.ToolCall{call("e",
				"import os\nprint(os.path.getsize(os.path.join('/work', 'sales.csv')))\ndf['revenue'].mean()")}},
			result("e", 0, fmt.Sprintf("%d\n200.0\n", len(salesCSV)), ""),
			{Role: llm.RoleAssistant, Content: "The file has no profit column; it is 50 bytes."},
		},
	}
}

// TestNotebookRunsInJupyter writes the notebook of a conversation next to a
// copy of its upload, validates it with nbformat and runs it with nbclient
// on Debian's ipykernel, as a colleague would run it: every cell must run,
// fail only where terp's run failed, print what terp recorded, and write
// its chart next to the notebook, not in /work.
func TestNotebookRunsInJupyter(t *testing.T) {
	terptest.JupyterPython(t) // skip at once without Jupyter
	d := Build(ranConversation(), func(name string, limit int64) ([]byte, error) {
		if name != "chart.png" {
			return nil, os.ErrNotExist
		}
		img := image.NewRGBA(image.Rect(0, 0, 2, 2))
		img.Set(0, 0, color.RGBA{R: 255, A: 255})
		var b bytes.Buffer
		err := png.Encode(&b, img)
		return b.Bytes(), err
	})
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "sales.csv"), []byte(salesCSV), 0o644); err != nil {
		t.Fatal(err)
	}
	var nb bytes.Buffer
	if err := WriteNotebook(&nb, d); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "revenue.ipynb")
	if err := os.WriteFile(path, nb.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}

	out := terptest.RunNotebook(t, filepath.Join("testdata", "run_notebook.py"), path)
	var ran struct {
		Warnings []string
		Cells    []struct {
			Source  string
			Outputs []nbOutput
		}
	}
	if err := json.Unmarshal(out, &ran); err != nil {
		t.Fatalf("run_notebook.py printed no JSON: %v\n%s", err, out)
	}
	if len(ran.Warnings) > 0 {
		t.Errorf("nbformat warned about the notebook: %q", ran.Warnings)
	}

	var steps []Step
	for _, turn := range d.Turns {
		steps = append(steps, turn.Steps...)
	}
	if len(ran.Cells) != 1+len(steps) {
		t.Fatalf("%d code cells ran, want the setup cell and %d runs", len(ran.Cells), len(steps))
	}
	if setup := ran.Cells[0]; len(setup.Outputs) != 0 {
		t.Errorf("the setup cell printed %+v, want nothing: the upload is there", setup.Outputs)
	}
	for i, st := range steps {
		cell := ran.Cells[i+1]
		var stdout strings.Builder
		var errs []string
		images := 0
		for _, o := range cell.Outputs {
			switch o.OutputType {
			case "stream":
				if o.Name == "stdout" {
					stdout.WriteString(o.text())
				}
			case "execute_result":
				// Where terp's kernel printed the repr of a trailing
				// expression, Jupyter's gives it as the cell's result.
				stdout.WriteString(textPlain(o.Data) + "\n")
			case "display_data":
				if _, ok := o.Data["image/png"]; ok {
					images++
				}
			case "error":
				errs = append(errs, o.Ename+": "+o.Evalue)
			}
		}
		var want []string
		if _, _, ename, evalue, ok := splitTraceback(st.Stderr); ok && st.ExitCode != 0 {
			want = append(want, ename+": "+evalue)
		}
		if strings.Join(errs, "|") != strings.Join(want, "|") {
			t.Errorf("cell %d (%q) failed with %q, want %q as terp recorded", i+1, cell.Source, errs, want)
		}
		if stdout.String() != st.Stdout {
			t.Errorf("cell %d (%q) printed %q, terp recorded %q", i+1, cell.Source, stdout.String(), st.Stdout)
		}
		if len(st.Images) > 0 && images == 0 {
			t.Errorf("cell %d (%q) showed no chart: outputs %+v", i+1, cell.Source, cell.Outputs)
		}
	}
	chart, err := os.ReadFile(filepath.Join(dir, "chart.png"))
	if err != nil || !bytes.HasPrefix(chart, []byte("\x89PNG")) {
		t.Errorf("the chart run wrote no chart.png next to the notebook (%v): its /work/ path was not made relative", err)
	}
}

// textPlain is an output's text/plain, which nbformat gives as a string or
// a list of lines.
func textPlain(data map[string]any) string {
	switch v := data["text/plain"].(type) {
	case string:
		return v
	case []any:
		var b strings.Builder
		for _, l := range v {
			s, _ := l.(string)
			b.WriteString(s)
		}
		return b.String()
	}
	return ""
}
