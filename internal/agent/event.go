package agent

import (
	"time"

	"github.com/terpdev/terp/internal/llm"
)

// Event is something the loop reports while it works. Every front-end (the
// plain progress printer, --json, the chat UI, batch) consumes the same
// events; the loop itself never touches a terminal. The concrete types below
// are the only events.
type Event interface{ isEvent() }

// StepStarted opens step Step of at most MaxSteps model requests.
type StepStarted struct {
	Step, MaxSteps int
}

// TextDelta is a piece of the answer as the model streams it. Deltas may be
// dropped when the consumer is slow; Answer carries the whole text.
type TextDelta struct{ Text string }

// ReasoningDelta is a piece of the model's reasoning. It is shown, never
// treated as the answer and never sent back to the model.
type ReasoningDelta struct{ Text string }

// ToolCall announces code the model asked to run.
type ToolCall struct {
	Step int
	ID   string
	Name string
	// Code is the Python source, empty when the arguments were unusable.
	Code string
}

// ToolOutput is the result of one tool call, as sent back to the model.
type ToolOutput struct {
	Step     int
	ID       string
	ExitCode int
	Stdout   string
	Stderr   string
	TimedOut bool
	// Notice tells what happened to the session (a timeout, a crash,
	// variables lost), as the model is told.
	Notice string
	// Error is set when the call could not run at all (bad arguments, an
	// unknown tool, a sandbox failure); the model is told the same text.
	Error    string
	Files    []string
	Duration time.Duration
}

// FileSaved reports a file the code created or changed in /work.
type FileSaved struct {
	Path  string // relative to /work
	Bytes int64
}

// UsageUpdated carries the tokens used so far in this turn.
type UsageUpdated struct{ Usage llm.Usage }

// Answer is the model's final text for the turn.
type Answer struct{ Text string }

// Failed reports an error that ended the turn.
type Failed struct{ Err error }

// Notice tells the user something that did not end the turn: terp went on
// with tool calls written as text, shortened the conversation to fit the
// context window, or found that the server cut it.
type Notice struct{ Text string }

func (StepStarted) isEvent()    {}
func (TextDelta) isEvent()      {}
func (ReasoningDelta) isEvent() {}
func (ToolCall) isEvent()       {}
func (ToolOutput) isEvent()     {}
func (FileSaved) isEvent()      {}
func (UsageUpdated) isEvent()   {}
func (Answer) isEvent()         {}
func (Failed) isEvent()         {}
func (Notice) isEvent()         {}

// droppable reports whether a slow consumer may miss e.
func droppable(e Event) bool {
	switch e.(type) {
	case TextDelta, ReasoningDelta:
		return true
	}
	return false
}

// Events is a channel-backed event stream. Send never blocks on a droppable
// event; every other event is delivered, waiting for the consumer as needed.
type Events struct {
	C chan Event
}

// NewEvents returns a stream with room for buffer events.
func NewEvents(buffer int) *Events { return &Events{C: make(chan Event, buffer)} }

// Send delivers e, or drops it when it is a delta and the buffer is full.
func (s *Events) Send(e Event) {
	if droppable(e) {
		select {
		case s.C <- e:
		default:
		}
		return
	}
	s.C <- e
}

// Close ends the stream; the consumer's range loop then finishes.
func (s *Events) Close() { close(s.C) }
