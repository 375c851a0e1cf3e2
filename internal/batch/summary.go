package batch

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/terpdev/terp/internal/sanitize"
)

// Stats sum up one model's runs.
type Stats struct {
	Model string
	// Runs counts the planned runs; Passed, Failed and Errored the finished
	// ones by verdict. Runs left over were cut short by an interrupt.
	Runs, Passed, Failed, Errored int
	// Cases counts the cases with at least one finished run, and Repeat the
	// runs planned per case.
	Cases, Repeat int
	// PassAt1 is the share of finished runs that passed: the mean per-run
	// pass rate, an estimate of the chance that one run passes.
	PassAt1 float64
	// Lo and Hi bound the 95% Wilson interval of PassAt1, over all the
	// finished runs.
	Lo, Hi float64
	// PassAtK is the share of cases (with a finished run) that passed in at
	// least one of their runs, and PassAllK the share that passed in all of
	// their Repeat runs. With one run per case, both equal PassAt1.
	PassAtK, PassAllK float64
	// MeanSteps, MeanTokens and MeanTime are per finished run, and so are
	// the medians.
	MeanSteps, MeanTokens     float64
	MeanTime                  time.Duration
	MedianSteps, MedianTokens float64
	MedianTime                time.Duration
}

// Finished counts the runs that have a verdict.
func (s Stats) Finished() int { return s.Passed + s.Failed + s.Errored }

// Summarize computes each model's Stats, in the order models first appear
// in runs.
func Summarize(runs []Run, results []Result) []Stats {
	var stats []Stats
	index := map[string]int{}
	type caseRuns struct{ planned, finished, passed int }
	perCase := map[string]map[string]*caseRuns{} // model, case id
	for _, run := range runs {
		i, ok := index[run.Model]
		if !ok {
			i = len(stats)
			index[run.Model] = i
			stats = append(stats, Stats{Model: run.Model})
			perCase[run.Model] = map[string]*caseRuns{}
		}
		stats[i].Runs++
		c := perCase[run.Model][run.Case.ID]
		if c == nil {
			c = &caseRuns{}
			perCase[run.Model][run.Case.ID] = c
		}
		c.planned++
	}
	steps := make([][]float64, len(stats))
	tokens := make([][]float64, len(stats))
	took := make([][]time.Duration, len(stats))
	for _, r := range results {
		i, ok := index[r.Model]
		if !ok {
			continue
		}
		s := &stats[i]
		switch r.Status {
		case Passed:
			s.Passed++
		case Failed:
			s.Failed++
		default:
			s.Errored++
		}
		steps[i] = append(steps[i], float64(r.Steps))
		tokens[i] = append(tokens[i], float64(r.Usage.TotalTokens))
		took[i] = append(took[i], r.Duration())
		c := perCase[r.Model][r.ID]
		c.finished++
		if r.Status == Passed {
			c.passed++
		}
	}
	for i := range stats {
		s := &stats[i]
		n := s.Finished()
		if n == 0 {
			continue
		}
		s.PassAt1 = float64(s.Passed) / float64(n)
		s.Lo, s.Hi = Wilson(s.Passed, n)
		s.MeanSteps = sum(steps[i]) / float64(n)
		s.MeanTokens = sum(tokens[i]) / float64(n)
		s.MeanTime = sum(took[i]) / time.Duration(n)
		mid := func(a, b float64) float64 { return (a + b) / 2 }
		s.MedianSteps = median(steps[i], mid)
		s.MedianTokens = median(tokens[i], mid)
		s.MedianTime = median(took[i], func(a, b time.Duration) time.Duration { return (a + b) / 2 })
		var some, all int
		for _, c := range perCase[s.Model] {
			s.Repeat = max(s.Repeat, c.planned)
			if c.finished == 0 {
				continue
			}
			s.Cases++
			if c.passed > 0 {
				some++
			}
			if c.passed == c.planned {
				all++
			}
		}
		s.PassAtK = float64(some) / float64(s.Cases)
		s.PassAllK = float64(all) / float64(s.Cases)
	}
	return stats
}

func sum[T int | float64 | time.Duration](xs []T) T {
	var t T
	for _, x := range xs {
		t += x
	}
	return t
}

// WriteSummary writes the comparison table, one row per model, then a line
// that says what the columns mean, then the runs that did not pass with
// their reasons.
func WriteSummary(w io.Writer, stats []Stats, results []Result) error {
	repeat := 1
	for _, s := range stats {
		repeat = max(repeat, s.Repeat)
	}
	k := strconv.Itoa(repeat)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	head := []string{"MODEL", "PASSED", "FAILED", "ERRORED", "PASS RATE"}
	if repeat > 1 {
		head = []string{"MODEL", "RUNS", "PASSED", "FAILED", "ERRORED", "PASS@1", "PASS@" + k, "PASS^" + k}
	}
	head = append(head, "STEPS", "TOKENS", "TIME")
	fmt.Fprintln(tw, strings.Join(head, "\t"))
	for _, s := range stats {
		var row []string
		if repeat > 1 {
			row = []string{sanitize.Terminal(s.Model), fmt.Sprintf("%d/%d", s.Finished(), s.Runs), strconv.Itoa(s.Passed),
				strconv.Itoa(s.Failed), strconv.Itoa(s.Errored), percent(s.PassAt1, s), percent(s.PassAtK, s), percent(s.PassAllK, s)}
		} else {
			row = []string{sanitize.Terminal(s.Model), fmt.Sprintf("%d/%d", s.Passed, s.Runs), strconv.Itoa(s.Failed),
				strconv.Itoa(s.Errored), percent(s.PassAt1, s)}
		}
		row = append(row, fmt.Sprintf("%.1f", s.MeanSteps), thousands(int64(s.MeanTokens+0.5)), s.MeanTime.Round(100*time.Millisecond).String())
		fmt.Fprintln(tw, strings.Join(row, "\t"))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if repeat > 1 {
		fmt.Fprintf(w, "pass@1: share of runs that passed; pass@%s: share of cases that passed in at least one of %s runs; "+
			"pass^%s: in all %s. Steps, tokens and time: mean per run.\n", k, k, k, k)
	} else {
		fmt.Fprintln(w, "Steps, tokens and time: mean per case.")
	}
	var bad []Result
	for _, r := range results {
		if r.Status != Passed {
			bad = append(bad, r)
		}
	}
	if len(bad) == 0 {
		return nil
	}
	fmt.Fprintln(w, "\nNot passed:")
	for _, r := range bad {
		fmt.Fprintf(w, "  %s %s: %s\n", strings.ToUpper(string(r.Status)), Label(r, len(stats) > 1, repeat > 1),
			sanitize.Terminal(oneLine(strings.Join(r.Reasons, "; "))))
	}
	return nil
}

// Label names a result for a person: its case id, with the model when
// models are compared and the run when cases repeat. It is safe to print.
func Label(r Result, withModel, withRun bool) string {
	l := r.ID
	switch {
	case withModel && withRun:
		l += fmt.Sprintf(" [%s, run %d]", r.Model, r.Run)
	case withModel:
		l += " [" + r.Model + "]"
	case withRun:
		l += fmt.Sprintf(" [run %d]", r.Run)
	}
	return sanitize.Terminal(l)
}

// oneLine joins the lines of a reason, for a summary line.
func oneLine(s string) string {
	return strings.Join(strings.Fields(strings.ReplaceAll(s, "\n", " ")), " ")
}

func percent(v float64, s Stats) string {
	if s.Finished() == 0 {
		return "-"
	}
	return fmt.Sprintf("%.1f%%", 100*v)
}

// thousands writes n with commas: 12,345.
func thousands(n int64) string {
	s := strconv.FormatInt(n, 10)
	for i := len(s) - 3; i > 0 && s[i-1] != '-'; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}
