package kernel

import (
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path"
	"strings"
	"sync"
	"time"

	"github.com/terpdev/terp/internal/sandbox"
	"github.com/terpdev/terp/internal/sanitize"
)

// workerSource is the Python side of the kernel. It is written into every
// sandbox rather than installed, so the sandbox needs nothing but python3.
//
//go:embed worker.py
var workerSource string

// notebookSource is the worker's notebook layer (IPython's syntax, magics
// and display()), which the worker reads at start and runs only when a run
// needs it. A file of its own, so that worker.py stays whole by itself (it
// also runs alone, for a repair).
//
//go:embed notebook.py
var notebookSource string

// workerPath and notebookPath are where they live inside the sandbox.
var (
	workerPath   = path.Join(sandbox.WorkDir, InternalDir, "worker.py")
	notebookPath = path.Join(sandbox.WorkDir, InternalDir, "notebook.py")
)

// How long terp waits for a worker that should be going away: after the
// frame stream ended, for the process to exit by itself, and after SIGKILL,
// for the sandbox to report it dead.
const (
	exitWait = 2 * time.Second
	killWait = 10 * time.Second
)

// worker is one running worker process and what its streams said. Its
// goroutines read everything the process writes, always, so the process can
// never block on a full pipe because terp is not reading.
type worker struct {
	proc       sandbox.Process
	readyNonce string

	ready chan struct{} // closed when the ready frame arrived
	// warm is closed when the prewarm imports are over (the warm frame),
	// or with ready when there are none (Kernel.Warmed follows the first
	// worker's).
	warm       chan struct{}
	prewarming bool          // the worker was started with imports to make
	gone       chan struct{} // closed when the frame stream ended or broke
	exited     chan struct{} // closed when the process has exited
	diagDone   chan struct{} // closed when its stderr is drained
	frames     *frameReader
	// cells counts the requests sent, by which the worker numbers its
	// cells; it belongs to the Run in progress.
	cells int

	mu       sync.Mutex
	info     readyMsg // valid once ready is closed
	run      *runSink // the run in progress, nil between runs
	readErr  error    // why gone was closed; nil until then
	diag     *sandbox.Capture
	runDiag  *sandbox.Capture // stderr written during the current run
	exitCode int              // valid once exited is closed
	waitErr  error
}

// runSink is where the frames of the run in progress go.
type runSink struct {
	nonce    string
	cell     int // the run's Result.Cell
	out, err *runStream
	live     *feed        // the run's output function; nil if none
	done     chan doneMsg // buffered, receives the run's done frame
	finished bool         // done arrived; later frames are stray
}

// newRunSink makes the sink of a run whose output is bounded by opt, and
// whose live feed (nil for none) gets it as it comes.
func newRunSink(opt Options, live *feed) *runSink {
	return &runSink{
		nonce: newNonce(),
		out:   newRunStream(opt.MaxStdout),
		err:   newRunStream(opt.MaxStderr),
		live:  live,
		done:  make(chan doneMsg, 1),
	}
}

// writer is where the payload of an out or err frame goes: the run's
// stream, and its output function if it has one.
func (s *runSink) writer(kind string) io.Writer {
	rs, stream := s.out, Stdout
	if kind == kindErr {
		rs, stream = s.err, Stderr
	}
	if s.live == nil {
		return rs
	}
	return io.MultiWriter(rs, feedWriter{f: s.live, stream: stream})
}

// runStream is one of a run's streams as the model reads it: what a
// terminal would leave of it (sanitize.Screen: a progress bar redrawn with
// carriage returns 3,000 times is its last state, colour codes are gone),
// cut to its bound, head and tail. The bound applies to the rendered text,
// so that it holds what a person would read. The live feed gets the raw
// pieces, for a screen of its own to draw; the record keeps what the model
// read.
type runStream struct {
	mu     sync.Mutex // the frame reader writes, Run reads at the end
	screen *sanitize.Screen
	c      *sandbox.Capture
}

func newRunStream(limit int) *runStream {
	c := sandbox.NewCapture(limit)
	return &runStream{screen: sanitize.NewScreen(c), c: c}
}

// Write renders p onto the stream. It never fails: the Capture behind it
// does not.
func (r *runStream) Write(p []byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	_, _ = r.screen.Write(p)
	return len(p), nil
}

// String is the stream's text: its unfinished last line as it stands, then
// everything kept. Writes may follow (a note terp adds), and start a new
// line of the screen.
func (r *runStream) String() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	_ = r.screen.Flush()
	return r.c.String()
}

// Total is how many bytes of rendered text the stream holds, kept or not.
func (r *runStream) Total() int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	_ = r.screen.Flush()
	return r.c.Total()
}

// startWorker writes the worker's source and starts it. It returns at once,
// and ready is closed when the interpreter has started; the prewarm imports
// go on in the worker's own thread. ctx bounds the process's life.
func startWorker(ctx context.Context, sbx sandbox.Sandbox, opt Options) (*worker, error) {
	// One after the other: a repair of the directory (writeInternal) must
	// not run twice at once.
	for _, f := range []struct{ path, source string }{{notebookPath, notebookSource}, {workerPath, workerSource}} {
		if err := writeInternal(ctx, sbx, f.path, f.source); err != nil {
			return nil, fmt.Errorf("write the Python worker: %w", err)
		}
	}
	nonce := newNonce()
	cmd := []string{"python3", workerPath, "--nonce", nonce}
	if opt.Fresh {
		cmd = append(cmd, "--fresh")
	}
	if opt.ValueApart {
		cmd = append(cmd, "--value-apart")
	}
	if len(opt.Prewarm) > 0 {
		cmd = append(cmd, "--prewarm", strings.Join(opt.Prewarm, ","))
	}
	proc, err := sbx.Start(ctx, cmd, sandbox.ExecOptions{Dir: sandbox.WorkDir, Env: pythonEnv})
	if err != nil {
		return nil, fmt.Errorf("start the Python worker: %w", err)
	}
	w := &worker{
		proc:       proc,
		readyNonce: nonce,
		ready:      make(chan struct{}),
		warm:       make(chan struct{}),
		prewarming: len(opt.Prewarm) > 0,
		gone:       make(chan struct{}),
		exited:     make(chan struct{}),
		diagDone:   make(chan struct{}),
		diag:       sandbox.NewCapture(8 << 10),
	}
	w.frames = newFrameReader(proc.Stdout())
	w.frames.watchStalls(frameStall, w.fail)
	go w.readFrames(proc.Stdout())
	go w.readDiag(proc.Stderr())
	go func() {
		code, err := proc.Wait()
		w.mu.Lock()
		w.exitCode, w.waitErr = code, err
		w.mu.Unlock()
		close(w.exited)
	}()
	return w, nil
}

// readFrames dispatches the worker's frames until its stdout ends or breaks
// the protocol.
func (w *worker) readFrames(r io.Reader) {
	w.fail(w.dispatch(w.frames))
	// Whatever else arrives is ignored, but read, so a worker that a backend
	// could not kill never blocks on a full pipe.
	_, _ = io.Copy(io.Discard, r)
}

// fail ends the frame stream for the reason err (io.EOF for a plain end);
// the first reason given is kept. A worker that broke the protocol is
// killed: nothing it says can be trusted any more.
func (w *worker) fail(err error) {
	w.mu.Lock()
	first := w.readErr == nil
	if first {
		w.readErr = err
	}
	w.mu.Unlock()
	if !first {
		return
	}
	close(w.gone)
	if !errors.Is(err, io.EOF) {
		_ = w.proc.Signal(sandbox.SIGKILL)
	}
}

func (w *worker) dispatch(fr *frameReader) error {
	for {
		h, err := fr.header()
		if err != nil {
			return err
		}
		select {
		case <-w.gone:
			// The stall watch judged the stream broken while this header
			// arrived: what follows is not the worker's.
			return io.EOF
		default:
		}
		switch h.kind {
		case kindOut, kindErr:
			out, err := w.output(h)
			if err != nil {
				return err
			}
			if err := fr.copyPayload(out, h.size); err != nil {
				return err
			}
		case kindReady:
			data, err := fr.payload(h.size)
			if err != nil {
				return err
			}
			if err := w.onReady(h, data); err != nil {
				return err
			}
		case kindDone:
			data, err := fr.payload(h.size)
			if err != nil {
				return err
			}
			if err := w.onDone(h, data); err != nil {
				return err
			}
		case kindWarm:
			if _, err := fr.payload(h.size); err != nil {
				return err
			}
			if err := w.onWarm(h); err != nil {
				return err
			}
		}
	}
}

// output returns where an out or err frame's payload goes: the current
// run's capture and live feed.
func (w *worker) output(h frameHeader) (io.Writer, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	s := w.run
	if s == nil || s.finished || s.nonce != h.nonce {
		return nil, stray(h)
	}
	return s.writer(h.kind), nil
}

// stray is the error for a frame that belongs to no run in progress. The
// worker never sends one (it drops what a run's readers forward after the
// run's end), so one came from the code, and honouring its size would let
// its payload swallow the worker's real frames.
func stray(h frameHeader) error {
	return fmt.Errorf("%w: a frame of kind %s with nonce %.16s belongs to no run in progress", errProtocol, h.kind, h.nonce)
}

func (w *worker) onReady(h frameHeader, data []byte) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	select {
	case <-w.ready:
		return fmt.Errorf("%w: a second ready frame", errProtocol)
	default:
	}
	if h.nonce != w.readyNonce {
		return fmt.Errorf("%w: a ready frame with nonce %.16s, not the worker's", errProtocol, h.nonce)
	}
	if err := json.Unmarshal(data, &w.info); err != nil {
		return fmt.Errorf("%w: bad ready message: %v", errProtocol, err)
	}
	close(w.ready)
	if !w.prewarming {
		close(w.warm)
	}
	return nil
}

// onWarm takes the warm frame: once, after ready, with ready's nonce, from
// a worker that had imports to make.
func (w *worker) onWarm(h frameHeader) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	select {
	case <-w.ready:
	default:
		return fmt.Errorf("%w: a warm frame before the ready frame", errProtocol)
	}
	select {
	case <-w.warm:
		return fmt.Errorf("%w: a second warm frame, or one from a worker with no imports to make", errProtocol)
	default:
	}
	if h.nonce != w.readyNonce {
		return fmt.Errorf("%w: a warm frame with nonce %.16s, not the worker's", errProtocol, h.nonce)
	}
	close(w.warm)
	return nil
}

func (w *worker) onDone(h frameHeader, data []byte) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	s := w.run
	if s == nil || s.finished || s.nonce != h.nonce {
		return stray(h)
	}
	var msg doneMsg
	if err := json.Unmarshal(data, &msg); err != nil {
		return fmt.Errorf("%w: bad done message: %v", errProtocol, err)
	}
	s.finished = true
	s.done <- msg // buffered for exactly this one message
	return nil
}

// readDiag keeps the tail of the worker's own stderr, for start-up failures,
// and what it wrote during the current run, for crash reports.
func (w *worker) readDiag(r io.Reader) {
	defer close(w.diagDone)
	buf := make([]byte, 4<<10)
	for {
		n, err := r.Read(buf)
		if n > 0 {
			w.mu.Lock()
			_, _ = w.diag.Write(buf[:n])
			if w.runDiag != nil {
				_, _ = w.runDiag.Write(buf[:n])
			}
			w.mu.Unlock()
		}
		if err != nil {
			return
		}
	}
}

// begin makes s the run in progress.
func (w *worker) begin(s *runSink) {
	w.mu.Lock()
	w.run = s
	w.runDiag = sandbox.NewCapture(8 << 10)
	w.mu.Unlock()
}

// end forgets the run in progress and returns what the worker wrote on its
// own stderr meanwhile.
func (w *worker) end() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.run = nil
	d := w.runDiag
	w.runDiag = nil
	if d == nil {
		return ""
	}
	return d.String()
}

// isGone reports whether the worker can no longer run anything.
func (w *worker) isGone() bool {
	select {
	case <-w.gone:
		return true
	case <-w.exited:
		return true
	default:
		return false
	}
}

// streamErr is why the frame stream ended; io.EOF for a plain end.
func (w *worker) streamErr() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.readErr
}

// exitStatus is the process's exit code, once exited is closed.
func (w *worker) exitStatus() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.exitCode
}

// stopReason is why the sandbox stopped the worker for breaking one of its
// limits (a /work grown past max_work_size), or "".
func (w *worker) stopReason() string {
	if sr, ok := w.proc.(sandbox.StopReporter); ok {
		return sr.StopReason()
	}
	return ""
}

// diagnostics is the tail of the worker's stderr, trimmed.
func (w *worker) diagnostics() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return strings.TrimSpace(w.diag.String())
}

// awaitExit waits up to d for the process to exit. If it does not, it is
// killed and waited for up to killWait. It reports whether the process is
// known to be dead.
func (w *worker) awaitExit(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-w.exited:
		return true
	case <-t.C:
	}
	return w.kill()
}

// kill sends SIGKILL (through the sandbox, which kills everything the worker
// started too) and waits up to killWait for the process and its streams to
// end. It reports whether the process is known to be dead.
func (w *worker) kill() bool {
	_ = w.proc.Signal(sandbox.SIGKILL)
	t := time.NewTimer(killWait)
	defer t.Stop()
	for _, c := range []chan struct{}{w.exited, w.gone} {
		select {
		case <-c:
		case <-t.C:
			return false
		}
	}
	return true
}

// awaitVerdict waits, while a frame is in progress and no frame completes,
// for the stall watch to judge it, or for the stream to end. It reports
// whether the stream is broken, so that a run the code stalled by cutting a
// frame short is reported as that, not as the timeout the stall caused.
// A stream that flows returns at once.
func (w *worker) awaitVerdict() bool {
	busy, before := w.frames.stall.progress()
	if busy {
		deadline := time.NewTimer(frameStall + 100*time.Millisecond)
		defer deadline.Stop()
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
	wait:
		for {
			select {
			case <-w.gone:
				break wait
			case <-deadline.C:
				break wait
			case <-tick.C:
				if busy, done := w.frames.stall.progress(); !busy || done != before {
					break wait
				}
			}
		}
	}
	return errors.Is(w.streamErr(), errProtocol)
}

// awaitDiag waits a little for the worker's stderr to be drained, so that a
// crash report written just before the process died is complete.
func (w *worker) awaitDiag() {
	t := time.NewTimer(exitWait)
	defer t.Stop()
	select {
	case <-w.diagDone:
	case <-t.C:
	}
}
