package tui

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/terpdev/terp/internal/agent"
)

// activeStep is the step the running turn is on.
func (m *Model) activeStep() *step {
	if m.job == nil || len(m.job.steps) == 0 {
		return nil
	}
	return m.job.steps[len(m.job.steps)-1]
}

// event shows one event of the running turn.
func (m *Model) event(e agent.Event) {
	if m.job == nil || m.job.stream == nil {
		return
	}
	s := m.activeStep()
	if st, ok := e.(agent.StepStarted); ok {
		if s != nil {
			s.running = false
			m.transcript.touch(s)
		}
		s = &step{n: st.Step, max: st.MaxSteps, started: m.clock, running: true}
		m.job.steps = append(m.job.steps, s)
		m.transcript.add(s)
		m.status.step, m.status.maxSteps = st.Step, st.MaxSteps
		return
	}
	if s == nil {
		// Every other event belongs to a step; a loop that failed
		// before its first one still reports the failure.
		if f, ok := e.(agent.Failed); ok {
			m.transcript.add(&note{kind: noteError, text: failure(f.Err)})
		}
		return
	}
	defer m.transcript.touch(s)
	if _, ok := e.(agent.ReasoningDelta); !ok && s.thought.IsZero() {
		s.thought = m.clock
	}
	switch e := e.(type) {
	case agent.ReasoningDelta:
		s.reasoning += e.Text
	case agent.TextDelta:
		s.text += e.Text
	case agent.ToolCall:
		s.calls = append(s.calls, &call{code: e.Code, started: m.clock})
	case agent.OutputDelta:
		if c := lastCall(s); c != nil && c.out == nil {
			c.live.Add(e)
		}
	case agent.ToolOutput:
		if c := lastCall(s); c != nil {
			out := e
			c.out = &out
		}
	case agent.FileSaved:
		if c := lastCall(s); c != nil {
			c.files = append(c.files, &savedFile{name: e.Path, bytes: e.Bytes})
		}
	case agent.UsageUpdated:
		m.status.tokens = m.job.tokensBefore + e.Usage.TotalTokens
	case agent.Answer:
		s.answered = true
		m.transcript.add(&answer{text: e.Text})
	case agent.Failed:
		m.transcript.add(&note{kind: noteError, text: failure(e.Err)})
	}
}

func lastCall(s *step) *call {
	if len(s.calls) == 0 {
		return nil
	}
	return s.calls[len(s.calls)-1]
}

// failure words an error that ended a turn, with what to do next.
func failure(err error) string {
	return err.Error() + "\nThe conversation goes on: ask again, or /new for a fresh sandbox."
}

// turnDone closes the turn: it stops the spinners, shows the downloads
// under the steps that saved them and says how the turn ended.
func (m *Model) turnDone(msg turnDoneMsg) {
	if m.job == nil {
		return
	}
	steps := m.job.steps
	m.job = nil
	for _, s := range steps {
		s.running = false
		for _, c := range s.calls {
			c.stopped = c.out == nil
		}
		m.transcript.touch(s)
	}
	for _, d := range msg.files {
		f := findSaved(steps, d.Name)
		if f == nil {
			f = &savedFile{name: d.Name, bytes: d.Bytes}
			m.transcript.add(&fileEntry{f: f})
		}
		m.attach(f, d)
	}
	for _, w := range msg.turn.Warnings {
		m.transcript.add(&note{kind: noteCancelled, text: w})
	}
	switch {
	case errors.Is(msg.err, context.Canceled):
		m.transcript.add(&note{kind: noteCancelled, text: "Cancelled. The conversation goes on: ask the next question."})
		m.status.say("Cancelled.", false)
	case msg.err != nil:
		m.status.say("The turn failed: "+firstLine(msg.err.Error()), true)
	case msg.turn.Result.StopReason == agent.MaxSteps:
		m.status.say(fmt.Sprintf("Stopped at the step cap (%d); /steps N raises it.", msg.turn.Result.Steps), true)
	}
	m.transcript.toEnd()
}

// attach shows a download where the file was saved.
func (m *Model) attach(f *savedFile, d download) {
	f.path, f.abs, f.problem, f.pic = d.Path, d.abs, d.problem, d.pic
	if f.pic != nil {
		m.lastImageID++
		f.pic.id = m.lastImageID
	}
}

// findSaved returns the last place the turn saved name.
func findSaved(steps []*step, name string) *savedFile {
	for i := len(steps) - 1; i >= 0; i-- {
		for j := len(steps[i].calls) - 1; j >= 0; j-- {
			for _, f := range steps[i].calls[j].files {
				if f.name == name {
					return f
				}
			}
		}
	}
	return nil
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}

// fileEntry shows a file on its own: one fetched with /download.
type fileEntry struct{ f *savedFile }

func (e *fileEntry) render(rc *renderContext) block {
	var b block
	e.f.render(&b, rc)
	b.add("")
	return b
}
