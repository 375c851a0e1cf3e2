package kernel

import (
	"context"
	"sync"
	"time"

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
// the output arrived, and never once Run has returned. It is meant for a
// person watching, who reads no more than the last lines: every
// liveInterval at most, fn gets what was printed since, a call for each
// stream's run of pieces, merged; of that only the last liveBacklog bytes
// are kept (a piece may then start inside a line, or inside a UTF-8
// character). So a slow fn never holds up the code, and output that comes
// fast costs a copy of its tail, not of all of it. What is left when the run
// ends is passed on before Run returns. Result has the whole output (within
// its bounds) anyway.
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
// and waiting for fn would keep it from it) is sent without waiting, and
// dropped while outputQueue pieces wait for fn; and once ctx has ended
// nothing more is sent, and Run returns without waiting for fn, not even
// for a call in progress (fn is then called no more).
func WithAllOutput(ctx context.Context, fn func(Output)) context.Context {
	return context.WithValue(ctx, outputKey{}, outputHook{fn: fn, all: true})
}

// outputQueue is how many pieces of output wait for a slow output function
// of WithAllOutput before the worker waits.
const outputQueue = 64

// A WithOutput function is called at most once every liveInterval, with at
// most the last liveBacklog bytes printed since (as much as the longest
// live view, tui.Tail, holds).
const (
	liveInterval = 10 * time.Millisecond
	liveBacklog  = 32 << 10
)

// feed hands one run's output to its output function. Every piece for a
// WithAllOutput function goes through a broker with one subscriber, so that
// whether a piece may wait or be dropped is decided by pubsub's one rule; a
// WithOutput function gets what gathered meanwhile (live). A nil feed drops
// everything, for a run nobody watches.
type feed struct {
	ctx    context.Context // the run's
	broker *pubsub.Broker[Output]
	live   *liveTail // for WithOutput
	// patient bounds how long a piece waits for a slow function
	// (WithAllOutput): until the run's ctx ends, or hurry is called.
	patient context.Context
	cancel  context.CancelFunc
	quit    chan struct{} // closed by stop: the calls end
	done    chan struct{} // closed when the calls have ended
}

// startFeed starts calling the output function on ctx (if any) with what
// send queues; a ctx without one gives a nil feed.
func startFeed(ctx context.Context) *feed {
	h, _ := ctx.Value(outputKey{}).(outputHook)
	if h.fn == nil {
		return nil
	}
	f := &feed{ctx: ctx, quit: make(chan struct{}), done: make(chan struct{})}
	f.patient, f.cancel = context.WithCancel(ctx)
	if !h.all {
		f.live = &liveTail{wake: make(chan struct{}, 1)}
		go f.live.run(h.fn, f.quit, f.done)
		return f
	}
	f.broker = pubsub.New[Output](outputQueue)
	pieces := f.broker.Subscribe(ctx)
	go func() {
		defer close(f.done)
		for {
			select {
			case <-f.quit:
				return
			case o, ok := <-pieces:
				if !ok || ctx.Err() != nil {
					return
				}
				h.fn(o)
			}
		}
	}()
	return f
}

// send queues a copy of p: for a WithOutput function, of what of it the
// live tail keeps. For a WithAllOutput function it waits while the function
// is outputQueue pieces behind, unless hurried: then it drops p, and never
// waits.
func (f *feed) send(stream string, p []byte) {
	if f == nil {
		return
	}
	if f.live != nil {
		f.live.add(stream, p)
		return
	}
	o := Output{Stream: stream, Text: string(p)}
	if f.patient.Err() == nil {
		// A piece that its end of patience cut short is lost to the live
		// view only: the run's Result has it.
		_ = f.broker.Deliver(f.patient, o)
		return
	}
	f.broker.Publish(f.ctx, o)
}

// stop ends the calls: it waits for the one in progress. What a WithOutput
// function has not had yet is passed in one last call. A WithAllOutput
// function gets every piece still queued: stop waits
// for the function to take them all, or for the run's ctx to end, and
// once ctx has ended it waits for nothing, not even a call in progress,
// since that call may be the consumer that stopped reading.
func (f *feed) stop() {
	if f == nil {
		return
	}
	defer f.hurry()
	if f.live != nil {
		close(f.quit)
		<-f.done
		return
	}
	// Close waits for a Deliver in progress, which the calls (or ctx's end)
	// let go, and ends the subscription after what is queued.
	f.broker.Close()
	select {
	case <-f.done:
	case <-f.ctx.Done():
		// The calls see ctx's end before the next one.
		close(f.quit)
	}
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

// liveTail gathers a run's output for a WithOutput function between its
// calls: consecutive pieces of a stream are merged, and only the last
// liveBacklog bytes are kept. Its buffers are reused, so that output
// coming fast costs a copy of each piece's tail and no garbage.
type liveTail struct {
	mu      sync.Mutex
	pending []livePiece
	size    int
	spare   [][]byte      // buffers of pieces taken, for the next ones
	wake    chan struct{} // has a value when pending may have something
}

// livePiece is a stream's run of pieces: buf[off:].
type livePiece struct {
	stream string
	buf    []byte
	off    int
}

// add copies what of p may be passed on. It never waits for the function.
func (l *liveTail) add(stream string, p []byte) {
	if len(p) > liveBacklog {
		p = p[len(p)-liveBacklog:]
	}
	l.mu.Lock()
	if len(p) == liveBacklog {
		// It is all that is kept: the rest goes.
		for _, old := range l.pending {
			l.keep(old.buf)
		}
		l.pending, l.size = l.pending[:0], 0
	}
	n := len(l.pending)
	if n == 0 || l.pending[n-1].stream != stream {
		l.pending = append(l.pending, livePiece{stream: stream, buf: l.buffer(len(p))})
		n++
	}
	last := &l.pending[n-1]
	if len(last.buf)+len(p) > cap(last.buf) && last.off > 0 {
		// Room at the front, where the backlog was cut: move the piece there.
		last.buf = last.buf[:copy(last.buf, last.buf[last.off:])]
		last.off = 0
	}
	last.buf = append(last.buf, p...)
	l.size += len(p)
	gone := 0 // pieces cut whole
	for l.size > liveBacklog {
		first := &l.pending[gone]
		if over := l.size - liveBacklog; over < len(first.buf)-first.off {
			first.off += over
			l.size -= over
		} else {
			l.size -= len(first.buf) - first.off
			l.keep(first.buf)
			gone++
		}
	}
	l.pending = l.pending[gone:]
	l.mu.Unlock()
	select {
	case l.wake <- struct{}{}:
	default:
	}
}

// buffer returns an empty buffer for a piece of n bytes, a spare one if
// there is one; called with the lock. A new one is as large as the piece:
// a run whose streams take turns at every byte makes many small ones.
func (l *liveTail) buffer(n int) []byte {
	if k := len(l.spare); k > 0 {
		b := l.spare[k-1]
		l.spare = l.spare[:k-1]
		return b
	}
	return make([]byte, 0, max(n, 64))
}

// keep keeps buf for a piece to come, unless enough are kept; called with
// the lock.
func (l *liveTail) keep(buf []byte) {
	if len(l.spare) < 2 && cap(buf) <= 2*liveBacklog {
		l.spare = append(l.spare, buf[:0])
	}
}

// take returns what gathered, as Outputs, and empties it.
func (l *liveTail) take() []Output {
	l.mu.Lock()
	defer l.mu.Unlock()
	outs := make([]Output, len(l.pending))
	for i, p := range l.pending {
		outs[i] = Output{Stream: p.stream, Text: string(p.buf[p.off:])}
		l.keep(p.buf)
	}
	l.pending, l.size = l.pending[:0], 0
	return outs
}

// run calls fn with what gathered, at most once every liveInterval, until
// quit is closed; then once more with what is left, and closes done.
func (l *liveTail) run(fn func(Output), quit <-chan struct{}, done chan<- struct{}) {
	defer close(done)
	call := func() {
		for _, o := range l.take() {
			fn(o)
		}
	}
	defer call()
	timer := time.NewTimer(liveInterval)
	timer.Stop()
	for {
		select {
		case <-quit:
			return
		case <-l.wake:
		}
		call()
		timer.Reset(liveInterval)
		select {
		case <-quit:
			return
		case <-timer.C:
		}
	}
}
