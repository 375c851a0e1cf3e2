package tui

import (
	"path"
	"strings"

	tea "github.com/charmbracelet/bubbletea"
)

// complete is Tab: it completes a command's name, or the path after
// /upload (reading the directory in a command).
func (m Model) complete() (Model, tea.Cmd) {
	v := m.input.value()
	if !strings.HasPrefix(v, "/") || strings.Contains(v, "\n") {
		return m, nil
	}
	if arg, ok := strings.CutPrefix(v, "/upload "); ok {
		return m, completePath(v, strings.TrimLeft(arg, " "))
	}
	if strings.Contains(v, " ") {
		return m, nil
	}
	var matches []string
	for _, c := range Commands {
		if strings.HasPrefix(c.Name, v) {
			matches = append(matches, c.Name)
		}
	}
	m.offer(v, "", matches, " ")
	return m, nil
}

// completed applies a path completion, unless the input changed meanwhile.
func (m *Model) completed(msg completionMsg) {
	if m.input.value() != msg.input {
		return
	}
	prefix := msg.input[:len(msg.input)-len(strings.TrimLeft(strings.TrimPrefix(msg.input, "/upload "), " "))]
	m.offer(msg.input, prefix, msg.matches, "")
}

// offer completes the input to the matches' common prefix and lists them
// when there are several.
func (m *Model) offer(input, prefix string, matches []string, suffix string) {
	switch len(matches) {
	case 0:
		m.status.say("No match.", true)
	case 1:
		done := matches[0]
		if !strings.HasSuffix(done, "/") {
			done += suffix
		}
		m.input.set(prefix + done)
		m.status.clear()
	default:
		m.input.set(prefix + commonPrefix(matches))
		names := make([]string, len(matches))
		for i, s := range matches {
			names[i] = path.Base(s)
			if strings.HasSuffix(s, "/") {
				names[i] += "/"
			}
		}
		m.status.say(strings.Join(names, "  "), false)
	}
	_ = input
}

func commonPrefix(ss []string) string {
	p := ss[0]
	for _, s := range ss[1:] {
		for !strings.HasPrefix(s, p) {
			p = p[:len(p)-1]
		}
	}
	return p
}
