package agent_test

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/terpdev/terp/internal/agent"
	"github.com/terpdev/terp/internal/llm/llmtest"
	"github.com/terpdev/terp/internal/sandbox"
)

// manyFiles is code that saves 20,000 small files in /work and, in the same
// step, the one file the user asked for.
const manyFiles = `for i in range(20000):
    open(f"/work/part{i:05d}.txt", "w").write("x")
open("/work/result.csv", "w").write("a,b\n1,2\n")
print("saved")
`

// A step that saves more files than a listing holds must still report every
// one of them for download, while the model and the user see a short list
// that says how many more there are; the file that matters is not lost among
// the others.
func TestManyFilesSavedInOneStep(t *testing.T) {
	s := llmtest.New(t,
		llmtest.Fixed(llmtest.RunPython(manyFiles)),
		func(req llmtest.Request) llmtest.Reply {
			raw := req.LastTool()
			res, err := req.ToolResult()
			if err != nil {
				t.Fatalf("tool result: %v", err)
			}
			t.Logf("tool result: %d characters: %.400s ... %s", len(raw), raw, raw[max(0, len(raw)-300):])
			if len(raw) > 6000 {
				t.Errorf("the tool result is %d characters, want a bounded list of files", len(raw))
			}
			if !slices.Contains(res.Files, "result.csv") {
				t.Errorf("the model was not told of result.csv; %d files, starting %q", len(res.Files), res.Files[:min(3, len(res.Files))])
			}
			if !strings.Contains(raw, "20,001 files") {
				t.Errorf("the model was not told how many files were saved: %.600s", raw)
			}
			return llmtest.Answer("done")
		})
	a := newAgent(t, s, agent.Config{Model: "m"})
	var c collect
	res, err := a.Ask(context.Background(), "split the data", c.send)
	if err != nil || res.Answer != "done" {
		t.Fatalf("Ask = %+v, %v", res.Answer, err)
	}
	if len(res.Files) != 20001 || !slices.ContainsFunc(res.Files, func(f sandboxFile) bool { return f.Path == "result.csv" }) {
		t.Errorf("Result.Files holds %d files (result.csv among them: %v), want all 20,001 for download",
			len(res.Files), slices.ContainsFunc(res.Files, func(f sandboxFile) bool { return f.Path == "result.csv" }))
	}
	saved, told := 0, false
	for _, e := range c.events {
		switch e := e.(type) {
		case agent.FileSaved:
			saved++
		case agent.Notice:
			told = told || strings.Contains(e.Text, "20,001 files")
		}
	}
	if saved > 100 || !told {
		t.Errorf("the user saw %d saved-file events and a notice of the count: %v; want a short list and the count", saved, told)
	}
}

type sandboxFile = sandbox.FileInfo
