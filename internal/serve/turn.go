package serve

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/terpdev/terp/internal/agent"
	"github.com/terpdev/terp/internal/conversation"
	"github.com/terpdev/terp/internal/kernel"
)

// A model turn runs the same way whichever protocol asked for it: admitted
// under the run cap and the key's tokens, in a leased container, observed
// for the metrics and the logs, counted, and answered by a sink that
// renders its events in the protocol's words. RunTurn is that one way; a
// protocol brings a ModelTurn (how to find its container, what to ask) and
// a TurnSink (how to answer).

// TurnSink renders one turn's events as a protocol answers them.
type TurnSink interface {
	// Handle is the turn's send function: each event as it happens.
	Handle(agent.Event)
	// End sets down the turn's outcome, its failure among them, for
	// After to record and Answer to send.
	End(turn conversation.Turn, err error)
	// Answer writes what End set down: the whole answer, or a stream's
	// last events. It comes after After, so that a client that goes on
	// at once from what it was told finds the turn recorded.
	Answer(w http.ResponseWriter)
	// Streaming reports whether the answer's status has been sent, so
	// that a failure can no longer be told by a status.
	Streaming() bool
}

// ModelTurn is what a protocol hands RunTurn.
type ModelTurn struct {
	// Open finds or makes the turn's container, leased. Its error is the
	// request's answer, in the route's protocol's words (Refuse); one
	// that Forwarded takes forwards the request to the replica the
	// container is open in.
	Open func(ctx context.Context) (*Lease, error)
	// Ready readies the leased container for the turn (the files the
	// request attaches, headers) and returns what to ask and the sink
	// that answers.
	Ready func(ctx context.Context, c *Container) (conversation.TurnRequest, TurnSink, error)
	// After records what the protocol keeps of a turn that ran, before it
	// is answered; a turn refused as busy ran nothing and is not recorded.
	After func(ctx context.Context, c *Container, turn conversation.Turn)
}

// RunTurn runs one model turn for r and answers it.
func (s *Server) RunTurn(w http.ResponseWriter, r *http.Request, mt ModelTurn) {
	ctx, owner := r.Context(), Owner(r)
	run, err := s.beginRun(ctx, owner)
	if err != nil {
		s.Refuse(w, r, err)
		return
	}
	defer run.done()
	l, err := mt.Open(ctx)
	if err != nil {
		run.done() // the turn runs elsewhere, or not at all
		if !s.Forwarded(w, r, err) {
			s.Refuse(w, r, err)
		}
		return
	}
	defer l.Release(ctx)
	req, sink, err := mt.Ready(ctx, l.c)
	if err != nil {
		s.Refuse(w, r, err)
		return
	}
	req.Send = s.observeTurn(ctx, l.c, sink.Handle)
	turn, err := l.c.conv.Turn(ctx, req)
	s.turnDone(ctx, owner, turn, err)
	run.count(ctx, turn.Result.Usage)
	err = s.stoppedError(err)
	if ctx.Err() != nil {
		// Stopped by Abort, or the client went away: a stream is told
		// why, if anyone still reads it; an answer not yet begun is
		// refused, if Abort stopped it (else nobody is there to hear).
		switch {
		case sink.Streaming():
			sink.End(turn, err)
			sink.Answer(w)
		case s.aborted.Load():
			s.Refuse(w, r, &StoppedError{})
		}
		return
	}
	sink.End(turn, err)
	if mt.After != nil && !errors.Is(err, conversation.ErrBusy) {
		mt.After(ctx, l.c, turn)
	}
	sink.Answer(w)
}

// Exec runs code a protocol's client wrote itself, with no model, in a
// leased container: the one Exec path of the protocols whose clients write
// the code (Jupyter's kernels, LibreChat's code API, MCP's python tool). It
// holds a place under Caps.Runs as a turn does (no tokens: no model is
// asked), and is counted and logged as a turn's runs are. With onOutput
// set, every byte the code prints reaches it, in order, while it runs
// (kernel.WithAllOutput), for a protocol that streams output to its client.
func (s *Server) Exec(ctx context.Context, l *Lease, code string, onOutput func(kernel.Output)) (conversation.RunResult, error) {
	if refusal := s.lim.takeRun(); refusal != nil {
		return conversation.RunResult{}, refusal
	}
	run := &run{s: s, owner: l.c.Owner}
	defer run.done()
	if onOutput != nil {
		ctx = kernel.WithAllOutput(ctx, onOutput)
	}
	if s.cfg.LogDebug {
		s.cfg.Log.DebugContext(ctx, "code", "container", l.c.ID, "code", code)
	}
	res, err := l.c.conv.Run(ctx, code)
	out := agent.ToolOutput{ExitCode: res.ExitCode, Stdout: res.Stdout, Stderr: res.Stderr,
		Notice: res.Notice, TimedOut: res.TimedOut, Duration: res.Duration}
	if err != nil && !errors.Is(err, conversation.ErrBusy) {
		out.Error = err.Error()
	}
	if !errors.Is(err, conversation.ErrBusy) {
		s.observeRun(ctx, l.c, out)
	}
	return res, err
}

// SSE writes server-sent events, the one stream writer of every
// protocol's streamed answers.
type SSE struct {
	w http.ResponseWriter
	f http.Flusher
}

// StartSSE sends a stream's status and headers; false when the connection
// cannot stream.
func StartSSE(w http.ResponseWriter) (*SSE, bool) {
	f, ok := w.(http.Flusher)
	if !ok {
		return nil, false
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	return &SSE{w: w, f: f}, true
}

// Send writes v as one event's data, named event unless that is "".
func (s *SSE) Send(event string, v any) {
	b, _ := json.Marshal(v)
	if event != "" {
		fmt.Fprintf(s.w, "event: %s\n", event)
	}
	fmt.Fprintf(s.w, "data: %s\n\n", b)
	s.f.Flush()
}

// Done ends a stream as OpenAI's chat completions do.
func (s *SSE) Done() {
	fmt.Fprint(s.w, "data: [DONE]\n\n")
	s.f.Flush()
}
