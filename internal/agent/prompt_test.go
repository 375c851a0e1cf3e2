package agent_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/terpdev/terp/internal/agent"
	"github.com/terpdev/terp/internal/config"
	"github.com/terpdev/terp/internal/kernel"
	"github.com/terpdev/terp/internal/llm/llmtest"
	"github.com/terpdev/terp/internal/sandbox"
)

// A gpt-oss conversation in script mode is told its files are in
// /mnt/data, in the words of its python tool (a new program per call, not a
// notebook), and everything it reads names that directory: the
// system prompt's file list, the note of a later upload. Its code, written
// for /mnt/data, reads the upload and saves a chart that comes back as a
// file of the turn, named once.
func TestNotebookWordingNamesMntData(t *testing.T) {
	s := llmtest.New(t,
		func(req llmtest.Request) llmtest.Reply {
			sys := req.Messages[0].Content
			if !strings.Contains(sys, "/mnt/data/sales.csv (") || strings.Contains(sys, "/work") {
				t.Errorf("system prompt:\n%s\nwant the upload listed under /mnt/data and /work never named", sys)
			}
			tool := req.Tools[0].Function
			if tool.Name != agent.ToolName || !strings.Contains(tool.Description, "executed as a new Python program") ||
				!strings.Contains(tool.Description, "time out after 90.0 seconds") || !strings.Contains(tool.Description, "'/mnt/data'") {
				t.Errorf("tool %s described as %q", tool.Name, tool.Description)
			}
			return llmtest.RunPython("import pandas as pd\ndf = pd.read_csv('/mnt/data/sales.csv')\n" +
				"df.to_csv('/mnt/data/double.csv')\nprint(df.revenue.sum())")
		},
		answerWithStdout,
		func(req llmtest.Request) llmtest.Reply {
			if q := req.LastUser(); !strings.HasPrefix(q, "(New files uploaded: /mnt/data/more.csv)") {
				t.Errorf("the follow-up reads %q, want the upload named under /mnt/data", q)
			}
			return llmtest.Answer("ok")
		})
	a := newAgent(t, s, agent.Config{Model: "gpt-oss-20b", Prompt: agent.PromptGPTOSS, ExecMode: kernel.ModeScript, Timeout: 90 * time.Second})
	if err := a.Upload(context.Background(), "sales.csv", strings.NewReader("month,revenue\n1,10\n2,32\n")); err != nil {
		t.Fatal(err)
	}
	res, err := a.Ask(context.Background(), "total revenue?", nil)
	if err != nil || res.Answer != "42" {
		t.Fatalf("Ask = %+v, %v", res, err)
	}
	if len(res.Files) != 1 || res.Files[0].Path != "double.csv" {
		t.Errorf("files = %+v, want double.csv once", res.Files)
	}
	if err := a.Upload(context.Background(), "more.csv", strings.NewReader("x\n")); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Ask(context.Background(), "and now?", nil); err != nil {
		t.Fatal(err)
	}
}

// Every wording keeps the tool's contract and names one directory, in
// both modes; the default one is terp's own, unchanged. Every name the
// configuration accepts has a wording.
func TestEveryWordingKeepsTheContract(t *testing.T) {
	for _, p := range config.Prompts() {
		if !slices.Contains(agent.Prompts(), agent.Prompt(p)) {
			t.Errorf("config accepts prompt %q, which package agent has no wording for", p)
		}
	}
	for _, p := range agent.Prompts() {
		for _, mode := range []kernel.Mode{kernel.ModeKernel, kernel.ModeScript} {
			cfg := agent.Config{Prompt: p, ExecMode: mode, Timeout: time.Minute}
			system, tool := agent.PromptText(cfg, []sandbox.FileInfo{{Path: "a.csv", Size: 3}})
			dir := sandbox.WorkDir
			if p == agent.PromptGPTOSS || p == agent.PromptGLM4 {
				dir = sandbox.DataDir
			}
			other := map[string]string{sandbox.WorkDir: sandbox.DataDir, sandbox.DataDir: sandbox.WorkDir}[dir]
			if !strings.Contains(system, dir+"/a.csv (3 bytes)") || strings.Contains(system+tool, other) {
				t.Errorf("%s/%s names %s and not %s only:\n%s\n%s", p, mode, other, dir, system, tool)
			}
			persists := strings.Contains(tool, "persist") || strings.Contains(tool, "survive")
			notebook := strings.Contains(tool, "stateful") || strings.Contains(tool, "persistent session") || strings.Contains(tool, "Jupyter kernel")
			if mode == kernel.ModeScript && notebook {
				t.Errorf("%s in script mode promises a notebook: %s", p, tool)
			}
			if mode == kernel.ModeKernel && !notebook {
				t.Errorf("%s in kernel mode does not say variables persist: %s", p, tool)
			}
			if !persists {
				t.Errorf("%s/%s does not say what persists: %s", p, mode, tool)
			}
		}
	}
	system, tool := agent.PromptText(agent.Config{ExecMode: kernel.ModeKernel}, nil)
	if !strings.HasPrefix(system, "You are a data analyst. Use the run_python tool") ||
		!strings.HasPrefix(tool, "Run Python 3 code in a persistent session in an isolated sandbox") {
		t.Errorf("the default wording changed:\n%s\n%s", system, tool)
	}
}
