// Package export turns a stored conversation into something to hand a
// colleague: a Jupyter notebook that runs again next to the uploads, one
// self-contained web page, or Markdown for an issue or a wiki. Build reads
// the record (and the charts, through a function the caller gives) into a
// Doc; the writers render a Doc. Nothing the model or the code wrote is
// trusted by any of them: the page escapes it all.
package export

import (
	"fmt"
	"path"
	"strings"
	"time"

	"github.com/terpdev/terp/internal/agent"
	"github.com/terpdev/terp/internal/llm"
	"github.com/terpdev/terp/internal/store"
)

// Doc is a conversation as an export shows it.
type Doc struct {
	ID, Title, Model string
	Created, Updated time.Time
	// ExecMode is "kernel" (the runs share one Python session, like a
	// notebook's cells) or "script" (each run is a Python process of its
	// own).
	ExecMode string
	// Inputs are the uploads, by their path relative to /work.
	Inputs []string
	Turns  []Turn
	// Saved are the files the code saved over the whole conversation,
	// relative to /work, in the order first saved.
	Saved []string
	// Warnings say what the export could not include (a chart it could not
	// read), for the user.
	Warnings []string
}

// Turn is one question and what came of it.
type Turn struct {
	Question string
	// Notes are what terp told the model with the question ("New files
	// uploaded: ...").
	Notes []string
	Steps []Step
	// Answer is the model's last reply of the turn; "" when it gave none.
	Answer string
}

// Step is one run of code.
type Step struct {
	// Said is what the model wrote with the call, before its code.
	Said string
	Code string
	// Stdout and Stderr are as the model received them: cut in the middle
	// when long.
	Stdout, Stderr string
	// Value is the repr of the code's last expression (kernel mode), which
	// the model read at the end of its stdout; Stdout is without it.
	Value    string
	ExitCode int
	TimedOut bool
	// Note is what terp told the model of the run (a timeout, a restart).
	Note string
	// Error is set when the call could not run at all (bad arguments).
	Error string
	// Saved are the files the run created or changed, relative to /work.
	Saved []string
	// Images are the images among Saved that could be read, in order.
	Images []Image
}

// Printed is all the run printed on stdout, as the model read it: its
// output, then its value.
func (s Step) Printed() string {
	if s.Value == "" {
		return s.Stdout
	}
	return s.Stdout + s.Value + "\n"
}

// Image is a chart (or any image) a run saved.
type Image struct {
	Name string // relative to /work
	Type string // image/png, image/jpeg, image/gif, image/svg+xml
	Data []byte
}

// ImageTypes are the images a Doc carries, by extension.
var ImageTypes = map[string]string{
	".png": "image/png", ".jpg": "image/jpeg", ".jpeg": "image/jpeg", ".gif": "image/gif", ".svg": "image/svg+xml",
}

// MaxImage bounds one image a Doc carries; a larger one is named, not
// embedded.
const MaxImage = 8 << 20

// ReadFunc reads a file of the conversation's /work, by its path relative
// to /work, up to limit bytes (an error beyond).
type ReadFunc func(name string, limit int64) ([]byte, error)

// Build reads c into a Doc. read gives the images the runs saved; nil
// leaves them out. A file saved by several runs is read once, as it is
// now: each of those runs shows its last version.
func Build(c *store.Conversation, read ReadFunc) *Doc {
	d := &Doc{ID: c.ID, Title: c.Title, Model: c.Settings.Model, Created: c.Created, Updated: c.Updated, ExecMode: c.Settings.ExecMode}
	for _, in := range c.Inputs {
		d.Inputs = append(d.Inputs, in.Name)
	}
	images := map[string]*Image{}
	seen := map[string]bool{}
	type at struct{ turn, step int }
	calls := map[string]at{} // by tool call id
	last := func() *Turn {
		if len(d.Turns) == 0 {
			d.Turns = append(d.Turns, Turn{})
		}
		return &d.Turns[len(d.Turns)-1]
	}
	for _, m := range c.Messages {
		switch m.Role {
		case llm.RoleUser:
			q, notes := splitNotes(m.Content)
			if q == "" && len(d.Turns) > 0 {
				// Notes alone (results given back as a user message):
				// not a question.
				t := last()
				t.Notes = append(t.Notes, notes...)
				continue
			}
			d.Turns = append(d.Turns, Turn{Question: q, Notes: notes})
		case llm.RoleAssistant:
			t := last()
			said := strings.TrimSpace(m.Content)
			if len(m.ToolCalls) == 0 {
				if said != "" {
					t.Answer = said
				}
				continue
			}
			for i, call := range m.ToolCalls {
				st := Step{Code: agent.CallCode(call)}
				if i == 0 {
					st.Said = said
				}
				t.Steps = append(t.Steps, st)
				calls[call.ID] = at{len(d.Turns) - 1, len(t.Steps) - 1}
			}
		case llm.RoleTool:
			where, ok := calls[m.ToolCallID]
			if !ok {
				if t := last(); len(t.Steps) > 0 {
					where, ok = at{len(d.Turns) - 1, len(t.Steps) - 1}, true
				}
			}
			if !ok {
				continue
			}
			st := &d.Turns[where.turn].Steps[where.step]
			fillResult(st, m.Content)
			if v, ok := c.Values[m.ToolCallID]; ok && strings.HasSuffix(st.Stdout, v+"\n") {
				st.Stdout, st.Value = strings.TrimSuffix(st.Stdout, v+"\n"), v
			}
			for _, f := range st.Saved {
				if !seen[f] {
					seen[f] = true
					d.Saved = append(d.Saved, f)
				}
			}
		}
	}
	// The images, once every step is in place.
	for ti := range d.Turns {
		for si := range d.Turns[ti].Steps {
			st := &d.Turns[ti].Steps[si]
			for _, f := range st.Saved {
				typ, ok := ImageTypes[strings.ToLower(path.Ext(f))]
				if !ok || read == nil {
					continue
				}
				img, done := images[f]
				if !done {
					b, err := read(f, MaxImage)
					if err != nil {
						d.Warnings = append(d.Warnings, fmt.Sprintf("/work/%s is not in the export: %v", f, err))
					} else {
						img = &Image{Name: f, Type: typ, Data: b}
					}
					images[f] = img
				}
				if img != nil {
					st.Images = append(st.Images, *img)
				}
			}
		}
	}
	return d
}

// splitNotes separates the notes terp put before a question, each a line
// in brackets, from the question.
func splitNotes(content string) (string, []string) {
	var notes []string
	q := content
	for strings.HasPrefix(q, "(") {
		i := strings.Index(q, ")\n")
		if i < 0 {
			if strings.HasSuffix(strings.TrimSpace(q), ")") {
				notes = append(notes, strings.TrimSuffix(strings.TrimPrefix(strings.TrimSpace(q), "("), ")"))
				q = ""
			}
			break
		}
		notes = append(notes, q[1:i])
		q = strings.TrimLeft(q[i+2:], "\n")
	}
	return strings.TrimSpace(q), notes
}

// fillResult reads a tool message into st.
func fillResult(st *Step, content string) {
	r, ok := agent.ReadToolMessage(content)
	if !ok {
		st.Stdout = content
		return
	}
	st.ExitCode, st.Stdout, st.Stderr, st.TimedOut, st.Note, st.Error = r.ExitCode, r.Stdout, r.Stderr, r.TimedOut, r.Note, r.Error
	for _, f := range r.Files {
		st.Saved = append(st.Saved, strings.TrimPrefix(f, "/work/"))
	}
}
