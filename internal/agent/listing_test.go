package agent_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/terpdev/terp/internal/agent"
	"github.com/terpdev/terp/internal/llm"
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

// cutList is a real sandbox whose List holds only 1,000 files, as a
// backend's does past sandbox.MaxListEntries: the most recently modified.
type cutList struct{ sandbox.Sandbox }

func (s cutList) List(ctx context.Context, dir string) ([]sandbox.FileInfo, error) {
	files, err := s.Sandbox.List(ctx, dir)
	if err != nil {
		return nil, err
	}
	kept := sandbox.NewNewest(1000)
	for _, f := range files {
		kept.Add(f)
	}
	return kept.Files()
}

// When List has to cut the listing, the file the step saved is still
// reported and downloaded, and the user and the model are told that older
// files went unlisted.
func TestACutListingIsNotSilent(t *testing.T) {
	s := llmtest.New(t,
		llmtest.Fixed(llmtest.RunPython("open('/work/result.csv', 'w').write('a\\n1\\n')\n")),
		func(req llmtest.Request) llmtest.Reply {
			raw := req.LastTool()
			if !strings.Contains(raw, "1,000 most recently modified") || !strings.Contains(raw, `"result.csv"`) {
				t.Errorf("the model was not told of result.csv and of the cut listing: %.400s", raw)
			}
			return llmtest.Answer("done")
		})
	model := llm.New(llm.Config{BaseURL: s.BaseURL(), Stream: true, MaxRetries: -1})
	sbx := cutList{newSandbox(t)}
	old, err := sbx.Exec(t.Context(), []string{"python3", "-c",
		"import os\nfor i in range(1500):\n    open(f'/work/p{i:04d}.txt', 'w').write('x')\n    os.utime(f'/work/p{i:04d}.txt', (1e9 + i, 1e9 + i))"},
		sandbox.ExecOptions{Timeout: time.Minute})
	if err != nil || old.ExitCode != 0 {
		t.Fatalf("make files: %v %+v", err, old)
	}
	runner := newScript(t, sbx)
	a := agent.New(model, sbx, runner, agent.Config{Model: "m", Timeout: time.Minute})
	// The first look at /work, as a conversation takes it when it opens.
	if err := a.Rebind(t.Context(), sbx, runner); err != nil {
		t.Fatal(err)
	}
	res, err := a.Ask(context.Background(), "go", nil)
	if err != nil || res.Answer != "done" {
		t.Fatalf("Ask = %q, %v", res.Answer, err)
	}
	if len(res.Files) != 1 || res.Files[0].Path != "result.csv" || !strings.Contains(strings.Join(res.Notices, "\n"), "1,000 most recently modified") {
		t.Errorf("%d files (%.200v), notices %q; want result.csv and a notice of the cut listing", len(res.Files), res.Files, res.Notices)
	}
}

// A conversation that starts with a large /work (uploads, a resumed
// sandbox) tells the model of a few files and the count, not of every name.
func TestSystemPromptListsAFewFiles(t *testing.T) {
	s := llmtest.New(t, func(req llmtest.Request) llmtest.Reply {
		sys := req.Messages[0].Content
		if len(sys) > 5000 || !strings.Contains(sys, "/work/data.csv") || !strings.Contains(sys, "1,501 in all") {
			t.Errorf("system prompt of %d characters: %.400s...; want a short list naming data.csv, and the count", len(sys), sys)
		}
		return llmtest.Answer("done")
	})
	model := llm.New(llm.Config{BaseURL: s.BaseURL(), Stream: true, MaxRetries: -1})
	sbx := newSandbox(t)
	res, err := sbx.Exec(t.Context(), []string{"python3", "-c",
		"for i in range(1500): open(f'/work/chunk{i:04d}.txt', 'w').write('x')\nopen('/work/data.csv', 'w').write('a\\n')"},
		sandbox.ExecOptions{Timeout: time.Minute})
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("make files: %v %+v", err, res)
	}
	a := agent.New(model, sbx, newScript(t, sbx), agent.Config{Model: "m", Timeout: time.Minute})
	if _, err := a.Ask(context.Background(), "what is there?", nil); err != nil {
		t.Fatal(err)
	}
}
