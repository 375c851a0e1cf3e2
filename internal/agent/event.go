package agent

import (
	"context"
	"time"

	"github.com/terpdev/terp/internal/kernel"
	"github.com/terpdev/terp/internal/llm"
	"github.com/terpdev/terp/internal/pubsub"
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

// ToolCall announces code the model asked to run, or a call to one of the
// caller's client tools (Config.ClientTools), which terp does not run: no
// ToolOutput follows that one.
type ToolCall struct {
	Step int
	ID   string
	Name string
	// Code is the Python source, empty when the arguments were unusable
	// and for a client tool's call.
	Code string
	// Arguments are a client tool call's, the JSON text the model sent.
	Arguments string
}

// CodeDelta is a piece of a run_python call's code as the model writes it,
// before the call is complete, for a live view of the code. ID is the id
// the call's ToolCall will carry. Deltas may be dropped when the consumer is
// slow, and there are none when the server does not stream the call; the
// ToolCall carries the whole code.
type CodeDelta struct {
	Step int
	ID   string
	Text string
}

// OutputDelta is a piece of what the running code printed, as it prints it,
// for a live view of a long run. Output that comes fast arrives merged, at
// most every 10 ms, and cut to its last 32 KiB (kernel.WithOutput), so a
// delta may start where an earlier one did not end; ToolOutput carries the
// whole output.
type OutputDelta struct {
	Step int
	ID   string // the ToolCall's
	// Stream is "stdout" or "stderr".
	Stream string
	// Text may end inside a line, or inside a UTF-8 character that the
	// next delta completes (unless output between them was cut).
	Text string
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
	// Stopped is set when the turn ended while the code ran, and says why
	// and when, as the model is told: "cancelled by the user after 4.0 s".
	// Stdout and Stderr are then what the code printed until it stopped.
	Stopped string
	// Error is set when the call could not run at all (bad arguments, an
	// unknown tool, a sandbox failure); the model is told the same text.
	Error string
	Files []string
	// Value is the repr of the code's last expression, which Stdout ends
	// with (kernel mode); "" when it had none.
	Value string
	// Cell, Figures, Outcome, Exception and Restart are the run's facts
	// beneath the words above (see kernel.Result), for a front-end that
	// forwards them in a protocol's own messages: the execution count, the
	// images saved (relative to /work, also among Files), how the run
	// ended, the exception that ended it, and how the session ended during
	// it. They are unset when the call could not run.
	Cell      int
	Figures   []string
	Outcome   kernel.Outcome
	Exception *kernel.Exception
	Restart   *kernel.Restart
	Duration  time.Duration
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
func (CodeDelta) isEvent()      {}
func (ToolCall) isEvent()       {}
func (OutputDelta) isEvent()    {}
func (ToolOutput) isEvent()     {}
func (FileSaved) isEvent()      {}
func (UsageUpdated) isEvent()   {}
func (Answer) isEvent()         {}
func (Failed) isEvent()         {}
func (Notice) isEvent()         {}

// lossy reports whether a slow consumer may miss e. Deltas are many and
// small, and each is only a glimpse of work in progress: the answer comes
// whole in Answer, the code whole in ToolCall, its output whole in ToolOutput, and the reasoning
// is never needed again, so a consumer that falls behind loses part of the
// animation and nothing else. Any other event is something a user, a log or
// a stored transcript would miss.
func lossy(e Event) bool {
	switch e.(type) {
	case TextDelta, ReasoningDelta, CodeDelta, OutputDelta:
		return true
	}
	return false
}

// Publish sends e to b's subscribers by the one rule every front-end shares:
// deltas are dropped when a subscriber is full, every other event waits
// for it, until ctx ends. It is the only place that decides which events may
// be lost; consumers subscribe to b and read what arrives.
func Publish(ctx context.Context, b *pubsub.Broker[Event], e Event) {
	if lossy(e) {
		b.Publish(ctx, e)
		return
	}
	_ = b.Deliver(ctx, e) // ctx ended or b closed: nobody is left to tell
}

// Sender returns the send function Ask takes, publishing on b with Publish.
// ctx bounds how long the loop waits for a slow consumer: the consumer's
// lifetime (the chat's, say), not the turn's, so the events of a cancelled
// turn still reach a screen that is there to show them.
func Sender(ctx context.Context, b *pubsub.Broker[Event]) func(Event) {
	return func(e Event) { Publish(ctx, b, e) }
}
