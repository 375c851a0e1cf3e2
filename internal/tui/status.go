package tui

import (
	"fmt"
	"strings"

	"github.com/charmbracelet/x/ansi"

	"github.com/terpdev/terp/internal/sanitize"
)

// status is the bottom of the screen: a line for messages (what a command
// did, what went wrong, which keys do what) and a bar of facts about the
// conversation.
type status struct {
	info Info
	// step and maxSteps are the loop's position in the current or last
	// turn; tokens counts the whole conversation's.
	step, maxSteps int
	tokens         int
	message        string
	isError        bool
}

// say shows a message until the next one; errors are shown as such.
func (s *status) say(msg string, isError bool) { s.message, s.isError = msg, isError }

func (s *status) clear() { s.message, s.isError = "", false }

// noticeLine is the line above the input: the message, or key hints for
// what can be done now.
func (s status) noticeLine(t *theme, width int, busy, scrolled bool) string {
	if s.message != "" {
		st := t.statusInfo
		if s.isError {
			st = t.statusError
		}
		return st.Render(truncate(sanitize.Terminal(s.message), width))
	}
	hints := "enter sends · alt+enter new line · /help · ctrl+c twice quits"
	if busy {
		hints = "ctrl+c cancels · ctrl+t thinking · ctrl+o all output · pgup/pgdn scroll"
	}
	if scrolled {
		hints = "↓ more below · esc jumps to the end · " + hints
	}
	return t.hint.Render(truncate(hints, width))
}

// bar is the line of facts: model, sandbox, step, tokens, conversation.
func (s status) bar(t *theme, width int) string {
	model := t.statusKey.Render(" " + truncate(sanitize.Terminal(s.info.Model), max(width/3, 8)) + " ")
	step := fmt.Sprintf("step %d/%d", s.step, s.maxSteps)
	if s.step == 0 {
		step = fmt.Sprintf("max %d steps", s.maxSteps)
	}
	facts := []string{s.info.Sandbox, step, tokensText(s.tokens) + " tokens", s.info.ID}
	rest := " " + strings.Join(facts, " · ") + " "
	room := max(width-ansi.StringWidth(model), 0)
	return model + t.statusBar.Render(padRight(truncate(rest, room), room))
}
