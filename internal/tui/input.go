package tui

import (
	"strings"

	"github.com/charmbracelet/bubbles/cursor"
	"github.com/charmbracelet/bubbles/key"
	"github.com/charmbracelet/bubbles/textarea"
	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/x/ansi"
)

// maxInputRows is how tall the input grows before it scrolls.
const maxInputRows = 6

// input is where the user writes: a text area that grows with its text,
// with Enter left to the parent (it sends) and Alt+Enter or Ctrl+J for a
// new line, plus a history of what was sent.
type input struct {
	ta      textarea.Model
	history []string
	// recall is the history entry shown, len(history) when none; draft
	// keeps what was being written while browsing.
	recall int
	draft  string
}

func newInput(t *theme) input {
	ta := textarea.New()
	ta.ShowLineNumbers = false
	ta.Prompt = ""
	ta.SetPromptFunc(2, func(line int) string {
		if line == 0 {
			return "❯ "
		}
		return "  "
	})
	ta.Placeholder = "Ask about your data, or type /help"
	ta.CharLimit = 0
	ta.MaxHeight = 0
	ta.FocusedStyle = t.input
	ta.BlurredStyle = t.input
	ta.KeyMap.InsertNewline = key.NewBinding(key.WithKeys("alt+enter", "ctrl+j"))
	// The terminal pastes on its own (bracketed paste); ctrl+v would read
	// the clipboard from a command that may not exist here.
	ta.KeyMap.Paste.SetEnabled(false)
	ta.Cursor.SetMode(cursor.CursorStatic)
	// The cursor is drawn in reverse video with the chat's renderer, so
	// that it shows under NO_COLOR too.
	ta.Cursor.Style = t.cursor
	ta.Focus()
	return input{ta: ta}
}

func (in *input) value() string { return in.ta.Value() }

func (in *input) set(s string) {
	in.ta.SetHeight(maxInputRows)
	in.ta.SetValue(s)
	in.ta.CursorEnd()
}

// take empties the input and returns what it held.
func (in *input) take() string {
	v := in.ta.Value()
	in.ta.Reset()
	in.recall, in.draft = len(in.history), ""
	return v
}

// remember adds a sent question to the history.
func (in *input) remember(s string) {
	if n := len(in.history); n == 0 || in.history[n-1] != s {
		in.history = append(in.history, s)
	}
	in.recall = len(in.history)
}

// browse shows the previous (d < 0) or next (d > 0) history entry.
func (in *input) browse(d int) {
	if len(in.history) == 0 {
		return
	}
	if in.recall == len(in.history) {
		in.draft = in.ta.Value()
	}
	in.recall = min(max(in.recall+d, 0), len(in.history))
	if in.recall == len(in.history) {
		in.set(in.draft)
		return
	}
	in.set(in.history[in.recall])
}

// setWidth sets the width, prompt included.
func (in *input) setWidth(w int) {
	in.ta.SetWidth(w)
	in.fit()
}

// fit makes the input as tall as its text, wrapped, up to maxInputRows.
func (in *input) fit() {
	room := max(in.ta.Width(), 1)
	rows := 0
	for _, l := range strings.Split(in.ta.Value(), "\n") {
		rows += max(1, (ansi.StringWidth(l)+room)/room)
	}
	in.ta.SetHeight(min(max(rows, 1), maxInputRows))
}

func (in *input) height() int { return in.ta.Height() }

func (in input) update(msg tea.Msg) (input, tea.Cmd) {
	var cmd tea.Cmd
	// At full height while it edits, the text area keeps its first line
	// in view; fit then shrinks it to the text.
	in.ta.SetHeight(maxInputRows)
	in.ta, cmd = in.ta.Update(msg)
	in.fit()
	return in, cmd
}

func (in input) view() string { return in.ta.View() }
