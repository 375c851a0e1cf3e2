package tui

import (
	"strings"
	"time"

	"github.com/charmbracelet/bubbles/spinner"
	"github.com/charmbracelet/x/ansi"

	"github.com/terpdev/terp/internal/sanitize"
)

// entry is one thing in the transcript: a question, a step, an answer, a
// note from terp. Entries are drawn into lines at the transcript's width.
type entry interface {
	render(rc *renderContext) block
}

// block is an entry drawn: its lines, and the images drawn over some of
// them (slot lines count from the block's first line).
type block struct {
	lines  []string
	images []imageSlot
}

func (b *block) add(lines ...string) { b.lines = append(b.lines, lines...) }

// addImage appends an image's rows, indented by col cells.
func (b *block) addImage(img imageBlock, col int) {
	if img.slot != nil {
		s := *img.slot
		s.line, s.col = len(b.lines), col
		b.images = append(b.images, s)
	}
	b.add(indent(img.lines, strings.Repeat(" ", col))...)
}

// renderContext is what entries need to draw themselves.
type renderContext struct {
	width int
	// height is the screen's, to keep images smaller than it.
	height int
	theme  *theme
	now    time.Time
	// thoughts and output say whether the reasoning and the whole output
	// of runs are shown (toggled with keys) or folded.
	thoughts, output bool
	markdown         *markdown
	code             *highlighter
	protocol         Protocol
}

// spin returns the spinner frame for a wait that began at start: the frame
// follows the clock, so drawing stays a pure function of the model.
func (rc *renderContext) spin(start time.Time) string {
	s := spinner.MiniDot
	n := int(rc.now.Sub(start) / s.FPS)
	return rc.theme.spinner.Render(s.Frames[max(n, 0)%len(s.Frames)])
}

// waiting is a spinner line with the time spent so far.
func (rc *renderContext) waiting(what string, start time.Time) string {
	return rc.spin(start) + " " + what + " " + rc.theme.dim.Render(durationText(max(rc.now.Sub(start), 0)))
}

// noteKind says how a note from terp looks.
type noteKind int

const (
	noteInfo noteKind = iota
	noteError
	noteCancelled
)

// note is a message from terp itself: the welcome, /help, /files, an
// error that ended a turn, a cancellation. Its text is terp's, but may
// quote the model, the code or the sandbox, so it is neutralized anyway.
type note struct {
	kind noteKind
	text string
}

func (n *note) render(rc *renderContext) block {
	st, mark := rc.theme.info, ""
	switch n.kind {
	case noteError:
		st, mark = rc.theme.failed, "✗ "
	case noteCancelled:
		st, mark = rc.theme.notice, "■ "
	}
	var b block
	for i, l := range wrap(mark+sanitize.Terminal(n.text), rc.width-2) {
		if i > 0 && mark != "" {
			l = "  " + l
		}
		b.add(st.Render(l))
	}
	b.add("")
	return b
}

// question is what the user asked.
type question struct{ text string }

func (q *question) render(rc *renderContext) block {
	var b block
	for i, l := range wrap(sanitize.Terminal(q.text), rc.width-2) {
		prefix := "  "
		if i == 0 {
			prefix = rc.theme.prompt.Render("❯") + " "
		}
		b.add(prefix + rc.theme.question.Render(l))
	}
	b.add("")
	return b
}

// answer is the model's final text, drawn as Markdown.
type answer struct{ text string }

func (a *answer) render(rc *renderContext) block {
	var b block
	b.add(rc.markdown.render(a.text, rc.width)...)
	b.add("")
	return b
}

// rule draws a line across the width with a label: "── step 1/8 ─────".
func rule(label string, width int) string {
	head := "── " + label + " "
	return head + strings.Repeat("─", max(width-ansi.StringWidth(head), 0))
}
