// Package highlight holds the chroma lexer and styles terp colours code
// with: Python, and the monokai and github styles.
//
// They are chroma's own definitions, copied from chroma v2.27.0 into
// chroma/ (see chroma/COPYING), rather than taken from chroma's lexers and
// styles packages: those parse all of their 280 embedded lexers and 74
// styles when the package is initialised, which Go does in every run of a
// program that links them, whatever it does. That was 25 ms of every terp
// command, `terp version` and `terp ask --json` included; here only what is
// used is parsed, on first use.
//
// The terminal formatters that turn the tokens into escape sequences are
// chroma's too, copied for the same reason (see formatter.go).
package highlight

import (
	"bytes"
	"embed"
	"path/filepath"
	"strings"
	"sync"

	"github.com/alecthomas/chroma/v2"
)

//go:embed chroma/*.xml
var definitions embed.FS

// Python returns chroma's Python 3 lexer. It is built on the first call.
func Python() chroma.Lexer { return python() }

var python = sync.OnceValue(func() chroma.Lexer {
	l, err := chroma.NewXMLLexer(definitions, "chroma/python.xml")
	if err != nil {
		// The file is embedded: only a broken copy of it fails.
		panic(err)
	}
	return l
})

// Lexer returns the lexer for a code block's language as chroma's lexers.Get
// finds it (by name, alias or file name), or nil when it is not Python.
func Lexer(language string) chroma.Lexer {
	py := Python()
	c := py.Config()
	name := strings.ToLower(language)
	if name == strings.ToLower(c.Name) {
		return py
	}
	for _, a := range c.Aliases {
		if name == a {
			return py
		}
	}
	for _, glob := range c.Filenames {
		for _, f := range []string{"filename." + language, language} {
			if ok, _ := filepath.Match(glob, f); ok {
				return py
			}
		}
	}
	return nil
}

// Plaintext returns chroma's fallback lexer: all text, one token per line.
func Plaintext() chroma.Lexer { return plaintext() }

var plaintext = sync.OnceValue(func() chroma.Lexer {
	return chroma.MustNewLexer(&chroma.Config{
		Name:      "fallback",
		Filenames: []string{"*"},
		Priority:  -1,
	}, func() chroma.Rules {
		return chroma.Rules{
			"root": []chroma.Rule{
				{Pattern: `.+`, Type: chroma.Text},
				{Pattern: `\n`, Type: chroma.Text},
			},
		}
	})
})

var styleByName = map[string]func() *chroma.Style{
	"monokai": sync.OnceValue(func() *chroma.Style { return style("monokai") }),
	"github":  sync.OnceValue(func() *chroma.Style { return style("github") }),
}

// Style returns chroma's style of that name, "monokai" or "github", or nil
// for any other name. Each is built on its first call.
func Style(name string) *chroma.Style {
	if s, ok := styleByName[name]; ok {
		return s()
	}
	return nil
}

func style(name string) *chroma.Style {
	b, err := definitions.ReadFile("chroma/" + name + ".xml")
	if err != nil {
		panic(err)
	}
	s, err := chroma.NewXMLStyle(bytes.NewReader(b))
	if err != nil {
		panic(err)
	}
	return s
}
