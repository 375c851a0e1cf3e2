package config

import (
	"fmt"
	"math"
	"net/netip"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/terpdev/terp/internal/egress"

	"github.com/terpdev/terp/internal/sandbox"
)

// value is one Config field seen through the forms a setting can take. Environment
// variables, flags and the built-in defaults all arrive as text and go through set, so a
// value means the same thing wherever it is written; the config file arrives as typed TOML
// and goes through decode, which holds it to the TOML type a user would expect.
type value interface {
	set(s string) error
	decode(v any) error
	String() string
	// literal is the value written as TOML, for the template that init writes.
	literal() string
}

// invalid says what a setting must look like and what it got instead. The caller adds
// the key and where the value came from, so every message reads the same:
// "max_steps must be an integer, got string "ten"".
type invalid struct {
	want string // the accepted form, e.g. `a duration such as "90s" or "2m"`
	got  string // what was written, already quoted or described
	hint string // optional advice, e.g. how to write it instead
}

func (e *invalid) Error() string {
	msg := "must be " + e.want
	if e.got != "" {
		msg += ", got " + e.got
	}
	if e.hint != "" {
		msg += " (" + e.hint + ")"
	}
	return msg
}

// describeTOML names a decoded TOML value the way the user wrote it: `string "ten"`,
// `integer 10`. Errors show it so the user can find the offending text at a glance.
func describeTOML(v any) string {
	switch v := v.(type) {
	case string:
		return "string " + strconv.Quote(v)
	case int64:
		return "integer " + strconv.FormatInt(v, 10)
	case float64:
		return "float " + strconv.FormatFloat(v, 'g', -1, 64)
	case bool:
		return "boolean " + strconv.FormatBool(v)
	case time.Time:
		return "datetime " + v.Format(time.RFC3339)
	case []any, []map[string]any:
		return "an array"
	case map[string]any:
		return "a table"
	default:
		return fmt.Sprintf("%T", v)
	}
}

type stringValue struct {
	p        *string
	nonEmpty bool
}

func (v stringValue) set(s string) error {
	if v.nonEmpty && strings.TrimSpace(s) == "" {
		return &invalid{want: "a non-empty string"}
	}
	*v.p = s
	return nil
}

func (v stringValue) decode(x any) error {
	s, ok := x.(string)
	if !ok {
		return &invalid{want: "a string", got: describeTOML(x), hint: "put it in double quotes"}
	}
	return v.set(s)
}

func (v stringValue) String() string  { return *v.p }
func (v stringValue) literal() string { return strconv.Quote(*v.p) }

// urlValue holds the model endpoint. A missing scheme is the usual mistake
// ("localhost:8000/v1"), and it would otherwise surface much later as a confusing HTTP
// error, so it is caught here.
type urlValue struct{ p *string }

func (v urlValue) set(s string) error {
	s = strings.TrimSpace(s)
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return &invalid{
			want: `an http:// or https:// URL such as "http://localhost:8000/v1"`,
			got:  strconv.Quote(s),
		}
	}
	*v.p = s
	return nil
}

func (v urlValue) decode(x any) error {
	s, ok := x.(string)
	if !ok {
		return &invalid{want: "a URL string", got: describeTOML(x)}
	}
	return v.set(s)
}

func (v urlValue) String() string  { return *v.p }
func (v urlValue) literal() string { return strconv.Quote(*v.p) }

var envName = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
})

// envNameValue holds the name of an environment variable. People sometimes paste the key
// itself here; the error then deliberately does not repeat the value, so a secret never
// ends up in a terminal log.
type envNameValue struct{ p *string }

func (v envNameValue) set(s string) error {
	s = strings.TrimSpace(s)
	if s != "" && !envName().MatchString(s) {
		return &invalid{
			want: "the name of an environment variable, such as GPUOS_API_KEY",
			hint: "the value is not shown; if it is the API key itself, export it as TERP_API_KEY instead",
		}
	}
	*v.p = s
	return nil
}

func (v envNameValue) decode(x any) error {
	s, ok := x.(string)
	if !ok {
		return &invalid{want: "a string naming an environment variable", got: describeTOML(x)}
	}
	return v.set(s)
}

func (v envNameValue) String() string  { return *v.p }
func (v envNameValue) literal() string { return strconv.Quote(*v.p) }

// choiceValue holds one of a fixed set of names, such as a sandbox backend.
type choiceValue struct {
	p     *string
	names []string
}

func (v choiceValue) choices() []string { return v.names }

func (v choiceValue) set(s string) error {
	s = strings.TrimSpace(s)
	for _, c := range v.names {
		if s == c {
			*v.p = s
			return nil
		}
	}
	e := &invalid{want: "one of " + strings.Join(v.names, ", "), got: strconv.Quote(s)}
	if m := closest(s, v.names); m != "" {
		e.hint = fmt.Sprintf("did you mean %q?", m)
	}
	return e
}

func (v choiceValue) decode(x any) error {
	s, ok := x.(string)
	if !ok {
		return &invalid{want: "a string, one of " + strings.Join(v.names, ", "), got: describeTOML(x)}
	}
	return v.set(s)
}

func (v choiceValue) String() string  { return *v.p }
func (v choiceValue) literal() string { return strconv.Quote(*v.p) }

// intValue holds a count with a lower bound; no terp count makes sense below 1.
type intValue struct {
	p   *int
	min int
}

func (v intValue) check(n int64) error {
	if n < int64(v.min) {
		return &invalid{want: fmt.Sprintf("at least %d", v.min), got: strconv.FormatInt(n, 10)}
	}
	if n > math.MaxInt32 {
		return &invalid{want: fmt.Sprintf("at most %d", math.MaxInt32), got: strconv.FormatInt(n, 10)}
	}
	*v.p = int(n)
	return nil
}

func (v intValue) set(s string) error {
	n, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
	if err != nil {
		return &invalid{want: "an integer", got: strconv.Quote(s)}
	}
	return v.check(n)
}

func (v intValue) decode(x any) error {
	switch x := x.(type) {
	case int64:
		return v.check(x)
	case string:
		e := &invalid{want: "an integer", got: describeTOML(x)}
		if _, err := strconv.ParseInt(strings.TrimSpace(x), 10, 64); err == nil {
			e.hint = "write it without quotes"
		}
		return e
	default:
		return &invalid{want: "an integer", got: describeTOML(x)}
	}
}

func (v intValue) String() string  { return strconv.Itoa(*v.p) }
func (v intValue) literal() string { return strconv.Itoa(*v.p) }

// boolValue accepts the spellings people type in shells (1, yes, on) as well as Go's.
type boolValue struct{ p *bool }

func (v boolValue) set(s string) error {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "1", "t", "true", "yes", "y", "on":
		*v.p = true
	case "0", "f", "false", "no", "n", "off":
		*v.p = false
	default:
		return &invalid{want: "true or false", got: strconv.Quote(s)}
	}
	return nil
}

// choices offers the two canonical spellings; the others are accepted but
// not worth a completion each.
func (v boolValue) choices() []string { return []string{"true", "false"} }

func (v boolValue) decode(x any) error {
	b, ok := x.(bool)
	if !ok {
		e := &invalid{want: "true or false", got: describeTOML(x)}
		if s, isStr := x.(string); isStr && (s == "true" || s == "false") {
			e.hint = "write it without quotes"
		}
		return e
	}
	*v.p = b
	return nil
}

func (v boolValue) String() string  { return strconv.FormatBool(*v.p) }
func (v boolValue) literal() string { return strconv.FormatBool(*v.p) }

// durationValue takes Go duration syntax ("90s", "2m", "1h30m"). A bare number is
// refused rather than guessed at: 120 could mean seconds or minutes.
type durationValue struct{ p *time.Duration }

const durationForm = `a duration such as "90s", "2m" or "1h30m"`

func (v durationValue) set(s string) error {
	d, err := time.ParseDuration(strings.TrimSpace(s))
	if err != nil {
		e := &invalid{want: durationForm, got: strconv.Quote(s)}
		if _, nerr := strconv.ParseFloat(strings.TrimSpace(s), 64); nerr == nil {
			e.hint = "add a unit: s, m or h"
		}
		return e
	}
	if d <= 0 {
		return &invalid{want: "a positive duration", got: strconv.Quote(s)}
	}
	*v.p = d
	return nil
}

func (v durationValue) decode(x any) error {
	switch x := x.(type) {
	case string:
		return v.set(x)
	case int64, float64:
		return &invalid{want: durationForm + " in quotes", got: describeTOML(x),
			hint: fmt.Sprintf("write \"%vs\" for seconds", x)}
	default:
		return &invalid{want: durationForm, got: describeTOML(x)}
	}
}

func (v durationValue) String() string  { return formatDuration(*v.p) }
func (v durationValue) literal() string { return strconv.Quote(formatDuration(*v.p)) }

// formatDuration drops the zero tails time.Duration.String adds ("2m0s" becomes "2m"),
// so show prints what a user would have written.
func formatDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = s[:len(s)-2]
	}
	if strings.HasSuffix(s, "h0m") {
		s = s[:len(s)-2]
	}
	return s
}

// sizeValue holds a byte count written as "2GiB", "512MiB", "1G" or plain bytes.
type sizeValue struct{ p *int64 }

const sizeForm = `a size such as "512MiB", "2GiB" or a number of bytes`

func (v sizeValue) set(s string) error {
	n, err := parseSize(s)
	if err != nil {
		return &invalid{want: sizeForm, got: strconv.Quote(s)}
	}
	if n < 1 {
		return &invalid{want: "at least 1 byte", got: strconv.Quote(s)}
	}
	*v.p = n
	return nil
}

func (v sizeValue) decode(x any) error {
	switch x := x.(type) {
	case string:
		return v.set(x)
	case int64:
		if x < 1 {
			return &invalid{want: "at least 1 byte", got: describeTOML(x)}
		}
		*v.p = x
		return nil
	default:
		return &invalid{want: sizeForm, got: describeTOML(x)}
	}
}

func (v sizeValue) String() string  { return formatSize(*v.p) }
func (v sizeValue) literal() string { return strconv.Quote(formatSize(*v.p)) }

// sizeUnits maps a lower-cased suffix to its multiplier. IEC suffixes (KiB, Ki) and the
// bare letters Docker's --memory uses (k, m, g) are powers of 1024; SI suffixes with a B
// (kB, MB, GB) are powers of 1000, as on a disk label.
var sizeUnits = map[string]int64{
	"": 1, "b": 1,
	"k": 1 << 10, "ki": 1 << 10, "kib": 1 << 10, "kb": 1e3,
	"m": 1 << 20, "mi": 1 << 20, "mib": 1 << 20, "mb": 1e6,
	"g": 1 << 30, "gi": 1 << 30, "gib": 1 << 30, "gb": 1e9,
	"t": 1 << 40, "ti": 1 << 40, "tib": 1 << 40, "tb": 1e12,
}

func parseSize(s string) (int64, error) {
	s = strings.TrimSpace(s)
	i := 0
	for i < len(s) && (s[i] >= '0' && s[i] <= '9' || s[i] == '.') {
		i++
	}
	num, unit := s[:i], strings.ToLower(strings.TrimSpace(s[i:]))
	mult, ok := sizeUnits[unit]
	if num == "" || !ok {
		return 0, fmt.Errorf("bad size %q", s)
	}
	if n, err := strconv.ParseInt(num, 10, 64); err == nil {
		if n > math.MaxInt64/mult {
			return 0, fmt.Errorf("size %q too large", s)
		}
		return n * mult, nil
	}
	f, err := strconv.ParseFloat(num, 64)
	if err != nil || f*float64(mult) >= math.MaxInt64 {
		return 0, fmt.Errorf("bad size %q", s)
	}
	return int64(f * float64(mult)), nil
}

// ParseSize reads a size written as the config file writes one ("512MiB",
// "2GiB", a number of bytes), for the flags of a command that are not
// config keys; the error says what to write instead.
func ParseSize(s string) (int64, error) {
	var n int64
	err := sizeValue{&n}.set(s)
	return n, err
}

// FormatSize writes n as ParseSize reads it, for the default of such a flag.
func FormatSize(n int64) string { return formatSize(n) }

// SizeText is a byte count for a person to read: one decimal in the largest
// binary unit it reaches, labelled as computed ("1.5 MiB", "200 B").
func SizeText(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}

// formatSize writes a byte count in the largest binary unit that divides it exactly, so
// the default 2GiB shows as "2GiB" and an odd count stays exact.
func formatSize(n int64) string {
	for _, u := range []struct {
		name string
		size int64
	}{{"TiB", 1 << 40}, {"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}} {
		if n != 0 && n%u.size == 0 {
			return strconv.FormatInt(n/u.size, 10) + u.name
		}
	}
	return strconv.FormatInt(n, 10)
}

// dirValue holds a directory. A leading "~/" is expanded because the shell does not do
// it for values in the config file or inside quoted environment assignments.
type dirValue struct {
	p    *string
	home func() string
}

func (v dirValue) set(s string) error {
	*v.p = expandHome(s, v.home())
	return nil
}

func (v dirValue) decode(x any) error {
	s, ok := x.(string)
	if !ok {
		return &invalid{want: "a directory path string", got: describeTOML(x)}
	}
	return v.set(s)
}

func (v dirValue) String() string  { return *v.p }
func (v dirValue) literal() string { return strconv.Quote(*v.p) }

// moduleName is a dotted Python module path such as "matplotlib.pyplot".
var moduleName = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$`)
})

// listValue holds a list of names: Python modules, or host names. In the
// environment and on the command line it is written comma-separated; in the
// file as an array. An empty list is allowed (no prewarming; an allowlist
// that lets nothing through).
type listValue struct {
	p     *[]string
	valid func(string) bool
	want  string // what an item must be, e.g. `Python module names such as "numpy"`
	array string // the same as a TOML array, for the error when the file has none
}

// modulesValue is a list of Python module names.
func modulesValue(p *[]string) listValue {
	return listValue{p: p, valid: moduleName().MatchString,
		want: `Python module names such as "numpy" or "matplotlib.pyplot"`, array: `an array of module names such as ["numpy", "pandas"]`}
}

// hostsValue is a list of host names and *.domain patterns.
func hostsValue(p *[]string) listValue {
	return listValue{p: p, valid: func(h string) bool { return egress.ValidPattern(h) == nil },
		want: `host names such as "pypi.org" or "*.example.com"`, array: `an array of host names such as ["pypi.org", "files.pythonhosted.org"]`}
}

// prefixesValue is a list of address ranges in CIDR notation.
func prefixesValue(p *[]string) listValue {
	return listValue{p: p, valid: func(s string) bool { _, err := netip.ParsePrefix(s); return err == nil },
		want: `address ranges such as "10.20.0.0/16"`, array: `an array of address ranges such as ["10.20.0.0/16"]`}
}

func (v listValue) set(s string) error {
	var items []string
	for _, m := range strings.Split(s, ",") {
		if m = strings.TrimSpace(m); m != "" {
			items = append(items, m)
		}
	}
	return v.store(items)
}

func (v listValue) store(items []string) error {
	for _, m := range items {
		if !v.valid(m) {
			return &invalid{want: v.want, got: strconv.Quote(m)}
		}
	}
	*v.p = items
	return nil
}

func (v listValue) decode(x any) error {
	items, ok := x.([]any)
	if !ok {
		return &invalid{want: v.array, got: describeTOML(x)}
	}
	list := make([]string, 0, len(items))
	for _, it := range items {
		s, ok := it.(string)
		if !ok {
			return &invalid{want: "an array of strings", got: "an element " + describeTOML(it)}
		}
		list = append(list, s)
	}
	return v.store(list)
}

func (v listValue) String() string { return strings.Join(*v.p, ",") }

func (v listValue) literal() string {
	quoted := make([]string, len(*v.p))
	for i, m := range *v.p {
		quoted[i] = strconv.Quote(m)
	}
	return "[" + strings.Join(quoted, ", ") + "]"
}

// uidRangeValue holds the host uids root's local sandboxes run as, written
// FIRST-LAST.
type uidRangeValue struct{ p *sandbox.UIDRange }

func (v uidRangeValue) set(s string) error {
	r, err := sandbox.ParseUIDRange(s)
	if err != nil {
		return &invalid{want: "a range of host uids FIRST-LAST", got: strconv.Quote(s), hint: err.Error()}
	}
	*v.p = r
	return nil
}

func (v uidRangeValue) decode(x any) error {
	s, ok := x.(string)
	if !ok {
		return &invalid{want: "a range of host uids in quotes, e.g. \"" + sandbox.DefaultUIDs.String() + "\"", got: describeTOML(x)}
	}
	return v.set(s)
}

func (v uidRangeValue) String() string  { return v.p.String() }
func (v uidRangeValue) literal() string { return strconv.Quote(v.p.String()) }
