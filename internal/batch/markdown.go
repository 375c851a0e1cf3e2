package batch

import (
	"cmp"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/terpdev/terp/internal/sanitize"
)

// WriteMarkdown writes a batch's report as Markdown, for a pull request, a
// wiki or docs/eval.md: per model its pass@1 (and with repeats pass@K and
// pass^K) and the medians of steps, tokens and wall time per run; the
// pass@1 of each level and each skill; and each run that did not pass with
// its reasons. Text from answers and reasons cannot break the tables.
func WriteMarkdown(w io.Writer, rep Report, runs []Run, results []Result) error {
	stats := Summarize(runs, results)
	repeat := 1
	for _, s := range stats {
		repeat = max(repeat, s.Repeat)
	}
	k := strconv.Itoa(repeat)
	b := &strings.Builder{}
	cases := map[string]bool{}
	for _, run := range runs {
		cases[run.Case.ID] = true
	}
	fmt.Fprintf(b, "# Batch report: %s\n\n", cell(rep.File))
	fmt.Fprintf(b, "%d cases", len(cases))
	if repeat > 1 {
		fmt.Fprintf(b, ", %d runs each", repeat)
	}
	fmt.Fprintf(b, ", started %s", rep.Started.UTC().Format("2006-01-02 15:04 UTC"))
	if rep.Version != "" {
		fmt.Fprintf(b, ", %s", cell(rep.Version))
	}
	fmt.Fprintf(b, ". %d of %d runs finished.\n\n", len(results), len(runs))

	b.WriteString("## Models\n\n")
	head := []string{"model", "cases", "pass@1", "95% interval"}
	if repeat > 1 {
		head = append(head, "pass@"+k, "pass^"+k)
	}
	head = append(head, "passed / failed / errored runs", "median steps", "median tokens", "median time")
	row(b, head...)
	align(b, len(head), 1)
	for _, s := range stats {
		r := []string{cell(s.Model), strconv.Itoa(s.Cases), percent(s.PassAt1, s), interval(s)}
		if repeat > 1 {
			r = append(r, percent(s.PassAtK, s), percent(s.PassAllK, s))
		}
		r = append(r, fmt.Sprintf("%d / %d / %d", s.Passed, s.Failed, s.Errored))
		if s.Finished() == 0 {
			r = append(r, "-", "-", "-")
		} else {
			r = append(r, strconv.FormatFloat(s.MedianSteps, 'f', -1, 64), thousands(int64(s.MedianTokens+0.5)),
				s.MedianTime.Round(100*time.Millisecond).String())
		}
		row(b, r...)
	}
	b.WriteString("\npass@1 is the share of runs that passed")
	if repeat > 1 {
		fmt.Fprintf(b, "; pass@%s the share of cases that passed in at least one of their %s runs, "+
			"pass^%s in all %s (how often a user would get it right every time)", k, k, k, k)
	}
	b.WriteString(". The 95% interval (Wilson) is the range of pass rates these runs are consistent with")
	if repeat > 1 {
		b.WriteString(", counting every run")
	}
	b.WriteString(". Steps, tokens (prompt and completion) and wall time are the medians of the finished runs.\n")
	if sep := Separation(stats); len(sep) > 0 {
		b.WriteString("\n### Can these models be told apart?\n\n")
		for _, s := range sep {
			b.WriteString("- " + cell(s) + "\n")
		}
	}

	breakdown(b, "Levels", "level", repeat, runs, results, stats, func(c *Case) string { return c.Level }, Levels)
	breakdown(b, "Skills", "skill", repeat, runs, results, stats, func(c *Case) string { return c.Skill }, nil)

	var bad []Result
	for _, r := range results {
		if r.Status != Passed {
			bad = append(bad, r)
		}
	}
	if len(bad) > 0 {
		b.WriteString("\n## Not passed\n\n")
		row(b, "case", "model", "run", "status", "reasons", "answer")
		align(b, 6, 0)
		for _, r := range bad {
			row(b, cell(r.ID), cell(r.Model), strconv.Itoa(r.Run), string(r.Status),
				cell(clipText(strings.Join(r.Reasons, "; "), 400)), cell(clipText(r.Answer, 300)))
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// breakdown writes the pass@1 (and with repeats pass@K and pass^K) of
// each model on the cases of each value of key (a level, a skill), in order
// (the values of the cases, sorted, when order is nil); nothing when no
// case has one.
func breakdown(b *strings.Builder, title, what string, repeat int, runs []Run, results []Result, stats []Stats, key func(*Case) string, order []string) {
	values, count, per := breakdownStats(runs, results, key, order)
	if len(values) == 0 {
		return
	}
	rates := "pass@1 (95% interval)"
	if repeat > 1 {
		rates = fmt.Sprintf("pass@1 (95%% interval) / pass@%d / pass^%d", repeat, repeat)
	}
	fmt.Fprintf(b, "\n## %s\n\n%s per %s (its number of cases in brackets):\n\n", title, rates, what)
	head := []string{"model"}
	for _, v := range values {
		head = append(head, fmt.Sprintf("%s (%d)", cell(v), count[v]))
	}
	row(b, head...)
	align(b, len(head), 1)
	for _, s := range stats {
		r := []string{cell(s.Model)}
		for _, v := range values {
			st, ok := per[s.Model+"\x00"+v]
			if !ok {
				r = append(r, "-")
				continue
			}
			c := percent(st.PassAt1, st)
			if st.Finished() > 0 {
				c += " (" + interval(st) + ")"
			}
			if repeat > 1 {
				c += " / " + percent(st.PassAtK, st) + " / " + percent(st.PassAllK, st)
			}
			r = append(r, c)
		}
		row(b, r...)
	}
}

// breakdownStats sums up each model's runs on the cases of each value of
// key (a level, a skill): the values in order (the values of the cases,
// sorted, when order is nil), how many cases have each, and the Stats by
// model and value, joined by a NUL.
func breakdownStats(runs []Run, results []Result, key func(*Case) string, order []string) ([]string, map[string]int, map[string]Stats) {
	count := map[string]map[string]bool{} // value, case id
	for _, run := range runs {
		if v := key(run.Case); v != "" {
			if count[v] == nil {
				count[v] = map[string]bool{}
			}
			count[v][run.Case.ID] = true
		}
	}
	var values []string
	for _, v := range order {
		if count[v] != nil {
			values = append(values, v)
		}
	}
	if order == nil {
		for v := range count {
			values = append(values, v)
		}
		slices.Sort(values)
	}
	keyOf := map[int]string{} // run seq
	for _, run := range runs {
		keyOf[run.Seq] = key(run.Case)
	}
	per := map[string]Stats{}
	n := map[string]int{}
	for _, v := range values {
		n[v] = len(count[v])
		sub := slices.DeleteFunc(slices.Clone(runs), func(r Run) bool { return key(r.Case) != v })
		subResults := slices.DeleteFunc(slices.Clone(results), func(r Result) bool { return keyOf[r.seq] != v })
		for _, s := range Summarize(sub, subResults) {
			per[s.Model+"\x00"+v] = s
		}
	}
	return values, n, per
}

// row writes one table row.
func row(b *strings.Builder, cells ...string) {
	b.WriteString("| " + strings.Join(cells, " | ") + " |\n")
}

// align writes the line under a table's head: the first text columns left,
// the rest (numbers) right, from column from on.
func align(b *strings.Builder, n, from int) {
	cols := make([]string, n)
	for i := range cols {
		cols[i] = "---"
		if i >= from && from > 0 {
			cols[i] = "---:"
		}
	}
	row(b, cols...)
}

// cell is text made safe for a table cell: one line, no control or
// terminal characters, its pipes and Markdown's markup escaped, so an
// answer cannot close the table, add a heading or a link, or hide text.
func cell(s string) string {
	s = sanitize.Terminal(oneLine(s))
	var b strings.Builder
	for _, r := range s {
		if strings.ContainsRune("\\`*_[]<>|~&", r) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}

// clipText cuts s to about n characters, saying so.
func clipText(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n]) + "…"
}

// median is the middle of xs (the mean of the two middle ones for an even
// count); 0 for none.
func median[T cmp.Ordered](xs []T, mean func(a, b T) T) T {
	if len(xs) == 0 {
		var zero T
		return zero
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return mean(s[len(s)/2-1], s[len(s)/2])
}
