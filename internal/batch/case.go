// Package batch runs many questions through terp and judges the answers:
// scripted runs for CI, and a way to compare open models on the same cases.
//
// A suite is a JSON Lines file, one case a line:
//
//	{"id": "growth", "question": "Which month grew the most?", "files": ["../sales.csv"],
//	 "expect": {"contains": ["December"], "regex": "(?i)dec", "number": {"value": 26450, "tolerance": 0.5},
//	           "files": ["chart.png"]}, "max_steps": 8, "model": "qwen3-32b",
//	 "skill": "time-series", "level": "easy"}
//
// Only question is required. The package parses and checks a suite before
// anything runs (Load), plans the runs (Plan: every case, with every model,
// repeated), runs them concurrently through a function the caller supplies
// (Runner), judges each outcome against its case's expectations (Judge) and
// reports: results as JSON Lines, JUnit XML and a summary table. It knows
// nothing of sandboxes or terminals; package cli runs each case as a stored
// conversation and draws the progress.
package batch

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode"
)

// Case is one question of a suite, checked and ready to run.
type Case struct {
	// ID names the case in results and is its directory under --artifacts;
	// it defaults to the line number.
	ID string
	// Line is the case's line in the suite file, counting from 1.
	Line     int
	Question string
	// Files are host paths, resolved against the suite file's directory,
	// uploaded to /work/<basename> before the question.
	Files  []string
	Expect Expect
	// MaxSteps and Model override the configuration when set.
	MaxSteps int
	Model    string
	// Skill and Level sort the case in reports (the pass rates per skill
	// and per level); both are optional. Level is one of Levels.
	Skill, Level string
	// FollowUps are asked in order, in the same conversation, after the
	// question was answered: they may need what the earlier turns computed.
	// The case passes only if every turn meets its expectations.
	FollowUps []FollowUp
}

// FollowUp is a later turn of a case.
type FollowUp struct {
	Question string
	Expect   Expect
}

// Levels are a case's levels, easiest first.
var Levels = []string{"easy", "medium", "hard"}

// Expect is what an answer must satisfy; every expectation set must hold.
// A case without any passes when the model answered at all.
type Expect struct {
	// Contains are texts the answer must contain, compared case-insensitively.
	Contains []string
	// Regex is matched against the answer (Go RE2 syntax; case-sensitive
	// unless it starts with (?i)).
	Regex *regexp.Regexp
	// Number, when set, must be within tolerance of some number in the answer.
	Number *Number
	// Files must have been saved (created or changed) in /work by the run.
	// A name with *, ? or [ is a pattern (path.Match). A PNG among them is
	// read back: it must be a picture of plausible size that is not blank.
	Files []string
	// Saved are files that must have been saved and what each must hold,
	// by path relative to /work.
	Saved map[string]FileCheck
	// AnswerLine makes Contains, Regex, Number and Undetermined read only
	// the reply's last "ANSWER:" line (AnswerLine), where the question asks
	// for the answer; on it the number must be the only one besides what
	// Contains and Regex match, so a name and its number stand together and
	// a pasted table does not pass.
	AnswerLine bool
	// Undetermined expects the honest answer that the data cannot tell:
	// said in words, with no value made up beside it.
	Undetermined bool
	// RanCode requires the run to have called the tool: an answer that was
	// never computed from the data does not pass, however right.
	RanCode bool
}

// Number is an expected numeric value and the absolute difference allowed,
// or the decimals the question asks for (see Centre and Slack).
type Number struct {
	Value     float64 `json:"value"`
	Tolerance float64 `json:"tolerance"`
	Decimals  *int    `json:"decimals,omitempty"`
}

// UnmarshalJSON reads a Number as a case writes it, checked.
func (n *Number) UnmarshalJSON(b []byte) error {
	got, err := parseNumber(b)
	if err != nil {
		return err
	}
	*n = *got
	return nil
}

// Error is a problem with one line of a suite. It reads like a compiler's,
// "cases.jsonl:3: ...", so editors and CI logs can jump to it.
type Error struct {
	File string
	Line int
	Msg  string
}

func (e *Error) Error() string {
	if e.Line == 0 {
		return e.File + ": " + e.Msg
	}
	return fmt.Sprintf("%s:%d: %s", e.File, e.Line, e.Msg)
}

// Errors are all the problems found in a suite, in line order.
type Errors []*Error

func (es Errors) Error() string {
	lines := make([]string, len(es))
	for i, e := range es {
		lines[i] = e.Error()
	}
	return strings.Join(lines, "\n")
}

// maxErrors bounds how many problems Load reports: enough to fix a file in
// one go, not a screenful for a file that is not JSON Lines at all.
const maxErrors = 20

// maxLine bounds one line of a suite; a question with a pasted document fits.
const maxLine = 4 << 20

// The fields a case may have, for checking and for messages.
var (
	caseFields     = []string{"id", "question", "files", "expect", "max_steps", "model", "skill", "level", "followups"}
	followUpFields = []string{"question", "expect"}
	expectFields   = []string{"contains", "regex", "number", "files", "saved", "answer_line", "undetermined", "ran_code"}
	numberFields   = []string{"value", "tolerance", "decimals"}
)

// Load reads the suite at path, or from stdin when path is "-" (its files
// are then relative to the current directory). Every line is checked before
// anything runs, files included: the returned error is Errors, listing each
// bad line, or the reason the file cannot be read.
func Load(path string, stdin io.Reader) ([]Case, error) {
	if path == "-" {
		return Parse(stdin, "stdin", ".")
	}
	fh, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("cannot read the cases: %w", err)
	}
	defer fh.Close()
	return Parse(fh, path, filepath.Dir(path))
}

// Parse reads a suite from r. name is the file's name for messages, and dir
// the directory its files are relative to. Blank lines and lines starting
// with # are skipped (line numbers still count them).
func Parse(r io.Reader, name, dir string) ([]Case, error) {
	var cases []Case
	var errs Errors
	ids := map[string]int{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), maxLine)
	line := 0
	for sc.Scan() && len(errs) < maxErrors {
		line++
		text := bytes.TrimSpace(sc.Bytes())
		if line == 1 {
			text = bytes.TrimPrefix(text, []byte("\xef\xbb\xbf")) // a BOM from an editor
		}
		if len(text) == 0 || text[0] == '#' {
			continue
		}
		c, err := parseCase(text, line, dir)
		if err == nil {
			if prev, dup := ids[c.ID]; dup {
				err = fmt.Errorf("id %q is already used on line %d", c.ID, prev)
			}
		}
		if err != nil {
			errs = append(errs, &Error{File: name, Line: line, Msg: err.Error()})
			continue
		}
		ids[c.ID] = line
		cases = append(cases, c)
	}
	if err := sc.Err(); err != nil {
		msg := err.Error()
		if errors.Is(err, bufio.ErrTooLong) {
			msg = fmt.Sprintf("a line is longer than %d MiB", maxLine>>20)
		}
		errs = append(errs, &Error{File: name, Line: line + 1, Msg: msg})
	}
	if len(errs) > 0 {
		return nil, errs
	}
	if len(cases) == 0 {
		return nil, Errors{{File: name, Msg: "no cases: write one JSON object per line, e.g. {\"question\": \"What is 2**10?\", \"expect\": {\"number\": {\"value\": 1024}}}"}}
	}
	return cases, nil
}

// parseCase checks one line. Fields are read one by one, so that a message
// names the field and what it should be, and an unknown field (a typo of an
// expectation would otherwise pass silently) is an error.
func parseCase(text []byte, line int, dir string) (Case, error) {
	c := Case{Line: line, ID: strconv.Itoa(line)}
	obj, err := object(text, "a case")
	if err != nil {
		return c, err
	}
	if err := known(obj, caseFields, ""); err != nil {
		return c, err
	}
	if raw, ok := obj["id"]; ok {
		if c.ID, err = idField(raw); err != nil {
			return c, err
		}
	}
	if err := stringField(obj, "question", &c.Question); err != nil {
		return c, err
	}
	if strings.TrimSpace(c.Question) == "" {
		return c, errors.New(`"question" is missing or empty; it is the one field a case needs`)
	}
	var files []string
	if err := listField(obj, "files", &files); err != nil {
		return c, err
	}
	if c.Files, err = resolveFiles(files, dir); err != nil {
		return c, err
	}
	if raw, ok := obj["max_steps"]; ok {
		if err := json.Unmarshal(raw, &c.MaxSteps); err != nil || c.MaxSteps < 1 {
			return c, fmt.Errorf(`"max_steps" must be a positive integer, not %s`, clip(raw))
		}
	}
	if err := stringField(obj, "model", &c.Model); err != nil {
		return c, err
	}
	if _, ok := obj["model"]; ok && strings.TrimSpace(c.Model) == "" {
		return c, errors.New(`"model" is empty; leave it out to use --model`)
	}
	if raw, ok := obj["expect"]; ok {
		if c.Expect, err = parseExpect(raw); err != nil {
			return c, err
		}
	}
	if err := stringField(obj, "skill", &c.Skill); err != nil {
		return c, err
	}
	if _, ok := obj["skill"]; ok && strings.TrimSpace(c.Skill) == "" {
		return c, errors.New(`"skill" is empty; name what the case tests, such as "joins", or leave it out`)
	}
	if err := stringField(obj, "level", &c.Level); err != nil {
		return c, err
	}
	if _, ok := obj["level"]; ok && !slices.Contains(Levels, c.Level) {
		return c, fmt.Errorf(`"level" is one of %s, not %q`, strings.Join(Levels, ", "), c.Level)
	}
	if raw, ok := obj["followups"]; ok {
		if c.FollowUps, err = parseFollowUps(raw); err != nil {
			return c, err
		}
	}
	return c, nil
}

// parseFollowUps reads a case's later turns: a list of objects with a
// question and, optionally, what its answer must meet.
func parseFollowUps(raw json.RawMessage) ([]FollowUp, error) {
	var list []json.RawMessage
	if err := json.Unmarshal(raw, &list); err != nil {
		return nil, fmt.Errorf(`"followups" must be a list of {"question": ..., "expect": {...}}, not %s`, clip(raw))
	}
	out := make([]FollowUp, len(list))
	for i, item := range list {
		what := fmt.Sprintf(`"followups"[%d]`, i)
		obj, err := object(item, what)
		if err != nil {
			return nil, err
		}
		if err := known(obj, followUpFields, fmt.Sprintf("followups[%d].", i)); err != nil {
			return nil, err
		}
		if err := stringField(obj, "question", &out[i].Question); err != nil {
			return nil, err
		}
		if strings.TrimSpace(out[i].Question) == "" {
			return nil, fmt.Errorf(`%s has no "question"`, what)
		}
		if e, ok := obj["expect"]; ok {
			if out[i].Expect, err = parseExpect(e); err != nil {
				return nil, fmt.Errorf("%s: %w", what, err)
			}
		}
	}
	return out, nil
}

func parseExpect(raw json.RawMessage) (Expect, error) {
	var e Expect
	obj, err := object(raw, `"expect"`)
	if err != nil {
		return e, err
	}
	if err := known(obj, expectFields, "expect."); err != nil {
		return e, err
	}
	if err := listField(obj, "contains", &e.Contains, "expect."); err != nil {
		return e, err
	}
	if slices.Contains(e.Contains, "") {
		return e, errors.New(`"expect.contains" has an empty text`)
	}
	var re string
	if err := stringField(obj, "regex", &re, "expect."); err != nil {
		return e, err
	}
	if _, ok := obj["regex"]; ok {
		if e.Regex, err = regexp.Compile(re); err != nil {
			return e, fmt.Errorf(`"expect.regex" is not a valid RE2 regular expression: %v`, err)
		}
	}
	if raw, ok := obj["number"]; ok {
		if e.Number, err = parseNumber(raw); err != nil {
			return e, err
		}
	}
	if err := listField(obj, "files", &e.Files, "expect."); err != nil {
		return e, err
	}
	for i, f := range e.Files {
		f = strings.TrimPrefix(f, "/work/")
		if f == "" || strings.HasPrefix(f, "/") || slices.Contains(strings.Split(f, "/"), "..") {
			return e, fmt.Errorf(`"expect.files" names %q: give a path relative to /work, such as "chart.png"`, e.Files[i])
		}
		if _, err := path.Match(f, ""); err != nil {
			return e, fmt.Errorf(`"expect.files" has a bad pattern %q: %v`, e.Files[i], err)
		}
		e.Files[i] = f
	}
	if raw, ok := obj["saved"]; ok {
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&e.Saved); err != nil {
			return e, fmt.Errorf(`"expect.saved" must map file names to {"columns", "rows", "sums", "values"}: %v`, err)
		}
		for name := range e.Saved {
			if name == "" || strings.HasPrefix(name, "/") || strings.ContainsAny(name, "*?[") || slices.Contains(strings.Split(name, "/"), "..") {
				return e, fmt.Errorf(`"expect.saved" names %q: give a path relative to /work, such as "totals.csv"`, name)
			}
		}
	}
	for _, b := range []struct {
		key string
		dst *bool
	}{{"answer_line", &e.AnswerLine}, {"undetermined", &e.Undetermined}, {"ran_code", &e.RanCode}} {
		if raw, ok := obj[b.key]; ok {
			if err := json.Unmarshal(raw, b.dst); err != nil {
				return e, fmt.Errorf(`"expect.%s" must be true or false, not %s`, b.key, clip(raw))
			}
		}
	}
	if e.Undetermined && !e.AnswerLine {
		return e, errors.New(`"expect.undetermined" reads the ANSWER line: set "answer_line" too`)
	}
	return e, nil
}

func parseNumber(raw json.RawMessage) (*Number, error) {
	obj, err := object(raw, `"expect.number"`)
	if err != nil {
		// A bare number is the common shorthand for an exact value.
		var v float64
		if json.Unmarshal(raw, &v) == nil {
			return &Number{Value: v}, nil
		}
		return nil, fmt.Errorf(`"expect.number" must be {"value": 12.5, "tolerance": 0.01} or a number, not %s`, clip(raw))
	}
	if err := known(obj, numberFields, "expect.number."); err != nil {
		return nil, err
	}
	n := &Number{}
	v, ok := obj["value"]
	if !ok {
		return nil, errors.New(`"expect.number" has no "value"`)
	}
	if err := json.Unmarshal(v, &n.Value); err != nil {
		return nil, fmt.Errorf(`"expect.number.value" must be a number, not %s`, clip(v))
	}
	if t, ok := obj["tolerance"]; ok {
		if err := json.Unmarshal(t, &n.Tolerance); err != nil || n.Tolerance < 0 {
			return nil, fmt.Errorf(`"expect.number.tolerance" must be a number of at least 0, not %s`, clip(t))
		}
	}
	if d, ok := obj["decimals"]; ok {
		n.Decimals = new(int)
		if err := json.Unmarshal(d, n.Decimals); err != nil || *n.Decimals < 0 || *n.Decimals > 12 {
			return nil, fmt.Errorf(`"expect.number.decimals" must be an integer from 0 to 12, not %s`, clip(d))
		}
		if _, both := obj["tolerance"]; both {
			return nil, errors.New(`"expect.number" has both "tolerance" and "decimals": decimals sets the tolerance (a little over half the last digit)`)
		}
	}
	return n, nil
}

// object decodes a JSON object, or says what what was expected to be one.
func object(text []byte, what string) (map[string]json.RawMessage, error) {
	var obj map[string]json.RawMessage
	err := json.Unmarshal(text, &obj)
	var syn *json.SyntaxError
	switch {
	case errors.As(err, &syn):
		return nil, fmt.Errorf("invalid JSON at column %d: %v", syn.Offset, err)
	case err != nil || obj == nil:
		return nil, fmt.Errorf("%s must be a JSON object, not %s", what, clip(text))
	}
	return obj, nil
}

// known rejects fields that are not in names, naming the one that is.
func known(obj map[string]json.RawMessage, names []string, prefix string) error {
	var unknown []string
	for k := range obj {
		if !slices.Contains(names, k) {
			unknown = append(unknown, k)
		}
	}
	if len(unknown) == 0 {
		return nil
	}
	slices.Sort(unknown)
	return fmt.Errorf("unknown field %q (known fields: %s)", prefix+unknown[0], strings.Join(names, ", "))
}

func stringField(obj map[string]json.RawMessage, key string, dst *string, prefix ...string) error {
	raw, ok := obj[key]
	if !ok {
		return nil
	}
	if err := json.Unmarshal(raw, dst); err != nil {
		return fmt.Errorf("%q must be a string, not %s", strings.Join(prefix, "")+key, clip(raw))
	}
	return nil
}

// listField reads a list of strings; a single string is a list of one.
func listField(obj map[string]json.RawMessage, key string, dst *[]string, prefix ...string) error {
	raw, ok := obj[key]
	if !ok {
		return nil
	}
	var one string
	if json.Unmarshal(raw, &one) == nil {
		*dst = []string{one}
		return nil
	}
	if err := json.Unmarshal(raw, dst); err != nil {
		return fmt.Errorf("%q must be a list of strings, not %s", strings.Join(prefix, "")+key, clip(raw))
	}
	return nil
}

// idField reads an id, a string or an integer. It becomes a directory name
// under --artifacts, so it must be one.
func idField(raw json.RawMessage) (string, error) {
	var id string
	if err := json.Unmarshal(raw, &id); err != nil {
		var n int64
		if json.Unmarshal(raw, &n) != nil {
			return "", fmt.Errorf(`"id" must be a string, not %s`, clip(raw))
		}
		id = strconv.FormatInt(n, 10)
	}
	switch {
	case strings.TrimSpace(id) == "":
		return "", errors.New(`"id" is empty; leave it out to use the line number`)
	case id == "." || id == ".." || strings.ContainsAny(id, `/\`) ||
		strings.ContainsFunc(id, unicode.IsControl):
		return "", fmt.Errorf(`"id" %q cannot name a directory: use letters, digits, "-", "_" or "."`, id)
	case len(id) > 200:
		return "", errors.New(`"id" is longer than 200 bytes`)
	}
	return id, nil
}

// resolveFiles makes paths relative to the suite's directory and checks that
// each is a readable regular file, so a typo costs nothing.
func resolveFiles(files []string, dir string) ([]string, error) {
	seen := map[string]string{}
	out := make([]string, 0, len(files))
	for _, f := range files {
		if f == "" {
			return nil, errors.New(`"files" has an empty path`)
		}
		p := f
		if !filepath.IsAbs(p) {
			p = filepath.Join(dir, p)
		}
		st, err := os.Stat(p)
		if err == nil && !st.Mode().IsRegular() {
			err = errors.New("not a regular file")
		}
		if err == nil {
			var fh *os.File
			if fh, err = os.Open(p); err == nil {
				fh.Close()
			}
		}
		if err != nil {
			var pe *os.PathError
			if errors.As(err, &pe) {
				err = pe.Err
			}
			return nil, fmt.Errorf("file %q (%s): %v", f, p, err)
		}
		base := filepath.Base(p)
		if prev, dup := seen[base]; dup {
			return nil, fmt.Errorf("files %q and %q would both be uploaded as /work/%s", prev, f, base)
		}
		seen[base] = f
		out = append(out, p)
	}
	return out, nil
}

// clip shows a bad value in a message, shortened.
func clip(raw []byte) string {
	r := []rune(strings.TrimSpace(string(raw)))
	if len(r) > 40 {
		return string(r[:40]) + "…"
	}
	return string(r)
}

// WantsData reports whether the expectations read back the saved file at
// name (relative to /work), so a runner knows which files to fetch.
func (e Expect) WantsData(name string) bool {
	if _, ok := e.Saved[name]; ok {
		return true
	}
	return strings.EqualFold(path.Ext(name), ".png") && slices.ContainsFunc(e.Files, func(want string) bool { return matchName(want, name) })
}
