package cli

import (
	"bytes"
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/terpdev/terp/internal/llm/llmtest"
)

// exportChartCode saves a 4x3 in chart at 100 dpi (400x300) and prints a total.
const exportChartCode = "import matplotlib\nmatplotlib.use('Agg')\nimport matplotlib.pyplot as plt\n" +
	"plt.figure(figsize=(4, 3), dpi=100)\nplt.plot([1, 2, 3])\nplt.savefig('/work/chart.png')\n" +
	"open('/work/notes.txt', 'w').write('n')\nprint('total', 6 * 7)"

// exportedConversation asks one question whose run saves a chart, on the
// real sandbox, and returns the environment and the conversation's id.
func exportedConversation(t *testing.T) (map[string]string, string) {
	s := llmtest.New(t, llmtest.Fixed(llmtest.RunPython(exportChartCode)), llmtest.Fixed(llmtest.Answer("The total is 42; the chart is chart.png.")))
	env, _ := sharedEnv(t, s)
	env["TERP_OUT_DIR"] = t.TempDir() // where ask downloads the chart, not this directory
	a := askJSONOf(t, terp(t, env, "", "ask", "--json", "plot it"))
	return env, a.ConversationID
}

// A Markdown export links the chart, written beside it from the paused
// sandbox, and holds the question, the code, its output and the answer.
func TestSessionsExportMarkdown(t *testing.T) {
	env, id := exportedConversation(t)
	dir := t.TempDir()
	out := filepath.Join(dir, "report.md")
	r := terp(t, env, "", "sessions", "export", id[:6], "-o", out)
	if r.code != 0 {
		t.Fatalf("export: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	md, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"> plot it", "plt.savefig('/work/chart.png')", "total 42", "![chart.png](<report_files/chart.png>)",
		"Saved `notes.txt`.", "The total is 42"} {
		if !strings.Contains(string(md), want) {
			t.Errorf("the export lacks %q:\n%s", want, md)
		}
	}
	b, err := os.ReadFile(filepath.Join(dir, "report_files", "chart.png"))
	if err != nil {
		t.Fatal(err)
	}
	if cfg, err := png.DecodeConfig(bytes.NewReader(b)); err != nil || cfg.Width != 400 || cfg.Height != 300 {
		t.Errorf("the chart beside the export is %dx%d (%v), want the run's 400x300", cfg.Width, cfg.Height, err)
	}
	if !strings.Contains(r.stderr, "wrote "+out) {
		t.Errorf("stderr %q does not say what was written", r.stderr)
	}
}

func TestSessionsExportUsage(t *testing.T) {
	env, id := exportedConversation(t)
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"-o", "x.pdf"}, "give --format"},
		{[]string{"--format", "pdf"}, `--format is one of ipynb, html, md, not "pdf"`},
		{nil, "give --format"},
	} {
		r := terp(t, env, "", append([]string{"sessions", "export", id}, tt.args...)...)
		if r.code != exitUsage || !strings.Contains(r.stderr, tt.want) {
			t.Errorf("export %v: exit %d, %q; want 2 and %q", tt.args, r.code, r.stderr, tt.want)
		}
	}
	if r := terp(t, env, "", "sessions", "export", "zzz", "--format", "md"); r.code != exitUsage || !strings.Contains(r.stderr, "no such conversation") {
		t.Errorf("export of an unknown id: exit %d, %s", r.code, r.stderr)
	}
}

// /export in the line-mode chat writes the conversation so far.
func TestChatExport(t *testing.T) {
	s := llmtest.New(t, llmtest.Fixed(llmtest.RunPython(exportChartCode)), llmtest.Fixed(llmtest.Answer("The total is 42.")))
	env, _ := sharedEnv(t, s)
	env["TERP_OUT_DIR"] = t.TempDir()
	out := filepath.Join(t.TempDir(), "chat.md")
	r := terp(t, env, "plot it\n/export "+out+"\n", "chat")
	if r.code != 0 || !strings.Contains(r.stderr+r.stdout, "wrote "+out) {
		t.Fatalf("chat: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	md, err := os.ReadFile(out)
	if err != nil || !strings.Contains(string(md), "The total is 42.") || !strings.Contains(string(md), "(<chat_files/chart.png>)") {
		t.Errorf("the export (%v):\n%s", err, md)
	}
	if _, err := os.Stat(filepath.Join(filepath.Dir(out), "chat_files", "chart.png")); err != nil {
		t.Error(err)
	}
}
