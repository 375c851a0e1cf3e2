package cli

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"html"
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/terpdev/terp/internal/llm/llmtest"
	"github.com/terpdev/terp/internal/terptest"
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

// A conversation terp really ran (kernel mode: the second run uses the
// first's df), exported as a notebook, runs again in Jupyter next to a copy
// of its upload: nbclient on Debian's ipykernel regenerates the text each
// run printed (its last expression's value included) and the chart.
func TestSessionsExportNotebookRunsInJupyter(t *testing.T) {
	terptest.JupyterPython(t) // before the conversation: skip at once without Jupyter
	s := llmtest.New(t,
		llmtest.Fixed(llmtest.RunPython("import pandas as pd\ndf = pd.read_csv('/work/sales.csv')\nprint(len(df), 'months')\ndf['revenue'].max()")),
		llmtest.Fixed(llmtest.RunPython(strings.Replace(exportChartCode, "plt.plot([1, 2, 3])", "plt.plot(df['revenue'])", 1))),
		llmtest.Fixed(llmtest.Answer("Done: chart.png.")))
	env, _ := sharedEnv(t, s)
	env["TERP_OUT_DIR"] = t.TempDir()
	sales := salesCSV(t)
	a := askJSONOf(t, terp(t, env, "", "ask", "--json", "--exec-mode", "kernel", "-f", sales, "plot the revenue"))
	dir := t.TempDir()
	nb := filepath.Join(dir, "analysis.ipynb")
	if r := terp(t, env, "", "sessions", "export", a.ConversationID, "-o", nb); r.code != 0 {
		t.Fatalf("export: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	src, err := os.ReadFile(sales)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "sales.csv"), src, 0o644); err != nil {
		t.Fatal(err)
	}
	recorded := notebookOutputs(t, nb)
	out := terptest.RunNotebook(t, "../export/testdata/run_notebook.py", nb)
	var ran struct {
		Warnings []string
		Cells    []struct{ Outputs []nbOut }
	}
	if err := json.Unmarshal(out, &ran); err != nil {
		t.Fatal(err)
	}
	if len(ran.Warnings) > 0 || len(ran.Cells) != len(recorded) {
		t.Fatalf("warnings %q; %d cells ran, %d recorded", ran.Warnings, len(ran.Cells), len(recorded))
	}
	for i, cell := range ran.Cells {
		got, want := textOfOutputs(cell.Outputs), textOfOutputs(recorded[i])
		if got.text != want.text || got.errors != 0 || got.values != want.values {
			t.Errorf("cell %d: ran %+v, recorded %+v", i, got, want)
		}
	}
	// The first run's last expression is its cell's value, as Jupyter
	// makes it: terp's kernel told it apart from what the run printed.
	if first := textOfOutputs(recorded[1]); first.values != 1 {
		t.Errorf("the first run's cell records %d values, want df['revenue'].max()", first.values)
	}
	// The chart is recorded as an image; run again (matplotlib's Agg, no
	// inline display) it is saved where /work stood, next to the notebook.
	if last := textOfOutputs(recorded[len(recorded)-1]); last.images != 1 {
		t.Errorf("the chart cell records %d images, want the chart", last.images)
	}
	b, err := os.ReadFile(filepath.Join(dir, "chart.png"))
	if err != nil {
		t.Fatalf("the chart was not saved next to the notebook: %v", err)
	}
	if cfg, err := png.DecodeConfig(bytes.NewReader(b)); err != nil || cfg.Width != 400 || cfg.Height != 300 {
		t.Errorf("the chart saved again is %dx%d (%v), want 400x300", cfg.Width, cfg.Height, err)
	}
}

// nbOut is one output of a code cell, as nbformat writes it.
type nbOut struct {
	OutputType string         `json:"output_type"`
	Text       any            `json:"text"`
	Data       map[string]any `json:"data"`
}

// outputsText is what a cell's outputs say: its stdout and the value of
// its last expression as one text (terp's kernel prints the value; Jupyter
// makes it an execute_result), its errors and its images.
type outputsText struct {
	text                   string
	errors, images, values int
}

func textOfOutputs(outs []nbOut) outputsText {
	var o outputsText
	join := func(v any) string {
		switch v := v.(type) {
		case string:
			return v
		case []any:
			var b strings.Builder
			for _, s := range v {
				fmt.Fprint(&b, s)
			}
			return b.String()
		}
		return ""
	}
	for _, out := range outs {
		switch out.OutputType {
		case "stream":
			o.text += join(out.Text)
		case "execute_result":
			o.text += join(out.Data["text/plain"]) + "\n"
			o.values++
		case "error":
			o.errors++
		case "display_data":
			if _, ok := out.Data["image/png"]; ok {
				o.images++
			}
		}
	}
	return o
}

// notebookOutputs are the recorded outputs of each code cell of the
// notebook at p.
func notebookOutputs(t *testing.T, p string) [][]nbOut {
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	var nb struct {
		Cells []struct {
			CellType string  `json:"cell_type"`
			Outputs  []nbOut `json:"outputs"`
		} `json:"cells"`
	}
	if err := json.Unmarshal(b, &nb); err != nil {
		t.Fatal(err)
	}
	var out [][]nbOut
	for _, c := range nb.Cells {
		if c.CellType == "code" {
			out = append(out, c.Outputs)
		}
	}
	return out
}

// An HTML export is one file: the chart is in it, the run's output too,
// and it may load nothing from anywhere.
func TestSessionsExportHTML(t *testing.T) {
	env, id := exportedConversation(t)
	out := filepath.Join(t.TempDir(), "report.html")
	if r := terp(t, env, "", "sessions", "export", id, "-o", out); r.code != 0 {
		t.Fatalf("export: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	page, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`http-equiv="Content-Security-Policy"`, "total 42", "The total is 42", "plot it"} {
		if !strings.Contains(string(page), want) {
			t.Errorf("the page lacks %q", want)
		}
	}
	const prefix = "data:image/png;base64,"
	i := strings.Index(string(page), prefix)
	if i < 0 {
		t.Fatal("the page embeds no PNG")
	}
	b64 := string(page[i+len(prefix):])
	b64 = b64[:strings.IndexAny(b64, `"'`)]
	img, err := base64.StdEncoding.DecodeString(html.UnescapeString(b64))
	if err != nil {
		t.Fatal(err)
	}
	if cfg, err := png.DecodeConfig(bytes.NewReader(img)); err != nil || cfg.Width != 400 || cfg.Height != 300 {
		t.Errorf("the embedded chart is %dx%d (%v), want the run's 400x300", cfg.Width, cfg.Height, err)
	}
}
