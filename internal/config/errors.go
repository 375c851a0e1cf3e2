package config

import (
	"strconv"
	"strings"
)

// Error is a problem with the configuration: the file, an environment variable or a flag.
// The CLI maps it to exit code 2 with errors.As; Load may return several joined with
// errors.Join, and errors.As finds the first.
//
// The message leads with where to look, like a compiler ("config.toml:3: ..."), then
// says what is wrong and what is accepted, so the user can fix it without reading docs.
type Error struct {
	Source  Source // where the bad value was written
	Column  int    // column in the file, for syntax errors; 0 if unknown
	Key     string // the setting concerned; empty for problems with the file as a whole
	Problem string // what is wrong and what to do instead
	Err     error  // the underlying cause, if any
}

func (e *Error) Error() string {
	var b strings.Builder
	if loc := e.Source.location(); loc != "" {
		if e.Source.Kind != KindFile {
			b.WriteString(e.Source.String())
		} else {
			b.WriteString(loc)
			if e.Column > 0 && e.Source.Line > 0 {
				b.WriteString(":")
				b.WriteString(strconv.Itoa(e.Column))
			}
		}
		b.WriteString(": ")
	}
	switch {
	case e.Problem != "":
		b.WriteString(e.Problem)
	case e.Err != nil:
		b.WriteString(e.Err.Error())
	}
	return b.String()
}

func (e *Error) Unwrap() error { return e.Err }

// valueError wraps a value's complaint with the key and where it was written.
func valueError(src Source, key string, err error) *Error {
	return &Error{Source: src, Key: key, Problem: key + " " + err.Error(), Err: err}
}

// unknownKey reports a setting that does not exist, suggesting the nearest one: a typo
// in a key name is the most common config mistake and otherwise costs a trip to the docs.
// A table gets its own wording, since terp has none and a user may expect sections.
func unknownKey(src Source, key string, table bool) *Error {
	msg := "unknown key " + strconv.Quote(key)
	if table {
		msg = "unknown table " + strconv.Quote(key)
	}
	switch m := suggest(key); {
	case m != "":
		msg += " (did you mean " + strconv.Quote(m) + "?)"
	case table:
		msg += `; terp's settings are plain top-level keys, "terp config show" lists them`
	default:
		msg += `; "terp config show" lists every key`
	}
	return &Error{Source: src, Key: key, Problem: msg}
}

// aliases are names other tools use for a terp setting.
var aliases = map[string]string{
	"url":             "base_url",
	"endpoint":        "base_url",
	"api_base":        "base_url",
	"openai_base_url": "base_url",
	"key":             "api_key",
	"token":           "api_key",
	"steps":           "max_steps",
	"memory":          "memory_limit",
	"profiles":        "models",
	"model_profiles":  "models",
}

func suggest(key string) string {
	norm := strings.ToLower(strings.ReplaceAll(key, "-", "_"))
	if _, ok := lookup(norm); ok {
		return norm
	}
	if a, ok := aliases[norm]; ok {
		return a
	}
	return closest(norm, names())
}

// closest returns the candidate nearest to s by edit distance, or "" when none is near
// enough to be a plausible typo.
func closest(s string, candidates []string) string {
	best, bestDist := "", len(s)/3+1
	if bestDist > 3 {
		bestDist = 3
	}
	for _, c := range candidates {
		if d := editDistance(s, c); d <= bestDist && (best == "" || d < editDistance(s, best)) {
			best = c
		}
	}
	return best
}

// editDistance is the Levenshtein distance between a and b.
func editDistance(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	prev := make([]int, len(rb)+1)
	cur := make([]int, len(rb)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(ra); i++ {
		cur[0] = i
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(rb)]
}
