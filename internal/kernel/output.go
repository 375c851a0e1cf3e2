package kernel

import (
	"context"

	"github.com/terpdev/terp/internal/pubsub"
)

// The streams a run prints on, as Output names them.
const (
	Stdout = "stdout"
	Stderr = "stderr"
)

// Output is a piece of what a run printed, reported while it runs.
type Output struct {
	// Stream is Stdout or Stderr.
	Stream string
	// Text is the bytes as printed: a piece may end inside a line, or
	// inside a UTF-8 character that the next piece completes.
	Text string
}

type outputKey struct{}

// outputHook is what WithOutput and WithAllOutput put on a context.
type outputHook struct {
	fn func(Output)
	// all asks for every piece, at the cost of holding the code up.
	all bool
}

// WithOutput returns a context under which Run reports the code's output to
// fn as it is printed, for a person watching a long run. The hook rides on
// the context, as net/http/httptrace's do on a request's, so that Runner
// stays one method and a wrapper around a Runner passes it on unawares.
//
// fn is called on a goroutine of its own, one call at a time, in the order
// the output arrived, and never once Run has returned. A slow fn never holds
// up the code: pieces that arrive while outputQueue others wait for fn are
// dropped (pubsub's lossy Publish), since Result has the whole output
// (within its bounds) anyway.
//
// Kernel reports output as the worker forwards it, in both modes.
func WithOutput(ctx context.Context, fn func(Output)) context.Context {
	return context.WithValue(ctx, outputKey{}, outputHook{fn: fn})
}

// WithAllOutput is WithOutput for a consumer that must pass on every byte
// the code prints, in order (a protocol's stream messages): no piece is
// dropped, and a slow fn holds the code up instead, as a slow terminal
// does: the worker waits for fn (pubsub's must-deliver Deliver), and the
// code waits for the worker once the pipes between them are full. Run
// returns only after fn has had every piece of the run.
//
// The waiting is bounded by Run's ctx, so that a consumer that stops
// reading cannot hold a run forever once ctx ends: what is printed after
// the run's timeout passed (when the code must stop within Options.Grace,
// and waiting for fn would keep it from it) is sent as WithOutput sends it,
// and once ctx has ended nothing more is sent, and Run returns without
// waiting for fn, not even for a call in progress (fn is then called no
// more).
func WithAllOutput(ctx context.Context, fn func(Output)) context.Context {
	return context.WithValue(ctx, outputKey{}, outputHook{fn: fn, all: true})
}

// outputQueue is how many pieces of output wait for a slow output function:
// before more are dropped (WithOutput), or before the worker waits
// (WithAllOutput).
const outputQueue = 64

// feed hands one run's output to its output function, through a broker
// with one subscriber, so that whether a piece may be dropped is decided by
// pubsub's one rule. A nil feed drops everything, for a run nobody watches.
type feed struct {
	all    bool
	ctx    context.Context // the run's
	broker *pubsub.Broker[Output]
	// patient bounds how long a piece waits for a slow function
	// (WithAllOutput): until the run's ctx ends, or hurry is called.
	patient context.Context
	cancel  context.CancelFunc
	quit    chan struct{} // closed by stop to drop what is queued
	done    chan struct{} // closed when the calls have ended
}

// startFeed starts calling the output function on ctx (if any) with what
// send queues; a ctx without one gives a nil feed.
func startFeed(ctx context.Context) *feed {
	h, _ := ctx.Value(outputKey{}).(outputHook)
	if h.fn == nil {
		return nil
	}
	f := &feed{all: h.all, ctx: ctx, broker: pubsub.New[Output](outputQueue),
		quit: make(chan struct{}), done: make(chan struct{})}
	f.patient, f.cancel = context.WithCancel(ctx)
	pieces := f.broker.Subscribe(ctx)
	go func() {
		defer close(f.done)
		for {
			select {
			case <-f.quit:
				return
			case o, ok := <-pieces:
				if !ok || (f.all && ctx.Err() != nil) {
					return
				}
				h.fn(o)
			}
		}
	}()
	return f
}

// send queues a copy of p. It waits while the function is outputQueue pieces
// behind when it must get every piece and has not been hurried; otherwise
// it drops p then, and never waits.
func (f *feed) send(stream string, p []byte) {
	if f == nil {
		return
	}
	o := Output{Stream: stream, Text: string(p)}
	if f.all && f.patient.Err() == nil {
		// A piece that its end of patience cut short is lost to the live
		// view only: the run's Result has it.
		_ = f.broker.Deliver(f.patient, o)
		return
	}
	f.broker.Publish(f.ctx, o)
}

// stop ends the calls: it waits for the one in progress. What is still
// queued is dropped, unless every piece must be passed on: then it waits
// for the function to take them all, or for the run's ctx to end, and
// once ctx has ended it waits for nothing, not even a call in progress,
// since that call may be the consumer that stopped reading.
func (f *feed) stop() {
	if f == nil {
		return
	}
	defer f.hurry()
	if f.all {
		// Close waits for a Deliver in progress, which the calls (or ctx's
		// end) let go, and ends the subscription after what is queued.
		f.broker.Close()
		select {
		case <-f.done:
		case <-f.ctx.Done():
			// The calls see ctx's end before the next one.
			close(f.quit)
		}
		return
	}
	close(f.quit)
	f.broker.Close()
	<-f.done
}

// hurry makes the pieces that follow lossy, and lets go of one waiting for
// the function: the run must now end soon. A nil feed ignores it.
func (f *feed) hurry() {
	if f != nil {
		f.cancel()
	}
}

// feedWriter sends what is written to it to a feed, as one stream.
type feedWriter struct {
	f      *feed
	stream string
}

func (w feedWriter) Write(p []byte) (int, error) {
	w.f.send(w.stream, p)
	return len(p), nil
}
