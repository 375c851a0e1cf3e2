package config

import (
	"bufio"
	"bytes"
	"errors"
	"io/fs"
	"os"
	"regexp"
	"strings"

	"github.com/BurntSushi/toml"
)

// loadFile reads the config file at c.path over the defaults. explicit says the user
// named the file, so its absence is their mistake rather than a fresh install.
func (c *Config) loadFile(explicit bool) []error {
	whole := FromFile(c.path, 0)
	data, err := os.ReadFile(c.path)
	switch {
	case errors.Is(err, fs.ErrNotExist) && !explicit:
		return nil
	case errors.Is(err, fs.ErrNotExist):
		return []error{&Error{Source: whole, Err: err,
			Problem: `config file not found; check the path given with --config, or create it with "terp config init"`}}
	case err != nil:
		return []error{&Error{Source: whole, Err: err, Problem: "cannot read config file: " + rootCause(err)}}
	}
	c.fileExists = true
	if fi, err := os.Stat(c.path); err == nil {
		c.fileMode = fi.Mode().Perm()
	}

	var raw map[string]toml.Primitive
	md, err := toml.NewDecoder(bytes.NewReader(data)).Decode(&raw)
	if err != nil {
		var pe toml.ParseError
		if errors.As(err, &pe) {
			return []error{&Error{
				Source:  FromFile(c.path, pe.Position.Line),
				Column:  pe.Position.Col,
				Problem: "invalid TOML: " + pe.Message,
				Err:     err,
			}}
		}
		return []error{&Error{Source: whole, Problem: "invalid TOML: " + err.Error(), Err: err}}
	}

	var errs []error
	for _, name := range topLevel(md.Keys()) {
		v, line := locate(&md, raw[name])
		if line == 0 {
			line = scanLine(data, name)
		}
		src := FromFile(c.path, line)
		if name == profilesTable {
			errs = append(errs, c.loadProfiles(&md, raw[name], data, src)...)
			continue
		}
		f, ok := lookup(name)
		if !ok {
			_, table := v.(map[string]any)
			errs = append(errs, unknownKey(src, name, table))
			continue
		}
		if err := f.bind(c).decode(v); err != nil {
			errs = append(errs, valueError(src, name, err))
			continue
		}
		c.sources[name] = src
	}
	return errs
}

// topLevel returns the distinct first parts of keys, in the order they first appear in
// the file, so errors are reported top to bottom.
func topLevel(keys []toml.Key) []string {
	var names []string
	seen := make(map[string]bool)
	for _, k := range keys {
		if len(k) > 0 && !seen[k[0]] {
			seen[k[0]] = true
			names = append(names, k[0])
		}
	}
	return names
}

// errLocate is returned by locator so that the TOML decoder reports its position.
var errLocate = errors.New("locate")

// locator captures a raw TOML value. It always fails, because the decoder exposes a
// key's position only in the ParseError it builds around an Unmarshaler's error; this is
// the one public way to learn which line a key is on.
type locator struct{ v any }

func (l *locator) UnmarshalTOML(v any) error {
	l.v = v
	return errLocate
}

// locate returns a top-level key's raw value and its line, or line 0 when the decoder
// knows none (a table made only of dotted keys, "a.b = 1").
func locate(md *toml.MetaData, p toml.Primitive) (any, int) {
	var l locator
	err := md.PrimitiveDecode(p, &l)
	var pe toml.ParseError
	if errors.As(err, &pe) {
		return l.v, pe.Position.Line
	}
	return l.v, 0
}

// scanLine finds the first line that starts the key name, as a plain key, a dotted key
// or a table header. It backs up locate for the rare keys the decoder has no position for.
func scanLine(data []byte, name string) int {
	q := regexp.QuoteMeta(name)
	re := regexp.MustCompile(`^\s*\[*\s*(` + q + `|"` + q + `"|'` + q + `')\s*[.=\]]`)
	sc := bufio.NewScanner(bytes.NewReader(data))
	for n := 1; sc.Scan(); n++ {
		if re.MatchString(sc.Text()) {
			return n
		}
	}
	return 0
}

// rootCause drops the operation and path from an *fs.PathError, which the message
// already shows, leaving e.g. "permission denied".
func rootCause(err error) string {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err.Error()
	}
	return strings.TrimSpace(err.Error())
}
