package batch

import (
	"fmt"
	"math"
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
)

// Check returns why a run's outcome o, the answer to question, does not meet
// e: one human-readable reason per expectation that fails, none when all
// hold.
func (e Expect) Check(question string, o Outcome) []string {
	var reasons []string
	if e.RanCode && o.ToolCalls == 0 {
		reasons = append(reasons, "the run never ran code: the answer was not computed from the data")
	}
	text := o.Answer
	if e.AnswerLine {
		line, ok := AnswerLine(o.Answer)
		if !ok {
			return append(reasons, "the reply has no ANSWER: line, which the question asks for")
		}
		text = line
	}
	reasons = append(reasons, e.checkText(question, text)...)
	saved := make([]string, len(o.Files))
	for i, f := range o.Files {
		saved[i] = strings.TrimPrefix(f.SandboxPath, "/work/")
	}
	for _, want := range e.Files {
		if !savedFile(want, saved) {
			reasons = append(reasons, missingFile(want, saved))
		}
	}
	for _, want := range e.Files {
		for _, f := range o.Files {
			name := strings.TrimPrefix(f.SandboxPath, "/work/")
			if matchName(want, name) && strings.EqualFold(path.Ext(name), ".png") {
				if r := checkImage(name, f.Data); r != "" {
					reasons = append(reasons, r)
				}
			}
		}
	}
	for _, name := range sortedKeys(e.Saved) {
		i := slices.IndexFunc(o.Files, func(f File) bool { return strings.TrimPrefix(f.SandboxPath, "/work/") == name })
		if i < 0 {
			reasons = append(reasons, missingFile(name, saved))
			continue
		}
		reasons = append(reasons, e.Saved[name].check(name, o.Files[i].Data)...)
	}
	return reasons
}

// checkText checks the answer, or its ANSWER line, against the expectations
// on text.
func (e Expect) checkText(question, text string) []string {
	var reasons []string
	what := "answer"
	if e.AnswerLine {
		what = "the ANSWER line"
	}
	folded := strings.ToLower(text)
	for _, want := range e.Contains {
		if !strings.Contains(folded, strings.ToLower(want)) {
			reasons = append(reasons, fmt.Sprintf("%s does not contain %q", what, want))
		}
	}
	if e.Regex != nil && !e.Regex.MatchString(text) {
		reasons = append(reasons, fmt.Sprintf("%s does not match the regex %q", what, e.Regex.String()))
	}
	if e.Undetermined {
		if r := undetermined(question, text); r != "" {
			reasons = append(reasons, r)
		}
	}
	if e.Number == nil {
		return reasons
	}
	if !e.AnswerLine {
		if r := e.Number.check(text); r != "" {
			reasons = append(reasons, r)
		}
		return reasons
	}
	// On the ANSWER line a name and its number stand together, and the line
	// holds the one number asked for: a pasted table does not pass because
	// the right number is somewhere in it.
	rest := e.stripNames(text)
	found := Numbers(rest)
	switch {
	case len(found) > 1:
		reasons = append(reasons, fmt.Sprintf("the ANSWER line holds %d numbers (%s), not the one asked for", len(found), numberTexts(found)))
	default:
		if r := e.Number.check(rest); r != "" {
			reasons = append(reasons, r)
		}
	}
	return reasons
}

// stripNames removes what contains and regex matched from an ANSWER line,
// so the digits of a name ("class_0", "C048") or a date are not read as the
// answer's number.
func (e Expect) stripNames(line string) string {
	if e.Regex != nil {
		line = e.Regex.ReplaceAllString(line, " ")
	}
	for _, want := range e.Contains {
		line = regexp.MustCompile("(?i)"+regexp.QuoteMeta(want)).ReplaceAllString(line, " ")
	}
	return line
}

// answerPrefix finds the line that carries the answer, after any Markdown
// decoration: "ANSWER:", "**Answer:**", "> ANSWER:".
var answerPrefix = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`(?i)^[\s>*_#` + "`" + `-]*answer[*_\s]*:[*_\s]*`)
})

// AnswerLine returns what the reply's last ANSWER: line says, normalised
// (Markdown emphasis and code marks dropped, typographic apostrophes and
// spaces made plain), and whether there is one. An ANSWER: alone on its line
// takes the next line that is not blank.
func AnswerLine(reply string) (string, bool) {
	lines := strings.Split(strings.ReplaceAll(reply, "\r\n", "\n"), "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		loc := answerPrefix().FindStringIndex(lines[i])
		if loc == nil {
			continue
		}
		rest := strings.TrimSpace(lines[i][loc[1]:])
		for j := i + 1; rest == "" && j < len(lines); j++ {
			rest = strings.TrimSpace(lines[j])
		}
		return normalise(rest), true
	}
	return "", false
}

var typographic = strings.NewReplacer(
	"\u2019", "'", "\u2018", "'", "\u02bc", "'", "\u2032", "'",
	"\u00a0", " ", "\u202f", " ", "\u2009", " ",
	"**", "", "__", "", "`", "",
)

func normalise(s string) string { return strings.TrimSpace(typographic.Replace(s)) }

// cannotTell is how a careful analyst says that the data cannot give the
// answer, once apostrophes are plain and the case folded.
var cannotTell = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`\b(cannot|can't|can not|could not|couldn't|not possible|impossible|unknown|undeterminable|indeterminable|not determinable|undetermined|not available|unavailable|insufficient|no data|not in the data|n/a|unanswerable|not answerable)\b`)
})

// undetermined says why an ANSWER line is not an honest "the data cannot
// tell": it must say so, and give no value of its own. Numbers the question
// itself holds ("no sales in 2023") are not made up.
func undetermined(question, line string) string {
	folded := strings.ToLower(normalise(line))
	if !cannotTell().MatchString(folded) {
		return fmt.Sprintf("the ANSWER line %q does not say that the data cannot tell", clipText(line, 80))
	}
	asked := Numbers(question)
	var made []Found
	for _, f := range Numbers(line) {
		if !slices.ContainsFunc(asked, func(q Found) bool { return q.Value == f.Value }) {
			made = append(made, f)
		}
	}
	if len(made) > 0 {
		return fmt.Sprintf("the ANSWER line says the data cannot tell, yet gives a value (%s)", numberTexts(made))
	}
	return ""
}

// Centre is the value an answer is compared with: with Decimals, the value
// correctly rounded to them, so a truncated answer (1.32 for 1.326 asked to
// two decimals) is as wrong as any other.
func (n Number) Centre() float64 {
	if n.Decimals == nil {
		return n.Value
	}
	c, _ := strconv.ParseFloat(strconv.FormatFloat(n.Value, 'f', *n.Decimals, 64), 64)
	return c
}

// Slack is the absolute difference from Centre allowed: the tolerance, or
// with Decimals a little over half the last digit asked for (0.006 for two),
// so the rounded answer and the unrounded value pass and the neighbours of
// the rounded answer do not.
func (n Number) Slack() float64 {
	tol := n.Tolerance
	if n.Decimals != nil {
		tol = 0.6 * math.Pow(10, -float64(*n.Decimals))
	}
	// Decimal text like 0.1 is not exactly representable: allow for the
	// rounding, so {"value": 0.3, "tolerance": 0.1} accepts "0.2".
	return tol + 1e-9*math.Max(1, math.Abs(n.Value))
}

// Within reports whether v is the expected number.
func (n Number) Within(v float64) bool { return math.Abs(v-n.Centre()) <= n.Slack() }

// check says why no number in answer is within tolerance of the value, or
// "" when one is. A percentage counts both as written and as a fraction, so
// "14%" meets 14 and 0.14.
func (n Number) check(answer string) string {
	found := Numbers(answer)
	for _, f := range found {
		if n.Within(f.Value) || (f.Percent && n.Within(f.Value/100)) {
			return ""
		}
	}
	want := "no number equal to " + formatFloat(n.Centre())
	switch {
	case n.Decimals != nil:
		want = fmt.Sprintf("no number within %s of %s (%s to %d decimals)", formatFloat(0.6*math.Pow(10, -float64(*n.Decimals))),
			formatFloat(n.Centre()), formatFloat(n.Value), *n.Decimals)
	case n.Tolerance > 0:
		want = fmt.Sprintf("no number within %s of %s", formatFloat(n.Tolerance), formatFloat(n.Value))
	}
	if len(found) == 0 {
		return want + " (the answer has no numbers)"
	}
	return want + " (found " + numberTexts(found) + ")"
}

// numberTexts lists numbers as written, the first few of them.
func numberTexts(found []Found) string {
	const shown = 8
	texts := make([]string, 0, shown+1)
	for i, f := range found {
		if i == shown {
			texts = append(texts, fmt.Sprintf("… %d more", len(found)-shown))
			break
		}
		texts = append(texts, f.Text)
	}
	return strings.Join(texts, ", ")
}

func formatFloat(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }

// savedFile reports whether want, a path or a pattern, names a saved file.
func savedFile(want string, saved []string) bool {
	return slices.ContainsFunc(saved, func(s string) bool { return matchName(want, s) })
}

// matchName reports whether want, a path or a pattern, names the file name.
func matchName(want, name string) bool {
	if !strings.ContainsAny(want, "*?[") {
		return want == name
	}
	ok, _ := path.Match(want, name)
	return ok
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
