package cli

import (
	"bytes"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/terpdev/terp/internal/batch"
	"github.com/terpdev/terp/internal/llm/llmtest"
	"github.com/terpdev/terp/internal/terptest"
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
	cases, err := batch.Load(evalSuite, nil)
	if err != nil {
		t.Fatal(err)
	}
	solutions := map[string]string{} // question, code
	dir := filepath.Dir(evalSuite)
	var ids []string
	for _, c := range cases {
		ids = append(ids, c.ID)
		if c.Skill == "" || c.Level == "" {
			t.Errorf("%s:%d: case %s says no skill or no level; every case of the suite says both", evalSuite, c.Line, c.ID)
		}
		code, err := os.ReadFile(filepath.Join(dir, "solutions", c.ID+".py"))
		if err != nil {
			t.Errorf("case %s has no reference solution: %v", c.ID, err)
			continue
		}
		// The matcher takes any number in the answer: one that echoes the
		// question must not pass.
		if n := c.Expect.Number; n != nil {
			for _, f := range batch.Numbers(c.Question) {
				if math.Abs(f.Value-n.Value) <= n.Tolerance {
					t.Errorf("%s:%d: case %s expects %v, which its question says (%q): an answer that repeats the question passes",
						evalSuite, c.Line, c.ID, n.Value, f.Text)
					break
				}
			}
		}
		if _, dup := solutions[c.Question]; dup {
			t.Errorf("case %s asks the question of another case", c.ID)
		}
		solutions[c.Question] = string(code)
	}
	stray, err := filepath.Glob(filepath.Join(dir, "solutions", "*.py"))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range stray {
		if id := strings.TrimSuffix(filepath.Base(p), ".py"); !slices.Contains(ids, id) {
			t.Errorf("%s is the solution of no case", p)
		}
	}
	if t.Failed() {
		return
	}

	oracle := llmtest.Each(t, func(req llmtest.Request) llmtest.Reply {
		q := askedQuestion(req)
		code, ok := solutions[q]
		if !ok {
			return llmtest.Answer("the oracle knows no solution to this question: " + q)
		}
		if opensTurn(req) {
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
	// The reports go where CI keeps what a person may look at; the
	// results and the runs' files stay in the test's directory.
	out, reports := t.TempDir(), terptest.ArtifactsDir(t)
	md, page := filepath.Join(reports, "eval-oracle-report.md"), filepath.Join(reports, "eval-oracle-report.html")
	env := homeEnv(t, map[string]string{"TERP_BASE_URL": oracle.BaseURL(), "TERP_MODEL": oracleModel})
	cmd := exec.Command(terptest.Binary(t), "batch", "--out", filepath.Join(out, "results.jsonl"),
		"--junit", filepath.Join(out, "junit.xml"), "--markdown", md, "--html", page,
		"--artifacts", filepath.Join(out, "artifacts"), evalSuite)
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	cmd.Env = append(cmd.Env, "PATH="+os.Getenv("PATH"), "CI=true")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	runErr := cmd.Run()
	results := readBatchResults(t, filepath.Join(out, "results.jsonl"))
	for _, r := range results {
		if r.Status != batch.Passed {
			t.Errorf("case %s (line %d) fails with its own reference solution: %s\n  answer: %s", r.ID, r.Line, strings.Join(r.Reasons, "; "), r.Answer)
		}
		if r.Steps != 2 {
			t.Errorf("case %s took %d steps, want the oracle's 2 (run, answer)", r.ID, r.Steps)
		}
	}
	if len(results) != len(cases) {
		t.Errorf("%d results for %d cases", len(results), len(cases))
	}
	if runErr != nil && !t.Failed() {
		t.Errorf("terp batch: %v\nstdout:\n%s\nstderr:\n%s", runErr, stdout.String(), stderr.String())
	}
	report, err := os.ReadFile(md)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(report), fmt.Sprintf("| %s | %d | 100.0%% |", oracleModel, len(cases))) ||
		!strings.Contains(string(report), "## Levels") || !strings.Contains(string(report), "## Skills") {
		t.Errorf("the Markdown report does not give the oracle every case, per level and per skill:\n%s", report)
	}
	if b, err := os.ReadFile(page); err != nil || !strings.Contains(string(b), oracleModel) {
		t.Errorf("the HTML report (%v) does not name the oracle", err)
	}
	t.Logf("%d cases pass with their reference solutions; reports %s and %s\n%s", len(results), md, page, stdout.String())
}
