package kernel

import "context"

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

// WithOutput returns a context under which Run reports the code's output to
// fn as it is printed, for a person watching a long run. The hook rides on
// the context, as net/http/httptrace's do on a request's, so that Runner
// stays one method and a wrapper around a Runner passes it on unawares.
//
// fn is called on a goroutine of its own, one call at a time, in the order
// the output arrived, and never once Run has returned. A slow fn never holds
// up the code: pieces that arrive while outputQueue others wait for fn are
// dropped, since Result has the whole output (within its bounds) anyway.
//
// Kernel reports output as the worker forwards it. Script reports none: it
// runs the code with Sandbox.Exec, which hands the output over at the end,
// and so its output comes in Result only.
func WithOutput(ctx context.Context, fn func(Output)) context.Context {
	return context.WithValue(ctx, outputKey{}, fn)
}

func outputFunc(ctx context.Context) func(Output) {
	fn, _ := ctx.Value(outputKey{}).(func(Output))
	return fn
}

// outputQueue is how many pieces of output wait for a slow WithOutput
// function before more are dropped.
const outputQueue = 64

// feed hands one run's output to its WithOutput function. A nil feed drops
// everything, for a run nobody watches.
type feed struct {
	queue chan Output
	quit  chan struct{}
	done  chan struct{}
}

// startFeed starts calling fn with what send queues; nil fn gives a nil feed.
func startFeed(fn func(Output)) *feed {
	if fn == nil {
		return nil
	}
	f := &feed{queue: make(chan Output, outputQueue), quit: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(f.done)
		for {
			select {
			case <-f.quit:
				return
			case o := <-f.queue:
				fn(o)
			}
		}
	}()
	return f
}

// send queues a copy of p, or drops it when fn is outputQueue pieces behind.
// It never waits.
func (f *feed) send(stream string, p []byte) {
	if f == nil || len(f.queue) == cap(f.queue) {
		return
	}
	select {
	case f.queue <- Output{Stream: stream, Text: string(p)}:
	default:
	}
}

// stop ends the calls: it waits for the one in progress, and what is still
// queued is dropped.
func (f *feed) stop() {
	if f == nil {
		return
	}
	close(f.quit)
	<-f.done
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
