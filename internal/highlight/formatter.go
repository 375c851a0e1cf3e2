package highlight

import (
	"io"

	"github.com/alecthomas/chroma/v2"
)

// The terminal formatters are chroma's, copied from chroma v2.27.0's
// formatters package into tty_indexed.go and tty_truecolour.go (MIT, see
// chroma/COPYING), rather than taken from that package: Go initialises every
// package a program links before main, and chroma's formatters package
// registers all of its formatters when it is initialised, the HTML one and
// an SVG one with an embedded font included, parses its 256-colour tables
// and compiles a regular expression. That was done at the start of every
// terp command, which only ever colours for a terminal; here the tables and
// the regular expression are built on first use.

// Formatter returns the terminal formatter chroma's formatters.Get returns
// for name: "terminal" or "terminal8" (8 colours), "terminal16",
// "terminal256" or "terminal16m" (true colour). It returns nil for any other
// name, where chroma's would return its no-op fallback (NoOp here).
func Formatter(name string) chroma.Formatter {
	switch name {
	case "terminal", "terminal8":
		return tty8
	case "terminal16":
		return tty16
	case "terminal256":
		return tty256
	case "terminal16m":
		return tty16m
	}
	return nil
}

// NoOp is chroma's no-op formatter, its formatters.Fallback: it writes each
// token's text unchanged.
var NoOp chroma.Formatter = chroma.FormatterFunc(func(w io.Writer, _ *chroma.Style, it chroma.Iterator) error {
	for t := it(); t != chroma.EOF; t = it() {
		if _, err := io.WriteString(w, t.Value); err != nil {
			return err
		}
	}
	return nil
})
