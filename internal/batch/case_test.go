package batch

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// suite writes a cases file, and a data file beside it, and returns the
// cases file's path.
func suite(t *testing.T, text string) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "data.csv"), []byte("a,b\n1,2\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, "cases.jsonl")
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestLoad(t *testing.T) {
	p := suite(t, `# a comment
{"id": "full", "question": "Which month?", "files": ["data.csv"], "max_steps": 3, "model": "m1", "skill": "time-series", "level": "hard", "expect": {"contains": "Dec", "regex": "(?i)dec", "number": {"value": 12.5, "tolerance": 0.01}, "files": ["/work/chart.png", "*.csv"]}}

{"question": "Only a question"}
{"id": 7, "question": "numeric id", "expect": {"number": 42}}
`)
	cases, err := Load(p, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(cases) != 3 {
		t.Fatalf("got %d cases, want 3", len(cases))
	}
	c := cases[0]
	dir := filepath.Dir(p)
	if c.ID != "full" || c.Line != 2 || c.Question != "Which month?" || c.MaxSteps != 3 || c.Model != "m1" ||
		c.Skill != "time-series" || c.Level != "hard" ||
		len(c.Files) != 1 || c.Files[0] != filepath.Join(dir, "data.csv") {
		t.Errorf("case = %+v", c)
	}
	e := c.Expect
	if len(e.Contains) != 1 || e.Contains[0] != "Dec" || e.Regex.String() != "(?i)dec" ||
		*e.Number != (Number{Value: 12.5, Tolerance: 0.01}) || strings.Join(e.Files, ",") != "chart.png,*.csv" {
		t.Errorf("expect = %+v", e)
	}
	if cases[1].ID != "4" || cases[1].Line != 4 {
		t.Errorf("the id of a case without one is %q (line %d), want its line number 4", cases[1].ID, cases[1].Line)
	}
	if cases[2].ID != "7" || *cases[2].Expect.Number != (Number{Value: 42}) {
		t.Errorf("case 3 = %+v", cases[2])
	}
}

func TestLoadReportsEachBadLine(t *testing.T) {
	tests := []struct {
		name string
		text string
		want []string // each must appear in the error
	}{
		{"bad JSON", "{\"question\": \"ok\"}\n{\"question\": \"x\",}\n", []string{"cases.jsonl:2: invalid JSON"}},
		{"not an object", `["question"]`, []string{"cases.jsonl:1: a case must be a JSON object"}},
		{"missing question", `{"id": "a"}`, []string{`cases.jsonl:1: "question" is missing or empty`}},
		{"empty question", `{"question": "  "}`, []string{`cases.jsonl:1: "question" is missing or empty`}},
		{"unknown field", `{"question": "q", "expected": {}}`, []string{`cases.jsonl:1: unknown field "expected"`}},
		{"unknown expectation", `{"question": "q", "expect": {"contans": ["x"]}}`, []string{`cases.jsonl:1: unknown field "expect.contans"`}},
		{"unknown number field", `{"question": "q", "expect": {"number": {"value": 1, "tol": 2}}}`, []string{`unknown field "expect.number.tol"`}},
		{"missing file", `{"question": "q", "files": ["nope.csv"]}`, []string{`cases.jsonl:1: file "nope.csv"`, "no such file"}},
		{"bad regex", `{"question": "q", "expect": {"regex": "a(b"}}`, []string{`cases.jsonl:1: "expect.regex" is not a valid RE2`}},
		{"lookahead is not RE2", `{"question": "q", "expect": {"regex": "a(?=b)"}}`, []string{"RE2"}},
		{"number without value", `{"question": "q", "expect": {"number": {"tolerance": 1}}}`, []string{`"expect.number" has no "value"`}},
		{"negative tolerance", `{"question": "q", "expect": {"number": {"value": 1, "tolerance": -1}}}`, []string{`"expect.number.tolerance" must be`}},
		{"bad max_steps", `{"question": "q", "max_steps": "ten"}`, []string{`"max_steps" must be a positive integer, not "ten"`}},
		{"zero max_steps", `{"question": "q", "max_steps": 0}`, []string{`"max_steps" must be a positive integer`}},
		{"unknown level", `{"question": "q", "level": "expert"}`, []string{`"level" is one of easy, medium, hard, not "expert"`}},
		{"empty skill", `{"question": "q", "skill": " "}`, []string{`"skill" is empty`}},
		{"skill not a string", `{"question": "q", "skill": 3}`, []string{`"skill" must be a string, not 3`}},
		{"id as a path", `{"id": "../x", "question": "q"}`, []string{`"id" "../x" cannot name a directory`}},
		{"duplicate id", "{\"id\": \"a\", \"question\": \"q\"}\n{\"id\": \"a\", \"question\": \"q\"}", []string{`cases.jsonl:2: id "a" is already used on line 1`}},
		{"same upload name", `{"question": "q", "files": ["data.csv", "./data.csv"]}`, []string{"would both be uploaded as /work/data.csv"}},
		{"file outside /work", `{"question": "q", "expect": {"files": ["../etc/passwd"]}}`, []string{`"expect.files" names "../etc/passwd"`}},
		{"empty suite", "# nothing\n\n", []string{"no cases"}},
		{
			"every bad line at once",
			"{\"question\": 1}\n{\"question\": \"fine\"}\n{\"quest\": \"x\"}\n",
			[]string{`cases.jsonl:1: "question" must be a string, not 1`, `cases.jsonl:3: unknown field "quest"`},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Load(suite(t, tt.text), nil)
			var errs Errors
			if !errors.As(err, &errs) {
				t.Fatalf("err = %v, want Errors", err)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error does not say %q:\n%v", w, err)
				}
			}
		})
	}
}

func TestLoadFromStdinResolvesFilesInTheCurrentDirectory(t *testing.T) {
	p := suite(t, "")
	t.Chdir(filepath.Dir(p))
	cases, err := Load("-", strings.NewReader(`{"question": "q", "files": ["data.csv"]}`))
	if err != nil {
		t.Fatal(err)
	}
	if cases[0].Files[0] != "data.csv" {
		t.Errorf("files = %q", cases[0].Files)
	}
}
