package tui

import (
	"strings"

	"github.com/terpdev/terp/internal/agent"
)

// Tail keeps the last lines a running program printed, for a live view of
// its output as agent.OutputDelta events bring it. Lines end at "\n", and a
// "\r" starts the line again, as a terminal shows a progress bar that
// redraws itself. Each stream has its own unfinished line, shown after the
// finished lines of both. However much is printed, a Tail holds at most
// tailLines lines of tailWidth bytes. The zero value is empty and ready.
//
// The chat and `terp ask`'s progress both draw from it, so the two show a
// running program alike.
type Tail struct {
	done    []TailLine // oldest first
	partial [2]partialLine
}

// TailLine is one line of a Tail, as the program printed it: it is not yet
// safe for a terminal (see sanitize.Terminal).
type TailLine struct {
	Stderr bool
	Text   string
}

type partialLine struct {
	text []byte
	// cr is set after a "\r" that may be a line ending's first half: the
	// line starts again unless a "\n" follows.
	cr bool
}

// The bounds of a Tail: more lines than any live view shows, and lines
// wider than any terminal.
const (
	tailLines = 32
	tailWidth = 1 << 10
)

// Add takes in one delta.
func (t *Tail) Add(d agent.OutputDelta) {
	i := 0
	if d.Stream == "stderr" {
		i = 1
	}
	p := &t.partial[i]
	text := d.Text
	for text != "" {
		if p.cr {
			p.cr = false
			if text[0] != '\n' {
				p.text = p.text[:0]
			}
		}
		n := strings.IndexAny(text, "\r\n")
		if n < 0 {
			n = len(text)
		}
		p.text = append(p.text, text[:min(n, max(tailWidth-len(p.text), 0))]...)
		if n == len(text) {
			return
		}
		if text[n] == '\r' {
			p.cr = true
		} else {
			t.done = append(t.done, TailLine{Stderr: i == 1, Text: string(p.text)})
			if len(t.done) > tailLines {
				t.done = append(t.done[:0], t.done[len(t.done)-tailLines:]...)
			}
			p.text = p.text[:0]
		}
		text = text[n+1:]
	}
}

// Last returns the last n lines, the unfinished ones included.
func (t *Tail) Last(n int) []TailLine {
	lines := append([]TailLine(nil), t.done...)
	for i, p := range t.partial {
		if len(p.text) > 0 {
			lines = append(lines, TailLine{Stderr: i == 1, Text: string(p.text)})
		}
	}
	lines = lines[max(len(lines)-n, 0):]
	for i := range lines {
		// A line cut at tailWidth, or still waiting for the rest of a
		// character, may end inside one.
		lines[i].Text = strings.ToValidUTF8(lines[i].Text, "")
	}
	return lines
}
