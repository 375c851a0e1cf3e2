package tui

import (
	"context"
	"strings"

	tea "github.com/charmbracelet/bubbletea"
)

// key handles a key press: the chat's own keys first, the rest to the
// input.
func (m Model) key(k tea.KeyMsg) (Model, tea.Cmd) {
	if k.String() != "ctrl+c" {
		m.quitArmed = false
	}
	switch k.String() {
	case "ctrl+c":
		return m.interrupt()
	case "ctrl+d":
		if m.input.value() == "" {
			return m.quit()
		}
	case "enter":
		return m.submit()
	case "tab":
		return m.complete()
	case "pgup":
		m.transcript.scroll(-max(m.transcript.height-2, 1))
		return m, nil
	case "pgdown":
		m.transcript.scroll(max(m.transcript.height-2, 1))
		return m, nil
	case "up", "down":
		// With nothing typed, the arrows (and the mouse wheel, which
		// terminals turn into arrows on the alternate screen) scroll.
		if m.input.value() == "" {
			m.transcript.scroll(map[string]int{"up": -3, "down": 3}[k.String()])
			return m, nil
		}
	case "esc":
		m.transcript.toEnd()
		m.status.clear()
		return m, nil
	case "ctrl+t":
		m.thoughts = !m.thoughts
		m.transcript.touchAll()
		return m, nil
	case "ctrl+o":
		m.output = !m.output
		m.transcript.touchAll()
		return m, nil
	case "ctrl+p":
		m.input.browse(-1)
		return m, nil
	case "ctrl+n":
		m.input.browse(1)
		return m, nil
	}
	var cmd tea.Cmd
	m.input, cmd = m.input.update(k)
	return m, cmd
}

// interrupt is ctrl+c: it cancels what runs and keeps the conversation;
// with nothing running it clears the input; a second one quits. The press
// that cancels does not count towards quitting: people press ctrl+c again
// and again to stop runaway code, and must not lose the chat for it.
func (m Model) interrupt() (Model, tea.Cmd) {
	if m.job != nil && !m.job.cancelling {
		m.job.cancel()
		m.job.cancelling = true
		m.status.say("Cancelling "+m.job.what+"…; the conversation goes on.", false)
		return m, nil
	}
	if m.quitArmed {
		return m.quit()
	}
	m.quitArmed = true
	switch {
	case m.job != nil:
		m.status.say("Still stopping "+m.job.what+"… (ctrl+c again quits)", false)
	case m.input.value() != "":
		m.input.take()
		m.status.say("Cleared. ctrl+c again quits.", false)
	default:
		m.status.say("Press ctrl+c again to quit, or ctrl+d.", false)
	}
	return m, nil
}

func (m Model) quit() (Model, tea.Cmd) {
	if m.job != nil {
		m.job.cancel()
	}
	return m, tea.Quit
}

// submit sends the input: a slash command, or a question.
func (m Model) submit() (Model, tea.Cmd) {
	text := strings.TrimSpace(m.input.value())
	switch {
	case text == "":
		return m, nil
	case strings.HasPrefix(text, "/"):
		return m.command(text)
	case m.job != nil:
		m.status.say("Still busy with "+m.job.what+": wait, or press ctrl+c to cancel it.", true)
		return m, nil
	}
	m.input.take()
	m.input.remember(text)
	m.status.clear()
	m.transcript.add(&question{text: text})
	m.transcript.toEnd()

	ctx, cancel := context.WithCancel(m.ctx)
	s := newStream(m.ctx)
	m.job = &job{what: "the turn", cancel: cancel, started: m.clock, stream: s, tokensBefore: m.status.tokens}
	return m, tea.Batch(ask(ctx, m.conv, text, s), waitForEvent(s), m.startTicking())
}
