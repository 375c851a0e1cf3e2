package tui

import (
	"strings"

	"github.com/alecthomas/chroma/v2"
	"github.com/charmbracelet/x/ansi"

	"github.com/terpdev/terp/internal/highlight"
	"github.com/terpdev/terp/internal/sanitize"
)

// highlighter colours Python source for the terminal with chroma: its
// Python lexer, styles and terminal formatters, as internal/highlight copies
// them.
type highlighter struct {
	lexer     chroma.Lexer
	style     *chroma.Style
	formatter chroma.Formatter // nil: no colour (format is "" or no terminal formatter's name)
	memo      *memo
}

func newHighlighter(style, format string) *highlighter {
	return &highlighter{
		lexer:     chroma.Coalesce(highlight.Python()),
		style:     highlight.Style(style),
		formatter: highlight.Formatter(format),
		memo:      newMemo(64),
	}
}

// render returns code, from the model, as lines at most width wide. The
// code is neutralized before it is coloured, so an escape sequence in a
// string literal shows as text.
func (h *highlighter) render(code string, width int) []string {
	key := memoKey{kind: "py", text: code, width: width}
	if lines, ok := h.memo.get(key); ok {
		return lines
	}
	clean := strings.ReplaceAll(sanitize.Terminal(strings.TrimRight(code, "\n")), "\t", "    ")
	out := clean
	if h.formatter != nil && h.style != nil {
		if it, err := h.lexer.Tokenise(nil, clean); err == nil {
			var b strings.Builder
			if err := h.formatter.Format(&b, h.style, it); err == nil {
				out = b.String()
			}
		}
	}
	var lines []string
	for _, l := range strings.Split(strings.TrimRight(out, "\n"), "\n") {
		// Chroma colours per token, so a line cut in two keeps its
		// colours on both halves.
		lines = append(lines, strings.Split(ansi.Hardwrap(l, width, true), "\n")...)
	}
	h.memo.put(key, lines)
	return lines
}
