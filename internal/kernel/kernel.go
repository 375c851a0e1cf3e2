package kernel

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"sync"
	"time"

	"github.com/terpdev/terp/internal/sandbox"
)

// DefaultPrewarm is what a kernel imports at start when the configuration
// does not say otherwise: the libraries nearly every analysis begins with,
// whose import costs about a second.
var DefaultPrewarm = []string{"numpy", "pandas", "matplotlib"}

// Defaults for what Options leaves at zero.
const (
	DefaultGrace        = 2 * time.Second
	DefaultReadyTimeout = 2 * time.Minute
)

// Options configure a kernel.
type Options struct {
	// Fresh makes every run a new Python program, as `python3 main.py`
	// would run it, with nothing but files surviving from one run to the
	// next: script mode (ModeScript). The worker forks a child per run from
	// a clean interpreter rather than starting one, so a run pays neither
	// Python's start nor the sandbox's. A timeout kills the run and all it
	// started at once, with no interrupt first; a fresh worker never loses
	// anything the next run could miss, so its notices speak of the run
	// alone. Prewarm works there too: see Prewarm.
	Fresh bool
	// Prewarm lists modules the worker imports as soon as it starts, while
	// the model is still writing its first request. "matplotlib" also
	// imports matplotlib.pyplot, which builds the font cache. Modules that
	// fail to import are skipped. Empty means none.
	//
	// The imports happen in a thread of the worker, and runs do not wait
	// for them, but for code that imports more than the standard library,
	// which waits for them to end. Between runs the thread imports only while the
	// machine has idle cores (see IdleCoreGate in worker.py), so many
	// kernels on a few cores (a batch) do not spend their CPU on imports
	// their code may never need.
	//
	// In fresh mode the worker imports them before it forks the runs, and
	// each run still starts as a new interpreter: a module it does not
	// import is not in its sys.modules, and one it imports comes with the
	// state its import left, not what an earlier run did to it (Preload in
	// worker.py). A run whose code imports only the standard library never
	// waits for them.
	Prewarm []string
	// MaxStdout and MaxStderr bound what is kept of each run's output, in
	// bytes, head and tail (see sandbox.Capture). Zero means
	// sandbox.DefaultMaxOutput.
	MaxStdout, MaxStderr int
	// Grace is how long a run that timed out gets to stop after SIGINT
	// before the worker is killed and replaced. Zero means DefaultGrace.
	Grace time.Duration
	// ValueApart keeps a trailing expression's value out of the output:
	// it comes only as Result.Value (and an image it is, in
	// Result.Figures), for a front-end that shows it apart, as Jupyter's
	// execute_result. Otherwise it is printed as the run's last output, as
	// a model reads it.
	ValueApart bool
	// ReadyTimeout bounds how long a run waits for the worker's start-up
	// (the interpreter's, not the prewarm imports'). The wait does not count
	// against the run's own timeout. Zero means DefaultReadyTimeout.
	ReadyTimeout time.Duration
}

// Kernel runs code in one persistent Python worker per sandbox, like a
// notebook: variables, imports and functions survive from run to run, and
// the value of a trailing expression is shown. When a run times out and
// does not stop on an interrupt, or the interpreter crashes, the worker is
// replaced by a fresh one and the Result's Notice tells the model what was
// lost.
//
// A Kernel is safe for concurrent use; runs happen one at a time.
type Kernel struct {
	sbx  sandbox.Sandbox
	opt  Options
	life context.Context // the workers' lifetime: Start's ctx, until Close
	stop context.CancelFunc

	// turn holds a token while a Run is in progress: runs happen one at a
	// time, and a Run waiting for its turn gives up when its ctx ends.
	turn chan struct{}
	// runs counts the runs that reached a worker in script mode, where
	// they are the Cell numbers; it belongs to the Run that holds turn.
	runs int

	// started is closed once Start's worker is started or failed to start
	// (startErr, which the first Run returns).
	started  chan struct{}
	startErr error
	// warmed is closed once Start's worker has made its prewarm imports.
	warmed chan struct{}

	mu     sync.Mutex
	w      *worker // the current worker; nil when it must be started anew
	closed bool
	last   doneMsg // the last run's done message, for tests
}

var _ Runner = (*Kernel)(nil)

// errClosed is returned by a Kernel used after Close.
var errClosed = errors.New("the Python kernel is closed")

// moduleName is what Options.Prewarm accepts: dotted Python identifiers.
var moduleName = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$`)
})

// Start starts the worker in sbx and returns without waiting for it: writing
// its source, starting its process, its interpreter's start and its
// prewarm imports overlap with whatever the caller does next (typically the
// model's first request), and with the runs: the first Run waits only for
// the interpreter to start. A worker that cannot be started is the first
// Run's error; the next Run tries again.
//
// ctx is the kernel's lifetime, not just Start's: the worker, and any worker
// started later to replace it, is killed when ctx ends, as with
// exec.CommandContext. Pass a context that lives as long as the
// conversation, and call Close when done.
func Start(ctx context.Context, sbx sandbox.Sandbox, opt Options) (*Kernel, error) {
	for _, m := range opt.Prewarm {
		if !moduleName().MatchString(m) {
			return nil, fmt.Errorf("prewarm: %q is not a Python module name", m)
		}
	}
	if opt.Grace <= 0 {
		opt.Grace = DefaultGrace
	}
	if opt.ReadyTimeout <= 0 {
		opt.ReadyTimeout = DefaultReadyTimeout
	}
	if opt.MaxStdout <= 0 {
		opt.MaxStdout = sandbox.DefaultMaxOutput
	}
	if opt.MaxStderr <= 0 {
		opt.MaxStderr = sandbox.DefaultMaxOutput
	}
	opt.Prewarm = append([]string(nil), opt.Prewarm...)
	life, stop := context.WithCancel(ctx)
	k := &Kernel{sbx: sbx, opt: opt, life: life, stop: stop, started: make(chan struct{}), warmed: make(chan struct{}),
		turn: make(chan struct{}, 1)}
	go func() {
		w, err := startWorker(life, sbx, opt)
		k.mu.Lock()
		k.w, k.startErr = w, err
		k.mu.Unlock()
		close(k.started)
		if err == nil {
			select {
			case <-w.warm:
				close(k.warmed)
			case <-w.gone:
			}
		}
	}()
	return k, nil
}

// Warmed is closed once the worker Start started has made its prewarm
// imports (script mode: its preload), or, without any, once it is ready:
// from then on its first run waits for nothing. It never closes for a
// worker that failed or died first.
func (k *Kernel) Warmed() <-chan struct{} { return k.warmed }

// Ready waits for the worker's interpreter to start, as the first Run
// would, and returns its failure: for a caller that starts a kernel well
// before its first run (a warm sandbox) and would rather find a worker
// that cannot start then. It runs nothing; the prewarm imports may go on
// after it returns.
func (k *Kernel) Ready(ctx context.Context) error {
	select {
	case <-k.started:
	case <-ctx.Done():
		return ctx.Err()
	}
	k.mu.Lock()
	w, closed, err := k.w, k.closed, k.startErr
	k.mu.Unlock()
	switch {
	case closed:
		return errClosed
	case err != nil:
		return err
	}
	return k.awaitReady(ctx, w)
}

// Run runs code as the next cell. It first waits for a run in progress to
// end and, if need be, for the worker's start-up (bounded by
// Options.ReadyTimeout); ctx bounds both waits, and a Run whose ctx ends
// while it waits returns ctx's error without running anything. timeout then
// limits the code itself (zero means no limit but ctx).
//
// A run that times out is interrupted with SIGINT; if it stops within
// Options.Grace the session survives, otherwise the worker is killed and
// replaced. When ctx ends the run is stopped the same way and ctx's error is
// returned with what the run printed. Result.Duration includes the wait for
// start-up, not the wait for the run before. Under WithOutput or
// WithAllOutput the output is reported as the worker forwards it, chunk by
// chunk.
func (k *Kernel) Run(ctx context.Context, code string, timeout time.Duration) (Result, error) {
	select {
	case k.turn <- struct{}{}:
	case <-ctx.Done():
		return Result{}, ctx.Err()
	}
	defer func() { <-k.turn }()
	began := time.Now()
	res, err := k.run(ctx, code, timeout)
	res.Duration = time.Since(began)
	res.Notice = k.notice(res, timeout)
	return res, err
}

func (k *Kernel) run(ctx context.Context, code string, timeout time.Duration) (Result, error) {
	if err := ctx.Err(); err != nil {
		return Result{}, err
	}
	w, died, err := k.current(ctx)
	if err != nil {
		return Result{Died: died}, err
	}
	if err := k.awaitReady(ctx, w); err != nil {
		return Result{Died: died}, err
	}
	res, err := k.runOn(ctx, w, code, timeout)
	res.Died = died
	return res, err
}

// current returns the current worker, starting a new one if there is none or
// if the last one died between runs; the Restart then says how it died, for
// the model to learn that its session is new.
func (k *Kernel) current(ctx context.Context) (*worker, *Restart, error) {
	select {
	case <-k.started:
	case <-ctx.Done():
		return nil, nil, ctx.Err()
	}
	k.mu.Lock()
	w, closed, startErr := k.w, k.closed, k.startErr
	k.startErr = nil
	k.mu.Unlock()
	if closed {
		return nil, nil, errClosed
	}
	if startErr != nil {
		return nil, nil, startErr
	}
	if w != nil && !w.isGone() {
		return w, nil, nil
	}
	var died *Restart
	if w != nil && !k.opt.Fresh {
		_ = w.awaitExit(exitWait)
		died = k.ending(w)
	}
	w, err := k.replace(w)
	return w, died, err
}

// ending says how a worker that went away by itself ended: it crashed or
// exited, unless its stream shows it broke the protocol or the sandbox says
// it stopped it.
func (k *Kernel) ending(w *worker) *Restart {
	r := &Restart{Reason: RestartCrashed, SessionLost: !k.opt.Fresh}
	r.ExitCode, r.Signal = splitExit(w.exitStatus())
	if err := w.streamErr(); errors.Is(err, errProtocol) {
		r.Reason, r.Detail = RestartProtocol, err.Error()
	}
	if why := w.stopReason(); why != "" {
		r.Reason, r.Detail = RestartStopped, why
	}
	return r
}

// splitExit splits a process's exit status into its code and the signal
// that ended it, 0 if none: 128+signal, the shell's convention that the
// sandbox follows.
func splitExit(code int) (int, int) {
	if code > 128 && code < 128+65 {
		return code, code - 128
	}
	return code, 0
}

// replace kills old (if any) and starts a fresh worker, which begins its
// prewarm imports at once.
func (k *Kernel) replace(old *worker) (*worker, error) {
	if old != nil {
		old.kill()
	}
	k.mu.Lock()
	if k.closed {
		k.mu.Unlock()
		return nil, errClosed
	}
	k.w = nil
	k.mu.Unlock()

	w, err := startWorker(k.life, k.sbx, k.opt)
	if err != nil {
		return nil, fmt.Errorf("restart the Python worker: %w", err)
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.closed {
		w.kill()
		return nil, errClosed
	}
	k.w = w
	return w, nil
}

// awaitReady waits for the worker's ready frame. A worker that dies or
// hangs in its start-up is dropped, so the next Run starts a new one.
func (k *Kernel) awaitReady(ctx context.Context, w *worker) error {
	select {
	case <-w.ready:
		return nil
	default:
	}
	t := time.NewTimer(k.opt.ReadyTimeout)
	defer t.Stop()
	select {
	case <-w.ready:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-w.gone:
		w.awaitExit(exitWait)
		w.awaitDiag()
		k.drop(w)
		return fmt.Errorf("the Python worker exited while starting (%s)%s",
			describeExit(w.exitStatus()), diagSuffix(w.diagnostics()))
	case <-t.C:
		w.kill()
		k.drop(w)
		return fmt.Errorf("the Python worker was not ready after %s%s",
			k.opt.ReadyTimeout, diagSuffix(w.diagnostics()))
	}
}

// drop forgets w if it is still the current worker.
func (k *Kernel) drop(w *worker) {
	k.mu.Lock()
	if k.w == w {
		k.w = nil
	}
	k.mu.Unlock()
}

// runOn sends code to a ready worker and waits for its done frame, a
// timeout, ctx or the worker's end, whichever comes first.
func (k *Kernel) runOn(ctx context.Context, w *worker, code string, timeout time.Duration) (Result, error) {
	s := newRunSink(k.opt, startFeed(ctx))
	// The output function is never called once Run has returned.
	defer s.live.stop()
	w.begin(s)
	defer w.end()
	// The worker numbers its cells by the requests it read; in script mode
	// every run is a program of its own, numbered in the Kernel's life.
	if k.opt.Fresh {
		k.runs++
		s.cell = k.runs
	} else {
		w.cells++
		s.cell = w.cells
	}

	line, err := json.Marshal(request{Nonce: s.nonce, Code: code})
	if err != nil {
		return Result{}, err
	}
	// The write happens aside: a worker that stopped reading its stdin must
	// not hang Run, and one that died makes it fail at once.
	wrote := make(chan error, 1)
	go func() {
		_, err := w.proc.Stdin().Write(append(line, '\n'))
		wrote <- err
	}()
	var expired <-chan time.Time
	if timeout > 0 {
		t := time.NewTimer(timeout)
		defer t.Stop()
		expired = t.C
	}
	for {
		select {
		case d := <-s.done:
			return k.finished(s, d), nil
		case err := <-wrote:
			wrote = nil
			if err != nil {
				w.kill()
				return k.crashed(w, s)
			}
		case <-w.gone:
			return k.crashed(w, s)
		case <-expired:
			if d, ok := doneNow(s); ok {
				return k.finished(s, d), nil
			}
			return k.interrupt(w, s, timeout, nil)
		case <-ctx.Done():
			if d, ok := doneNow(s); ok {
				return k.finished(s, d), nil
			}
			return k.interrupt(w, s, timeout, ctx.Err())
		}
	}
}

// doneNow returns the run's done message if it has arrived: a run that
// finished as its time ran out is not reported as timed out.
func doneNow(s *runSink) (doneMsg, bool) {
	select {
	case d := <-s.done:
		return d, true
	default:
		return doneMsg{}, false
	}
}

// finished turns a done frame into the Result.
func (k *Kernel) finished(s *runSink, d doneMsg) Result {
	k.mu.Lock()
	k.last = d
	k.mu.Unlock()
	res := Result{
		ExitCode: d.ExitCode, Stdout: s.out.String(), Stderr: s.err.String(),
		Cell: s.cell, Figures: d.Figures, Exception: d.Exception, Outcome: OutcomeOK,
	}
	if d.Value != nil {
		res.Value = *d.Value
	}
	if d.Cell > 0 && !k.opt.Fresh {
		res.Cell = d.Cell
	}
	switch {
	case d.Signal != 0 && k.opt.Fresh:
		// The run's own process died; the worker that forked it lives on.
		res.Outcome = OutcomeRestarted
		res.Restart = &Restart{Reason: RestartCrashed, ExitCode: d.ExitCode, Signal: d.Signal}
	case d.Exception != nil || d.ExitCode != 0:
		res.Outcome = OutcomeError
	}
	return res
}

// interrupt ends a run that timed out (cause nil) or whose ctx ended (cause is
// ctx's error): SIGINT first, which raises KeyboardInterrupt in the code and
// keeps the session (in fresh mode, the worker kills the run at once);
// SIGKILL and a new worker if the run does not end within the grace period.
//
// A run whose code broke the channel cannot end by itself, since its done
// frame is lost in the broken stream: that is reported as the broken
// channel it is, not as a timeout.
func (k *Kernel) interrupt(w *worker, s *runSink, timeout time.Duration, cause error) (Result, error) {
	outcome, exitCode := OutcomeTimedOut, sandbox.ExitTimedOut
	if cause != nil {
		outcome, exitCode = OutcomeInterrupted, -1
	}
	// A consumer of every piece of output must not hold the worker up now:
	// what is left of the run would not end within the grace period.
	s.live.hurry()
	_ = w.proc.Signal(sandbox.SIGINT)
	t := time.NewTimer(k.opt.Grace)
	defer t.Stop()
	// Halfway through the grace, SIGINT again, as a Jupyter user presses
	// interrupt twice: a run that CI saw miss the first one now and then
	// (its Python slept on, the cause not found) gets a second chance
	// before its session is lost. Code still cleaning up after the first
	// gets a KeyboardInterrupt in its handler, which ends the run the same.
	again := time.NewTimer(k.opt.Grace / 2)
	defer again.Stop()
wait:
	for {
		select {
		case d := <-s.done:
			res := k.finished(s, d)
			res.TimedOut = cause == nil
			res.Outcome, res.Restart = outcome, nil
			if k.opt.Fresh {
				// The worker killed the run's processes, with SIGKILL.
				res.ExitCode = exitCode
			}
			return res, cause
		case <-again.C:
			_ = w.proc.Signal(sandbox.SIGINT)
		case <-w.gone:
			break wait
		case <-t.C:
			break wait
		}
	}
	if w.awaitVerdict() {
		res, err := k.crashed(w, s)
		if cause != nil {
			err = errors.Join(cause, err)
		}
		return res, err
	}

	w.kill()
	restart := &Restart{Reason: RestartKilled, SessionLost: !k.opt.Fresh}
	restart.ExitCode, restart.Signal = splitExit(w.exitStatus())
	res := Result{
		ExitCode: exitCode,
		Stdout:   s.out.String(),
		Stderr:   s.err.String(),
		Cell:     s.cell,
		Outcome:  OutcomeRestarted,
		Restart:  restart,
		TimedOut: cause == nil,
	}
	if _, err := k.replace(w); err != nil {
		return res, errors.Join(cause, err)
	}
	return res, cause
}

// crashed reports a run whose worker went away: it crashed, was killed (the
// out-of-memory killer, Close) or broke the protocol. A fresh worker is
// started for the next run.
func (k *Kernel) crashed(w *worker, s *runSink) (Result, error) {
	streamErr := w.streamErr()
	if errors.Is(streamErr, errProtocol) {
		w.kill()
	} else {
		w.awaitExit(exitWait)
	}
	w.awaitDiag()
	report := crashReport(w.end())
	if report != "" {
		if s.err.Total() > 0 {
			report = "\n" + report
		}
		_, _ = s.err.Write([]byte(report + "\n"))
	}
	res := Result{ExitCode: w.exitStatus(), Stdout: s.out.String(), Stderr: s.err.String(), Cell: s.cell}
	k.mu.Lock()
	closed := k.closed
	k.mu.Unlock()
	if closed {
		// Close ended it: nobody is left to tell.
		return res, errClosed
	}
	res.Outcome, res.Restart = OutcomeRestarted, k.ending(w)
	if _, err := k.replace(w); err != nil {
		return res, err
	}
	return res, nil
}

// Close kills the worker and everything it started, and waits for it.
// Closing twice is not an error.
func (k *Kernel) Close() error {
	k.mu.Lock()
	if k.closed {
		k.mu.Unlock()
		return nil
	}
	k.closed = true
	k.mu.Unlock()
	// A start in progress is let finish (it takes what writing a file and
	// starting a process take), and its worker killed as any other.
	<-k.started
	k.mu.Lock()
	w := k.w
	k.w = nil
	k.mu.Unlock()

	var err error
	if w != nil && !w.kill() {
		err = fmt.Errorf("the Python worker did not exit within %s of SIGKILL", killWait)
	}
	k.stop()
	return err
}
