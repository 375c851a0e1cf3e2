package batch

import (
	"strings"
	"testing"
	"time"
)

// The Markdown report of two models, three runs of four cases of two levels
// and two skills: each number is the share it says, and text from an answer
// stays text in its cell.
func TestWriteMarkdown(t *testing.T) {
	cases := fourCases()
	for i, lv := range []string{"easy", "easy", "hard", ""} {
		cases[i].Level = lv
	}
	for i, sk := range []string{"joins", "charts", "joins", "charts"} {
		cases[i].Skill = sk
	}
	runs := Plan(cases, []string{"m1", "m2"}, "", 3)
	// As in TestSummarizePassAtK: m1 passes a 3/3, b 1/3, c 0/3, d 2/3
	// (one error); m2 everything but d's last run, never finished.
	verdicts := "" +
		"pp" + "fp" + "fp" + "ep" +
		"pp" + "pp" + "fp" + "pp" +
		"pp" + "fp" + "fp" + "p-"
	res := results(runs, verdicts)
	for i := range res {
		if res[i].Status == Failed && res[i].ID == "c" && res[i].Run == 1 {
			res[i].Answer = "a | b\n## heading <script>alert(1)</script> [x](javascript:alert(1))"
		}
	}
	var b strings.Builder
	rep := Report{Name: "eval", File: "examples/eval/cases.jsonl", Started: time.Date(2026, 12, 1, 18, 0, 0, 0, time.UTC), Version: "terp v1"}
	if err := WriteMarkdown(&b, rep, runs, res); err != nil {
		t.Fatal(err)
	}
	md := b.String()
	t.Log("\n" + md)
	for _, want := range []string{
		"# Batch report: examples/eval/cases.jsonl\n",
		"4 cases, 3 runs each, started 2026-12-01 18:00 UTC, terp v1. 23 of 24 runs finished.",
		"| model | cases | pass@1 | 95% interval | pass@3 | pass^3 | passed / failed / errored runs | median steps | median tokens | median time |",
		// m1: 6 of 12 runs; a, b, d passed once (3/4), only a always (1/4).
		"| m1 | 4 | 50.0% | 25.4–74.6% | 75.0% | 25.0% | 6 / 5 / 1 |",
		// m2: 11 of 11 finished; d's unfinished run keeps it from pass^3.
		"| m2 | 4 | 100.0% | 74.1–100.0% | 100.0% | 75.0% | 11 / 0 / 0 |",
		// Levels: easy is a and b (m1: 4 of 6 runs; both passed once, a
		// always), hard is c (0 of 3); d has none.
		"pass@1 (95% interval) / pass@3 / pass^3 per level",
		"| model | easy (2) | hard (1) |",
		"| m1 | 66.7% (30.0–90.3%) / 100.0% / 50.0% | 0.0% (0.0–56.1%) / 0.0% / 0.0% |",
		// Skills, sorted: charts is b and d (m1: 1+2 of 6, one errored
		// run counted as not passed), joins a and c (3 of 6).
		"| model | charts (2) | joins (2) |",
		"| m1 | 50.0% (18.8–81.2%) / 100.0% / 0.0% | 50.0% (18.8–81.2%) / 50.0% / 50.0% |",
		"| m2 | 100.0% (56.6–100.0%) / 100.0% / 50.0% | 100.0% (61.0–100.0%) / 100.0% / 100.0% |",
		// 11 of 11 against 6 of 12 runs: the intervals still touch.
		"- m2 (74.1–100.0%) and m1 (25.4–74.6%): the 95% intervals overlap, so this run cannot tell them apart",
		`a \| b ## heading \<script\>alert(1)\</script\> \[x\](javascript:alert(1))`,
	} {
		if !strings.Contains(md, want) {
			t.Errorf("the report lacks %q", want)
		}
	}
	for _, bad := range []string{"<script>", "\n## heading", "[x](javascript"} {
		if strings.Contains(md, bad) {
			t.Errorf("the answer's %q reached the report as markup", bad)
		}
	}
	if strings.Count(md, "| c | m1 |") != 3 {
		t.Errorf("want c's three failed runs of m1 under Not passed")
	}
}
