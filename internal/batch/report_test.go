package batch

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/terpdev/terp/internal/llm"
)

// results judges outcomes for the runs of a plan: verdicts[i] for runs[i],
// "p" passed, "f" failed, "e" errored, "-" not finished.
func results(runs []Run, verdicts string) []Result {
	var out []Result
	for i, v := range verdicts {
		o := Outcome{Answer: "42", StopReason: "answered", Steps: 2, Usage: llm.Usage{TotalTokens: 100 * (i + 1)}}
		switch v {
		case '-':
			continue
		case 'f':
			o.Answer = "41"
		case 'e':
			o.Err = errString("HTTP 500 \x1b[31m")
		}
		out = append(out, Judge(runs[i], o, time.Duration(i+1)*time.Second))
	}
	return out
}

func fourCases() []Case {
	var cases []Case
	for _, id := range []string{"a", "b", "c", "d"} {
		cases = append(cases, Case{ID: id, Line: len(cases) + 1, Question: "q", Expect: Expect{Contains: []string{"42"}}})
	}
	return cases
}

func TestSummarizePassAtK(t *testing.T) {
	// Two models, three runs of four cases, in plan order: round 1 (a b c
	// d for m1 and m2 interleaved), round 2, round 3.
	runs := Plan(fourCases(), []string{"m1", "m2"}, "", 3)
	// m1: a passes 3/3, b 1/3, c 0/3, d errors once and passes twice.
	// m2: passes everything but d's last run, which never finished.
	verdicts := "" +
		"pp" + "fp" + "fp" + "ep" + // round 1: a b c d, each m1 then m2
		"pp" + "pp" + "fp" + "pp" +
		"pp" + "fp" + "fp" + "p-"
	stats := Summarize(runs, results(runs, verdicts))
	m1, m2 := stats[0], stats[1]
	if m1.Model != "m1" || m1.Runs != 12 || m1.Passed != 6 || m1.Failed != 5 || m1.Errored != 1 || m1.Cases != 4 || m1.Repeat != 3 {
		t.Errorf("m1 = %+v", m1)
	}
	near := func(a, b float64) bool { return math.Abs(a-b) < 1e-9 }
	if !near(m1.PassAt1, 6.0/12) || !near(m1.PassAtK, 3.0/4) || !near(m1.PassAllK, 1.0/4) {
		t.Errorf("m1 pass@1 %v pass@3 %v pass^3 %v, want 0.5, 0.75, 0.25", m1.PassAt1, m1.PassAtK, m1.PassAllK)
	}
	if m2.Runs != 12 || m2.Finished() != 11 || !near(m2.PassAt1, 1) || !near(m2.PassAtK, 1) || !near(m2.PassAllK, 3.0/4) {
		t.Errorf("m2 = %+v; want 11 of 12 finished, all passed; d, with a run missing, not counted as passing all 3", m2)
	}
	if !near(m1.MeanSteps, 2) || m1.MeanTime <= 0 || m1.MeanTokens <= 0 {
		t.Errorf("m1 means = %v steps, %v tokens, %v", m1.MeanSteps, m1.MeanTokens, m1.MeanTime)
	}

	var b bytes.Buffer
	if err := WriteSummary(&b, stats, results(runs, verdicts)); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{
		"MODEL  RUNS   PASSED  FAILED  ERRORED  PASS@1  PASS@3  PASS^3",
		"m1     12/12  6       5       1        50.0%   75.0%   25.0%",
		"m2     11/12  11      0       0        100.0%  100.0%  75.0%",
		"pass@1: share of runs that passed; pass@3: share of cases that passed in at least one of 3 runs",
		`FAILED b [m1, run 1]: answer does not contain "42"`,
		"ERRORED d [m1, run 1]: HTTP 500 ",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("summary does not say %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "\x1b") {
		t.Errorf("summary prints an escape sequence from a reason:\n%q", out)
	}
}

func TestSummaryOfOneRun(t *testing.T) {
	runs := Plan(fourCases(), nil, "qwen3", 1)
	res := results(runs, "pfpp")
	var b bytes.Buffer
	if err := WriteSummary(&b, Summarize(runs, res), res); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"MODEL  PASSED  FAILED  ERRORED  PASS RATE  STEPS  TOKENS  TIME", "qwen3  3/4     1       0        75.0%      2.0    250     2.5s", "FAILED b: "} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("summary does not say %q:\n%s", want, b.String())
		}
	}
}

// junitReport is the part of JUnit XML that CI systems read.
type junitReport struct {
	XMLName  xml.Name `xml:"testsuites"`
	Tests    int      `xml:"tests,attr"`
	Failures int      `xml:"failures,attr"`
	Errors   int      `xml:"errors,attr"`
	Skipped  int      `xml:"skipped,attr"`
	Suites   []struct {
		Name     string `xml:"name,attr"`
		Tests    int    `xml:"tests,attr"`
		Failures int    `xml:"failures,attr"`
		Errors   int    `xml:"errors,attr"`
		Skipped  int    `xml:"skipped,attr"`
		Cases    []struct {
			Name      string `xml:"name,attr"`
			Classname string `xml:"classname,attr"`
			Time      string `xml:"time,attr"`
			Failure   *struct {
				Message string `xml:"message,attr"`
				Text    string `xml:",chardata"`
			} `xml:"failure"`
			Error *struct {
				Message string `xml:"message,attr"`
			} `xml:"error"`
			Skipped *struct {
				Message string `xml:"message,attr"`
			} `xml:"skipped"`
			SystemOut string `xml:"system-out"`
		} `xml:"testcase"`
	} `xml:"testsuite"`
}

func TestWriteJUnit(t *testing.T) {
	runs := Plan(fourCases(), []string{"m1", "m2"}, "", 1)
	res := results(runs, "pp"+"fp"+"ep"+"p-")
	var b bytes.Buffer
	if err := WriteJUnit(&b, Report{Name: "cases", File: "cases.jsonl", Started: time.Now()}, runs, res); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(b.String(), `<?xml version="1.0" encoding="UTF-8"?>`) {
		t.Errorf("no XML header:\n%s", b.String())
	}
	var rep junitReport
	if err := xml.Unmarshal(b.Bytes(), &rep); err != nil {
		t.Fatalf("the report does not parse: %v\n%s", err, b.String())
	}
	if rep.Tests != 8 || rep.Failures != 1 || rep.Errors != 1 || rep.Skipped != 1 || len(rep.Suites) != 2 {
		t.Fatalf("totals: %d tests, %d failures, %d errors, %d skipped, %d suites; want 8, 1, 1, 1, 2", rep.Tests, rep.Failures, rep.Errors, rep.Skipped, len(rep.Suites))
	}
	m1 := rep.Suites[0]
	if m1.Name != "cases (m1)" || m1.Tests != 4 || m1.Failures != 1 || m1.Errors != 1 || m1.Skipped != 0 {
		t.Errorf("suite m1 = %s: %d tests, %d failures, %d errors", m1.Name, m1.Tests, m1.Failures, m1.Errors)
	}
	b1 := m1.Cases[1]
	if b1.Name != "b" || b1.Classname != "cases.m1" || b1.Failure == nil || b1.Failure.Message != `answer does not contain "42"` || b1.Time != "3.000" {
		t.Errorf("failed case = %+v", b1)
	}
	if c1 := m1.Cases[2]; c1.Error == nil || !strings.HasPrefix(c1.Error.Message, "HTTP 500 \uFFFD[31m") {
		t.Errorf("errored case = %+v; want an error element, with the escape character replaced", c1)
	}
	if !strings.Contains(m1.Cases[0].SystemOut, "42") {
		t.Errorf("the answer is not in system-out: %q", m1.Cases[0].SystemOut)
	}
	if d2 := rep.Suites[1].Cases[3]; d2.Skipped == nil || !strings.Contains(d2.Skipped.Message, "interrupted") {
		t.Errorf("the unfinished run = %+v, want skipped", d2)
	}
}

func TestResultsFile(t *testing.T) {
	runs := Plan(fourCases(), nil, "m", 1)
	res := results(runs, "pfep")
	p := filepath.Join(t.TempDir(), "results.jsonl")
	w, err := CreateResults(p)
	if err != nil {
		t.Fatal(err)
	}
	// As the runs finish, out of order: each line is in the file at once.
	for i, r := range []Result{res[2], res[0]} {
		if err := w.Append(r); err != nil {
			t.Fatal(err)
		}
		b, _ := os.ReadFile(p)
		if n := strings.Count(string(b), "\n"); n != i+1 {
			t.Fatalf("after %d appends the file has %d lines", i+1, n)
		}
	}
	if err := w.Finish(res); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(p)
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) != 4 {
		t.Fatalf("%d lines, want 4:\n%s", len(lines), b)
	}
	for i, want := range []string{"a", "b", "c", "d"} {
		var got map[string]any
		if err := json.Unmarshal([]byte(lines[i]), &got); err != nil {
			t.Fatal(err)
		}
		if got["id"] != want {
			t.Errorf("line %d is case %v, want %s (suite order)", i+1, got["id"], want)
		}
		for _, k := range []string{"id", "model", "run", "status", "answer", "reasons", "stop_reason", "steps", "usage", "duration_ms", "files", "conversation_id", "line"} {
			if _, ok := got[k]; !ok {
				t.Errorf("line %d has no %q: %s", i+1, k, lines[i])
			}
		}
	}
}
