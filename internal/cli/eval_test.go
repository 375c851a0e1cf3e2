package cli

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/terpdev/terp/internal/batch"
	"github.com/terpdev/terp/internal/llm/llmtest"
)

// evalSuite is terp's evaluation suite; each case's reference solution is
// solutions/<id>.py beside it.
const evalSuite = "../../examples/eval/cases.jsonl"

// oracleModel names the scripted model that answers with the reference
// solutions. It is not a model: its score says the cases are sound, and is
// never reported as any model's.
const oracleModel = "oracle-reference-solutions"

// TestEvalOracle runs the evaluation suite the way `make eval` runs it,
// with the real terp binary on the real sandbox, against an oracle: a
// scripted model that, for each case, runs the case's reference solution
// with run_python and answers with what it printed. Every case must pass:
// one its own solution cannot pass is broken (a wrong expectation, data
// that changed, a question with two answers), and is caught here before any
// model is judged by it. `make eval-check` runs this test alone.
func TestEvalOracle(t *testing.T) {
	makeLargeData(t)
	cases, err := batch.Load(evalSuite, nil)
	if err != nil {
		t.Fatal(err)
	}
	solutions := map[string]string{} // question, code
	dir := filepath.Dir(evalSuite)
	var names []string // the solutions' file names
	for _, c := range cases {
		if c.Skill == "" || c.Level == "" {
			t.Errorf("%s:%d: case %s says no skill or no level; every case of the suite says both", evalSuite, c.Line, c.ID)
		}
		turns := []batch.FollowUp{{Question: c.Question, Expect: c.Expect}}
		turns = append(turns, c.FollowUps...)
		for i, turn := range turns {
			name, what := c.ID+".py", "case "+c.ID
			if i > 0 {
				name, what = fmt.Sprintf("%s.followup-%d.py", c.ID, i), fmt.Sprintf("follow-up %d of case %s", i, c.ID)
			}
			names = append(names, name)
			code, err := os.ReadFile(filepath.Join(dir, "solutions", name))
			if err != nil {
				t.Errorf("%s has no reference solution: %v", what, err)
				continue
			}
			// Every case of the suite asks for an ANSWER line, which is
			// all the matchers read, and for an answer computed by
			// running code.
			if !turn.Expect.AnswerLine || !turn.Expect.RanCode {
				t.Errorf("%s:%d: %s does not set answer_line and ran_code; every turn of the suite reads the ANSWER line of a run that ran code", evalSuite, c.Line, what)
			}
			// An answer that echoes the question must not pass.
			if n := turn.Expect.Number; n != nil {
				for _, f := range batch.Numbers(turn.Question) {
					if n.Within(f.Value) {
						t.Errorf("%s:%d: %s expects %v, which its question says (%q): an answer that repeats the question passes",
							evalSuite, c.Line, what, n.Centre(), f.Text)
						break
					}
				}
			}
			if _, dup := solutions[turn.Question]; dup {
				t.Errorf("%s asks the question of another case", what)
			}
			solutions[turn.Question] = string(code)
		}
	}
	stray, err := filepath.Glob(filepath.Join(dir, "solutions", "*.py"))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range stray {
		if !slices.Contains(names, filepath.Base(p)) {
			t.Errorf("%s is the solution of no case", p)
		}
	}
	if t.Failed() {
		return
	}

	oracle := llmtest.Each(t, func(req llmtest.Request) llmtest.Reply {
		q := turnQuestion(req)
		code, ok := solutions[q]
		if !ok {
			return llmtest.Answer("the oracle knows no solution to this question: " + q)
		}
		if turnOpens(req) {
			return llmtest.RunPython(code)
		}
		res, err := req.ToolResult()
		switch {
		case err != nil:
			return llmtest.Answer(fmt.Sprintf("the oracle could not read the tool's result: %v", err))
		case res.ExitCode != 0 || res.TimedOut:
			return llmtest.Answer(fmt.Sprintf("the reference solution failed (exit %d, timed out %v): %s", res.ExitCode, res.TimedOut, res.Stderr))
		}
		return llmtest.Answer(strings.TrimSpace(res.Stdout))
	})
	run := runEvalSuite(t, oracle.BaseURL(), oracleModel)
	results := run.results
	followUps := map[string][]batch.FollowUp{}
	for _, c := range cases {
		followUps[c.ID] = c.FollowUps
	}
	for _, r := range results {
		if r.Status != batch.Passed {
			t.Errorf("case %s (line %d) fails with its own reference solution: %s\n  answer: %s", r.ID, r.Line, strings.Join(r.Reasons, "; "), r.Answer)
		}
		if want := 2 * (1 + len(followUps[r.ID])); r.Steps != want {
			t.Errorf("case %s took %d steps, want the oracle's %d (run, answer, for each turn)", r.ID, r.Steps, want)
		}
	}
	if len(results) != len(cases) {
		t.Errorf("%d results for %d cases", len(results), len(cases))
	}
	if run.err != nil && !t.Failed() {
		t.Errorf("terp batch: %v\nstdout:\n%s\nstderr:\n%s", run.err, run.stdout, run.stderr)
	}
	report, err := os.ReadFile(run.markdown)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(report), fmt.Sprintf("| %s | %d | 100.0%% |", oracleModel, len(cases))) ||
		!strings.Contains(string(report), "## Levels") || !strings.Contains(string(report), "## Skills") {
		t.Errorf("the Markdown report does not give the oracle every case, per level and per skill:\n%s", report)
	}
	if b, err := os.ReadFile(run.html); err != nil || !strings.Contains(string(b), oracleModel) {
		t.Errorf("the HTML report (%v) does not name the oracle", err)
	}
	t.Logf("%d cases pass with their reference solutions; reports %s and %s\n%s", len(results), run.markdown, run.html, run.stdout)
}

// turnQuestion is the question of the turn a request belongs to: the last
// the user asked, without the note on uploaded files that may open it.
func turnQuestion(req llmtest.Request) string {
	q := req.LastUser()
	if strings.HasPrefix(q, "(") {
		if i := strings.LastIndex(q, ")\n\n"); i >= 0 {
			q = q[i+3:]
		}
	}
	return q
}

// turnOpens reports whether a request opens a turn: the user spoke last.
func turnOpens(req llmtest.Request) bool {
	return len(req.Messages) > 0 && req.Messages[len(req.Messages)-1].Role == "user"
}

// makeLargeData makes the suite's tables too large to ship, unless they
// are there already, as make eval does: make_data.py writes them with the
// standard library only, the same bytes every time.
func makeLargeData(t *testing.T) {
	t.Helper()
	script := filepath.Join(filepath.Dir(evalSuite), "make_data.py")
	if out, err := exec.Command("python3", script, "--large").CombinedOutput(); err != nil {
		t.Fatalf("python3 %s --large: %v\n%s", script, err, out)
	}
}

// TestEvalAnswersAsWritten checks the suite's matchers on answers as
// careful analysts write them: a right answer in the form the question
// asks passes however it is decorated, and the near misses the form rules
// out (a truncated number, a name apart from its number, a refusal with a
// value) do not. No model or sandbox is involved: the oracle proves that
// the reference answers pass; this, that the matchers are neither too
// strict nor too loose.
func TestEvalAnswersAsWritten(t *testing.T) {
	cases, err := batch.Load(evalSuite, nil)
	if err != nil {
		t.Fatal(err)
	}
	byID := map[string]batch.Case{}
	for _, c := range cases {
		byID[c.ID] = c
	}
	tests := []struct {
		id, answer string
		pass       bool
	}{
		{"loading-iris-versicolor", "The mean is 1.2104 cm.\n\nANSWER: 1.21 cm", true},
		{"loading-iris-versicolor", "**ANSWER:** `1.2104`", true},
		{"loading-iris-versicolor", "ANSWER: 1.2 cm", false},
		{"loading-store-zip", "ANSWER: Store C, 541478", true},
		{"loading-store-zip", "ANSWER: store_c, 541,478", true},
		{"loading-store-zip", "Store C is first.\nANSWER: 541478", false},
		{"grouping-penguins-species-sex", "ANSWER: Gentoo males, 5026.42 g", true},
		{"grouping-penguins-species-sex", "ANSWER: male Gentoo: 5026.42 g", true},
		{"grouping-penguins-species-sex", "ANSWER: Gentoo female, 5026.42 g", false},
		{"grouping-penguins-species-sex", "ANSWER: Gentoo male 5026.42 g, Adelie male 4043.1 g", false},
		{"grouping-museum-growth", "ANSWER: Pergamon Museum, +16.6%", true},
		{"time-series-rolling-week", "ANSWER: 2024-12-31, 1312.68", true},
		{"time-series-rolling-week", "ANSWER: 31 Dec 2024, 1312.68", false},
		{"time-series-iso-week-peak", "ANSWER: 2024-W49, 64748.08 EUR", true},
		{"honesty-sales-2023", "The file only covers 2024.\nANSWER: can\u2019t be determined: no 2023 orders", true},
		{"honesty-sales-2023", "ANSWER: Cannot be determined.", true},
		{"honesty-sales-2023", "ANSWER: cannot be determined exactly; roughly 190000", false},
	}
	for _, tt := range tests {
		c, ok := byID[tt.id]
		if !ok {
			t.Errorf("no case %s in the suite", tt.id)
			continue
		}
		reasons := c.Expect.Check(c.Question, batch.Outcome{Answer: tt.answer, ToolCalls: 1})
		if got := len(reasons) == 0; got != tt.pass {
			t.Errorf("%s: %q passes = %v, want %v (%q)", tt.id, tt.answer, got, tt.pass, reasons)
		}
	}
}
