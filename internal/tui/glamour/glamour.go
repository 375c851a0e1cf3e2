// Package glamour is charmbracelet/glamour v1.0.0's Markdown renderer for
// the terminal (its ansi package, the TermRenderer options terp uses, and
// the dark, light and notty styles), with two changes: code blocks are
// coloured with terp's copy of chroma's Python lexer (internal/highlight)
// rather than through chroma's quick package, and HTML is stripped by
// ansi/striphtml.go rather than by bluemonday, whose initialisation
// compiles dozens of regular expressions. The GFM and definition list
// extensions are goldmark's, from terp's copy in gfm, which compiles their
// regular expressions on first use rather than at every command's start.
//
// Why a copy: glamour's ansi package imports chroma's lexers and styles
// packages, which parse 280 lexers and 74 styles from XML when Go
// initialises them, before main runs. Go initialises every package a
// program links, so every terp command paid that (25 ms; `terp version`
// took 15 times a Go hello world), although only the chat's answers are
// rendered with glamour. Glamour offers no way to leave chroma out.
//
// What changes for the chat: a code block in an answer whose language is
// not Python is drawn in the code block's text colour, without highlighting
// (chroma has a lexer for it; terp has none). Everything else renders as
// glamour v1.0.0 does: the files under ansi/ are glamour's, but for
// codeblock.go's highlighting, context.go's stripping, striphtml.go and the
// import paths. LICENSE is glamour's.
package glamour

import (
	"bytes"
	"fmt"

	"github.com/muesli/termenv"
	"github.com/yuin/goldmark"
	"github.com/yuin/goldmark/parser"
	"github.com/yuin/goldmark/renderer"
	"github.com/yuin/goldmark/util"

	"github.com/terpdev/terp/internal/tui/glamour/ansi"
	"github.com/terpdev/terp/internal/tui/glamour/gfm"
)

const (
	defaultWidth = 80
	highPriority = 1000
)

// A TermRendererOption sets an option on a TermRenderer.
type TermRendererOption func(*TermRenderer) error

// TermRenderer renders Markdown for the terminal.
type TermRenderer struct {
	md          goldmark.Markdown
	ansiOptions ansi.Options
}

// NewTermRenderer returns a new TermRenderer the given options.
func NewTermRenderer(options ...TermRendererOption) (*TermRenderer, error) {
	tr := &TermRenderer{
		md: goldmark.New(
			goldmark.WithExtensions(
				gfm.GFM,
				gfm.DefinitionList,
			),
			goldmark.WithParserOptions(
				parser.WithAutoHeadingID(),
			),
		),
		ansiOptions: ansi.Options{
			WordWrap:     defaultWidth,
			ColorProfile: termenv.TrueColor,
		},
	}
	for _, o := range options {
		if err := o(tr); err != nil {
			return nil, err
		}
	}
	ar := ansi.NewRenderer(tr.ansiOptions)
	tr.md.SetRenderer(
		renderer.NewRenderer(
			renderer.WithNodeRenderers(
				util.Prioritized(ar, highPriority),
			),
		),
	)
	return tr, nil
}

// WithColorProfile sets the TermRenderer's color profile
// (TrueColor / ANSI256 / ANSI).
func WithColorProfile(profile termenv.Profile) TermRendererOption {
	return func(tr *TermRenderer) error {
		tr.ansiOptions.ColorProfile = profile
		return nil
	}
}

// WithStandardStyle sets a TermRenderer's styles with a standard (builtin)
// style.
func WithStandardStyle(style string) TermRendererOption {
	return func(tr *TermRenderer) error {
		styles, ok := DefaultStyles()[style]
		if !ok {
			return fmt.Errorf("%s: style not found", style)
		}
		tr.ansiOptions.Styles = *styles
		return nil
	}
}

// WithWordWrap sets a TermRenderer's word wrap.
func WithWordWrap(wordWrap int) TermRendererOption {
	return func(tr *TermRenderer) error {
		tr.ansiOptions.WordWrap = wordWrap
		return nil
	}
}

// Render returns the markdown rendered into a string.
func (tr *TermRenderer) Render(in string) (string, error) {
	var buf bytes.Buffer
	err := tr.md.Convert([]byte(in), &buf)
	return buf.String(), err
}
