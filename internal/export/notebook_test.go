package export

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

// nbCell is a notebook cell as the tests read one back.
type nbCell struct {
	ID             string         `json:"id"`
	CellType       string         `json:"cell_type"`
	Source         []string       `json:"source"`
	ExecutionCount *int           `json:"execution_count"`
	Metadata       map[string]any `json:"metadata"`
	Outputs        []nbOutput     `json:"outputs"`
}

type nbOutput struct {
	OutputType string         `json:"output_type"`
	Name       string         `json:"name"`
	Text       multiline      `json:"text"`
	Data       map[string]any `json:"data"`
	Ename      string         `json:"ename"`
	Evalue     string         `json:"evalue"`
	Traceback  []string       `json:"traceback"`
}

type nbFile struct {
	Nbformat      int            `json:"nbformat"`
	NbformatMinor int            `json:"nbformat_minor"`
	Metadata      map[string]any `json:"metadata"`
	Cells         []nbCell       `json:"cells"`
}

func writeNotebook(t *testing.T, d *Doc) nbFile {
	t.Helper()
	var buf bytes.Buffer
	if err := WriteNotebook(&buf, d); err != nil {
		t.Fatal(err)
	}
	var nb nbFile
	if err := json.Unmarshal(buf.Bytes(), &nb); err != nil {
		t.Fatalf("the notebook is no JSON: %v\n%s", err, buf.String())
	}
	// Every cell of nbformat 4.5 has a unique id, and code cells have
	// execution_count and outputs keys even when null or empty.
	var raw struct{ Cells []map[string]json.RawMessage }
	_ = json.Unmarshal(buf.Bytes(), &raw)
	ids := map[string]bool{}
	for i, c := range raw.Cells {
		var id string
		_ = json.Unmarshal(c["id"], &id)
		if id == "" || ids[id] {
			t.Errorf("cell %d has id %q: missing or not unique", i, id)
		}
		ids[id] = true
		if nb.Cells[i].CellType == "code" && (c["execution_count"] == nil || c["outputs"] == nil) {
			t.Errorf("code cell %d lacks execution_count or outputs: %s", i, c)
		}
	}
	return nb
}

func (c nbCell) text() string { return strings.Join(c.Source, "") }

func (o nbOutput) text() string { return strings.Join(o.Text, "") }

// multiline is text as nbformat stores it: a list of lines (as
// WriteNotebook writes it) or one string (as nbformat.read gives it).
type multiline []string

func (m *multiline) UnmarshalJSON(b []byte) error {
	var s string
	if json.Unmarshal(b, &s) == nil {
		*m = multiline{s}
		return nil
	}
	return json.Unmarshal(b, (*[]string)(m))
}

func TestWriteNotebook(t *testing.T) {
	d := Build(sample(), func(name string, limit int64) ([]byte, error) {
		if name == "chart.png" {
			return []byte("\x89PNG\r\n"), nil
		}
		return nil, errors.New("gone")
	})
	d.Turns[0].Steps[0].Code = "import pandas as pd\ndf = pd.read_csv('/work/sales.csv')  # from '/work/'\ndf.head()"
	d.Turns[1].Answer = "February: <script>alert(1)</script> & `a<b` is code."
	nb := writeNotebook(t, d)

	if nb.Nbformat != 4 || nb.NbformatMinor != 5 {
		t.Errorf("nbformat %d.%d, want 4.5", nb.Nbformat, nb.NbformatMinor)
	}
	if ks, _ := nb.Metadata["kernelspec"].(map[string]any); ks["name"] != "python3" {
		t.Errorf("kernelspec %v, want python3", nb.Metadata["kernelspec"])
	}
	if li, _ := nb.Metadata["language_info"].(map[string]any); li["name"] != "python" {
		t.Errorf("language_info %v, want python", nb.Metadata["language_info"])
	}
	var types []string
	for _, c := range nb.Cells {
		types = append(types, c.CellType)
	}
	// intro, setup, question 1, "Let me look.", two runs, answer,
	// question 2, its run, answer.
	want := "markdown code markdown markdown code code markdown markdown code markdown"
	if got := strings.Join(types, " "); got != want {
		t.Fatalf("cells %s\nwant  %s", got, want)
	}
	intro, setup := nb.Cells[0].text(), nb.Cells[1].text()
	for _, s := range []string{"# sales by month", "qwen3-32b", "runs next to copies of: sales.csv", "'/work/sales.csv' is now 'sales.csv'"} {
		if !strings.Contains(intro, s) {
			t.Errorf("the intro lacks %q:\n%s", s, intro)
		}
	}
	if !strings.Contains(setup, `["sales.csv"]`) || nb.Cells[1].ExecutionCount != nil || len(nb.Cells[1].Outputs) != 0 {
		t.Errorf("setup cell = %+v", nb.Cells[1])
	}
	if q := nb.Cells[2].text(); !strings.Contains(q, "> Which month sold most?") || !strings.Contains(q, "*(New files uploaded: /work/sales.csv)*") {
		t.Errorf("question 1 = %q", q)
	}

	one, two, three := nb.Cells[4], nb.Cells[5], nb.Cells[8]
	if got := one.text(); got != "import pandas as pd\ndf = pd.read_csv('sales.csv')  # from '/work/'\ndf.head()" {
		t.Errorf("run 1's code = %q: want /work/ made relative in the string, not in the comment", got)
	}
	for i, c := range []nbCell{one, two, three} {
		if c.ExecutionCount == nil || *c.ExecutionCount != i+1 {
			t.Errorf("run %d's execution_count = %v, want %d", i+1, c.ExecutionCount, i+1)
		}
	}
	if len(one.Outputs) != 1 || one.Outputs[0].OutputType != "stream" || one.Outputs[0].Name != "stdout" || one.Outputs[0].text() != d.Turns[0].Steps[0].Stdout {
		t.Errorf("run 1's outputs = %+v", one.Outputs)
	}
	if len(two.Outputs) != 1 || two.Outputs[0].OutputType != "display_data" {
		t.Fatalf("run 2's outputs = %+v, want the chart", two.Outputs)
	}
	png, err := base64.StdEncoding.DecodeString(two.Outputs[0].Data["image/png"].(string))
	if err != nil || string(png) != "\x89PNG\r\n" {
		t.Errorf("the chart is %q (%v), want the PNG's bytes", png, err)
	}
	if len(three.Outputs) != 1 || three.Outputs[0].OutputType != "error" {
		t.Fatalf("run 3's outputs = %+v, want one error", three.Outputs)
	}
	if e := three.Outputs[0]; e.Ename != "ZeroDivisionError" || e.Evalue != "division by zero" || len(e.Traceback) != 3 || e.Traceback[0] != "Traceback (most recent call last):" {
		t.Errorf("run 3's error = %+v", e)
	}
	answer := nb.Cells[9].text()
	if strings.Contains(answer, "<script>") || !strings.Contains(answer, "&lt;script&gt;alert(1)&lt;/script&gt; &amp; `a<b` is code.") {
		t.Errorf("answer 2 = %q: want the HTML escaped, the code span as written", answer)
	}
}

func TestWriteNotebookScriptMode(t *testing.T) {
	d := &Doc{ID: "s1", ExecMode: "script", Turns: []Turn{{
		Question: "Count to a lot",
		Steps: []Step{
			{Code: "for i in range(100000): print(i)", Stdout: "0\n1\n[... 588,880 bytes omitted ...]\n99999\n"},
			{Code: `{"cod": 1}`, Error: "the arguments are not JSON with a code string"},
			{Code: "import time\ntime.sleep(999)", TimedOut: true, ExitCode: -1, Note: "The run was stopped after 60 s."},
		},
	}}}
	nb := writeNotebook(t, d)
	var types []string
	for _, c := range nb.Cells {
		types = append(types, c.CellType)
	}
	// No uploads, no setup cell; the call that never ran is a raw cell.
	if got, want := strings.Join(types, " "), "markdown markdown code markdown raw code markdown"; got != want {
		t.Fatalf("cells %s\nwant  %s", got, want)
	}
	if intro := nb.Cells[0].text(); !strings.Contains(intro, "stands alone") || strings.Contains(intro, "made relative") {
		t.Errorf("intro = %q: want script mode said, no rewriting claimed", intro)
	}
	count := nb.Cells[2]
	if count.ExecutionCount != nil {
		t.Errorf("execution_count %d in script mode, want null", *count.ExecutionCount)
	}
	if got := count.Outputs[0].text(); got != d.Turns[0].Steps[0].Stdout {
		t.Errorf("stdout %q, want it as terp cut it", got)
	}
	if md, raw := nb.Cells[3].text(), nb.Cells[4].text(); !strings.Contains(md, "could not run") || raw != `{"cod": 1}` {
		t.Errorf("the call that never ran: %q, %q", md, raw)
	}
	if meta, _ := nb.Cells[5].Metadata["terp"].(map[string]any); meta["timed_out"] != true {
		t.Errorf("timed-out run's metadata = %v", nb.Cells[5].Metadata)
	}
	if note := nb.Cells[6].text(); note != "*terp: The run was stopped after 60 s.*" {
		t.Errorf("note = %q", note)
	}
}

func TestRelativeWork(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{`pd.read_csv('/work/sales.csv')`, `pd.read_csv('sales.csv')`},
		{`open("/work/out/a.txt", "w")`, `open("out/a.txt", "w")`},
		{`os.chdir("/work")`, `os.chdir(".")`},
		{`os.listdir('/work/')`, `os.listdir('./')`},
		{`Path("/work") / "chart.png"`, `Path(".") / "chart.png"`},
		{`f"/work/{name}.png"`, `f"{name}.png"`},
		{`rb'/work/x.bin'`, `rb'x.bin'`},
		{`'''/work/a.txt'''`, `'''a.txt'''`},
		{"\"\"\"it's\n'/work/not.txt'\"\"\"; open('/work/yes.txt')", "\"\"\"it's\n'/work/not.txt'\"\"\"; open('yes.txt')"},
		{`x = "it's" + '/work/y'`, `x = "it's" + 'y'`},
		{`"a\"/work/b"`, `"a\"/work/b"`},
		{`'\'/work/b'`, `'\'/work/b'`},
		{`"/workspace/x"`, `"/workspace/x"`},
		{`"see /work/x"`, `"see /work/x"`},
		{`subprocess.run("ls /work", shell=True)`, `subprocess.run("ls /work", shell=True)`},
		{"# read '/work/a'\nopen('/work/a')", "# read '/work/a'\nopen('a')"},
		{`print("# no comment", '/work/z')`, `print("# no comment", 'z')`},
		{"s = 'open\nt = '/work/t'", "s = 'open\nt = 't'"},
		{`'/work//x'`, `'x'`},
		{`x = 1`, `x = 1`},
	} {
		got, changed := relativeWork(tc.in)
		if got != tc.want || changed != (tc.in != tc.want) {
			t.Errorf("relativeWork(%q) = %q, %v; want %q", tc.in, got, changed, tc.want)
		}
	}
}

func TestMarkdownEscapes(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"<img src=x onerror=alert(1)>", "&lt;img src=x onerror=alert(1)&gt;"},
		{"a & b, **bold**, [link](https://x.org)", "a &amp; b, **bold**, [link](https://x.org)"},
		{"use `df[df.a < 3]` & go", "use `df[df.a < 3]` &amp; go"},
		{"``a ` <b>`` <i>", "``a ` <b>`` &lt;i&gt;"},
		{"\\`<b>\\`", "\\`&lt;b&gt;\\`"},
		{"| `x | <b>` |", "| `x | &lt;b&gt;` |"},
		{"`open <b>", "`open &lt;b&gt;"},
		{"```python\nif a < b:\n    pass\n```\n<b>", "```python\nif a < b:\n    pass\n```\n&lt;b&gt;"},
		{"~~~\n<kept>\n~~~~\n<b>", "~~~\n<kept>\n~~~~\n&lt;b&gt;"},
		{"``` a`b\n<b>", "``` a`b\n&lt;b&gt;"},
		// A fence in a list item is taken for text: escaped, never raw.
		{"1. x\n   ```\n   <b>\n<script>", "1. x\n   ```\n   &lt;b&gt;\n&lt;script&gt;"},
		{"```\n<open to the end>", "```\n<open to the end>"},
	} {
		if got := markdown(tc.in); got != tc.want {
			t.Errorf("markdown(%q)\n = %q\nwant %q", tc.in, got, tc.want)
		}
	}
	if got := plain("a_b*c <d> [e] $5\nf"); got != `a\_b\*c &lt;d&gt; \[e\] \$5 f` {
		t.Errorf("plain = %q", got)
	}
}

func TestSplitTraceback(t *testing.T) {
	for _, tc := range []struct {
		name, stderr         string
		before, ename, value string
		tb                   int // lines
	}{
		{"plain", "Traceback (most recent call last):\n  File \"<cell 3>\", line 1, in <module>\nZeroDivisionError: division by zero\n", "", "ZeroDivisionError", "division by zero", 3},
		{"warning first", "x.py:1: UserWarning: careful\n  warn()\nTraceback (most recent call last):\n  File \"x.py\", line 2, in <module>\nKeyError: 'profit'\n", "x.py:1: UserWarning: careful\n  warn()\n", "KeyError", "'profit'", 3},
		{"syntax error", "  File \"<cell 1>\", line 1\n    1 +\n       ^\nSyntaxError: invalid syntax\n", "", "SyntaxError", "invalid syntax", 4},
		{"no message", "Traceback (most recent call last):\n  File \"a.py\", line 9, in <module>\nKeyboardInterrupt\n", "", "KeyboardInterrupt", "", 3},
		{"dotted, two lines", "Traceback (most recent call last):\n  File \"a.py\", line 1, in <module>\npandas.errors.ParserError: bad\nline two\n", "", "pandas.errors.ParserError", "bad\nline two", 4},
		{"chained", "Traceback (most recent call last):\n  File \"a\", line 1\nKeyError: 'a'\n\nDuring handling of the above exception, another exception occurred:\n\nTraceback (most recent call last):\n  File \"a\", line 3\nValueError: b\n", "", "ValueError", "b", 9},
		{"no traceback", "usage: nothing here\n", "", "", "", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before, tb, ename, evalue, ok := splitTraceback(tc.stderr)
			if ok != (tc.tb > 0) || before != tc.before || ename != tc.ename || evalue != tc.value || len(tb) != tc.tb {
				t.Errorf("got %q, %d lines %q, %q, %q, %v", before, len(tb), tb, ename, evalue, ok)
			}
		})
	}
}
