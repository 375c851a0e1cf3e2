package tui

import (
	"regexp"
	"strings"
	"sync"

	"github.com/charmbracelet/x/ansi"
	"github.com/muesli/termenv"

	"github.com/terpdev/terp/internal/sanitize"
	"github.com/terpdev/terp/internal/tui/glamour"
)

// markdown renders the model's answers with glamour. Building a glamour
// renderer parses its whole style, so one is kept per width; rendered
// answers are remembered, because the transcript is drawn again on every
// tick of a spinner.
type markdown struct {
	style     string
	profile   termenv.Profile
	renderers map[int]*glamour.TermRenderer
	memo      *memo
}

func newMarkdown(style string, profile termenv.Profile) *markdown {
	return &markdown{style: style, profile: profile, renderers: map[int]*glamour.TermRenderer{}, memo: newMemo(64)}
}

// render returns text, from the model, as terminal lines at most width
// wide. Escape sequences in text are neutralized before glamour sees it, so
// only glamour's own styling reaches the terminal.
func (m *markdown) render(text string, width int) []string {
	key := memoKey{kind: "md", text: text, width: width}
	if lines, ok := m.memo.get(key); ok {
		return lines
	}
	clean := sanitize.Terminal(text)
	var lines []string
	r, err := m.renderer(width)
	if err == nil {
		var out string
		if out, err = r.Render(clean); err == nil {
			lines = strings.Split(strings.Trim(out, "\n"), "\n")
			for i, l := range lines {
				lines[i] = trimRight(l)
			}
		}
	}
	if err != nil {
		// Glamour fails only on a broken style; the text still matters
		// more than its looks.
		lines = wrap(clean, width)
	}
	m.memo.put(key, lines)
	return lines
}

func (m *markdown) renderer(width int) (*glamour.TermRenderer, error) {
	if r, ok := m.renderers[width]; ok {
		return r, nil
	}
	r, err := glamour.NewTermRenderer(
		glamour.WithStandardStyle(m.style),
		glamour.WithColorProfile(m.profile),
		glamour.WithWordWrap(max(width-4, 20)),
	)
	if err != nil {
		return nil, err
	}
	m.renderers[width] = r
	return r, nil
}

// trailingBlank is the padding glamour ends every line with: spaces, each
// wrapped in its own colour.
var trailingBlank = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile("(?:\x1b\\[[0-9;]*m| )+$")
})

// trimRight drops that padding, which would otherwise be drawn cell by
// cell and keep lines from being shorter than the screen.
func trimRight(line string) string {
	trimmed := trailingBlank().ReplaceAllString(line, "")
	if trimmed == line {
		return line
	}
	if ansi.StringWidth(trimmed) == 0 {
		return ""
	}
	return trimmed + ansi.ResetStyle
}
