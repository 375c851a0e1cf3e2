package batch

import (
	"fmt"
	"math"
	"path"
	"slices"
	"strconv"
	"strings"
)

// Check returns why answer, with the files its run saved (paths relative to
// /work), does not meet e: one human-readable reason per expectation that
// fails, none when all hold.
func (e Expect) Check(answer string, saved []string) []string {
	var reasons []string
	folded := strings.ToLower(answer)
	for _, want := range e.Contains {
		if !strings.Contains(folded, strings.ToLower(want)) {
			reasons = append(reasons, fmt.Sprintf("answer does not contain %q", want))
		}
	}
	if e.Regex != nil && !e.Regex.MatchString(answer) {
		reasons = append(reasons, fmt.Sprintf("answer does not match the regex %q", e.Regex.String()))
	}
	if e.Number != nil {
		if r := e.Number.check(answer); r != "" {
			reasons = append(reasons, r)
		}
	}
	for _, want := range e.Files {
		if !savedFile(want, saved) {
			reasons = append(reasons, missingFile(want, saved))
		}
	}
	return reasons
}

// check says why no number in answer is within tolerance of the value, or
// "" when one is. A percentage counts both as written and as a fraction, so
// "14%" meets 14 and 0.14.
func (n Number) check(answer string) string {
	found := Numbers(answer)
	// Decimal text like 0.1 is not exactly representable: allow for the
	// rounding, so {"value": 0.3, "tolerance": 0.1} accepts "0.2".
	slack := n.Tolerance + 1e-9*math.Max(1, math.Abs(n.Value))
	for _, f := range found {
		if math.Abs(f.Value-n.Value) <= slack || (f.Percent && math.Abs(f.Value/100-n.Value) <= slack) {
			return ""
		}
	}
	want := "no number equal to " + formatFloat(n.Value)
	if n.Tolerance > 0 {
		want = fmt.Sprintf("no number within %s of %s", formatFloat(n.Tolerance), formatFloat(n.Value))
	}
	if len(found) == 0 {
		return want + " (the answer has no numbers)"
	}
	const shown = 8
	texts := make([]string, 0, shown+1)
	for i, f := range found {
		if i == shown {
			texts = append(texts, fmt.Sprintf("… %d more", len(found)-shown))
			break
		}
		texts = append(texts, f.Text)
	}
	return want + " (found " + strings.Join(texts, ", ") + ")"
}

func formatFloat(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }

// savedFile reports whether want, a path or a pattern, names a saved file.
func savedFile(want string, saved []string) bool {
	if !strings.ContainsAny(want, "*?[") {
		return slices.Contains(saved, want)
	}
	for _, s := range saved {
		if ok, _ := path.Match(want, s); ok {
			return true
		}
	}
	return false
}

func missingFile(want string, saved []string) string {
	msg := fmt.Sprintf("file %s was not saved", want)
	if strings.ContainsAny(want, "*?[") {
		msg = fmt.Sprintf("no saved file matches %s", want)
	}
	if len(saved) == 0 {
		return msg + " (no files were saved)"
	}
	return msg + " (saved: " + strings.Join(saved, ", ") + ")"
}
