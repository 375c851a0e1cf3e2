package memory

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/terpdev/terp/internal/sandbox"
)

// Program is what a command does: a Go function in place of a process. It
// returns the command's exit code. ctx ends when the command is stopped
// (its timeout, its caller giving up, a signal, Pause or Close); a program
// that waits should wait on it too. One that does not is not waited for:
// the command ends anyway, and from then on its Cmd's streams and FS fail,
// so it can change nothing.
type Program func(ctx context.Context, c *Cmd) int

// Cmd is one running command as its program sees it.
type Cmd struct {
	// Args is the command line, Args[0] the name it was run by.
	Args []string
	// Dir is the working directory, an absolute path under /work.
	Dir string
	// Env is ExecOptions.Env, and nothing else: no host variable.
	Env []string
	// Stdin is ExecOptions.Stdin (empty without one), or Start's pipe.
	Stdin io.Reader
	// Stdout and Stderr are bounded as the sandbox package says (Capture)
	// for Exec, and pipes for Start.
	Stdout, Stderr io.Writer
	// FS is /work, seen from Dir.
	FS *FS
}

// Getenv returns the value of the variable key in Env, the last one if
// it is there more than once, or "".
func (c *Cmd) Getenv(key string) string {
	for _, kv := range slices.Backward(c.Env) {
		if k, v, ok := strings.Cut(kv, "="); ok && k == key {
			return v
		}
	}
	return ""
}

// notFound is what runs for a name no program has, as in a shell.
func notFound(_ context.Context, c *Cmd) int {
	fmt.Fprintf(c.Stderr, "sh: %s: command not found\n", c.Args[0])
	return 127
}

// How a command ended, besides returning.
type killReason int

const (
	killNone     killReason = iota
	killTimeout             // ExecOptions.Timeout
	killCanceled            // the caller's ctx ended
	killStopped             // Pause or Close
	killSignal              // Process.Signal
	killLimit               // a write past Limits.WorkBytes
)

// run is one command from launch until it ends.
type run struct {
	s      *Sandbox
	gate   gate
	cancel context.CancelCauseFunc
	closed func() // called once it ended, to end Start's pipes; may be nil
	done   chan struct{}

	mu     sync.Mutex
	ended  bool
	code   int
	reason killReason
	why    string // for killLimit, the words for the model
}

// end ends the command with code, once: the first call counts. Its
// streams and FS are shut before end returns, so what it wrote is final.
func (r *run) end(code int, reason killReason, why string) {
	r.mu.Lock()
	if r.ended {
		r.mu.Unlock()
		return
	}
	r.ended, r.code, r.reason, r.why = true, code, reason, why
	r.mu.Unlock()
	r.gate.shut()
	r.cancel(reason.cause())
	if r.closed != nil {
		r.closed()
	}
	r.s.untrack(r)
	close(r.done)
}

// stopFor stops the command for breaking a sandbox limit.
func (r *run) stopFor(why string) { r.end(128+9, killLimit, why) }

// result waits for the command to end.
func (r *run) result() (code int, reason killReason, why string) {
	<-r.done
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.code, r.reason, r.why
}

func (k killReason) cause() error {
	switch k {
	case killTimeout:
		return errors.New("the command timed out")
	case killCanceled:
		return errors.New("the command's caller gave up")
	case killStopped:
		return errors.New("the sandbox was paused or closed")
	case killSignal:
		return errors.New("the command was sent a signal")
	case killLimit:
		return errors.New("the command broke a sandbox limit")
	}
	return context.Canceled
}

// gate lets a command's streams and files be used until the command ends,
// and never after: shut waits for the uses under way.
type gate struct {
	mu     sync.RWMutex
	closed bool
}

// errEnded is what a command's streams and FS return once it has ended.
var errEnded = errors.New("the command has ended")

func (g *gate) do(f func() error) error {
	g.mu.RLock()
	defer g.mu.RUnlock()
	if g.closed {
		return errEnded
	}
	return f()
}

func (g *gate) shut() {
	g.mu.Lock()
	g.closed = true
	g.mu.Unlock()
}

func (g *gate) isShut() bool {
	g.mu.RLock()
	defer g.mu.RUnlock()
	return g.closed
}

// gatedWriter is a command's stdout or stderr.
type gatedWriter struct {
	g *gate
	w io.Writer
}

func (w gatedWriter) Write(p []byte) (n int, err error) {
	err = w.g.do(func() error {
		n, err = w.w.Write(p)
		return err
	})
	return n, err
}

// gatedReader is a command's stdin. A read under way when the command ends
// is not waited for (it may block on the caller's reader); what it reads
// can go nowhere.
type gatedReader struct {
	g *gate
	r io.Reader
}

func (r gatedReader) Read(p []byte) (int, error) {
	if r.g.isShut() {
		return 0, errEnded
	}
	return r.r.Read(p)
}

// Exec runs cmd's program to completion, with the rules every backend
// keeps: output is kept through sandbox.Capture and counted; opt.Timeout
// ends the command with TimedOut and sandbox.ExitTimedOut; ctx ending ends
// it with ExitCode -1 and an error; Pause and Close end it with an error.
// When Exec returns, the command can change nothing any more.
func (s *Sandbox) Exec(ctx context.Context, cmd []string, opt sandbox.ExecOptions) (sandbox.ExecResult, error) {
	stdout, stderr := opt.Captures()
	stdin := opt.Stdin
	if stdin == nil {
		stdin = strings.NewReader("")
	}
	start := time.Now()
	r, err := s.launch(ctx, cmd, opt, stdin, stdout, stderr, nil)
	if err != nil {
		return sandbox.ExecResult{}, err
	}
	code, reason, why := r.result()
	res := sandbox.Captured(code, stdout, stderr, start)
	res.TimedOut, res.Stopped = reason == killTimeout, why
	switch reason {
	case killCanceled:
		return res, fmt.Errorf("exec: %w", context.Cause(ctx))
	case killStopped:
		return res, fmt.Errorf("exec: sandbox %s was stopped while the command ran", s.box.id)
	}
	return res, nil
}

// Start runs cmd's program in the background with pipes to its streams.
// The pipes hold what is written until it is read, so a caller may Wait
// before reading. If opt.Stdin is set it is copied into the stdin pipe,
// which is then closed. ctx and opt.Timeout end the command.
func (s *Sandbox) Start(ctx context.Context, cmd []string, opt sandbox.ExecOptions) (sandbox.Process, error) {
	stdin, stdout, stderr := newPipe(), newPipe(), newPipe()
	closed := func() {
		stdin.breakRead()
		_ = stdout.Close()
		_ = stderr.Close()
	}
	r, err := s.launch(ctx, cmd, opt, stdin, stdout, stderr, closed)
	if err != nil {
		return nil, err
	}
	p := &process{r: r, ctx: ctx, stdin: stdin, stdout: stdout, stderr: stderr}
	if opt.Stdin != nil {
		go func() {
			_, _ = io.Copy(stdin, opt.Stdin)
			_ = stdin.Close()
		}()
	}
	return p, nil
}

// launch starts cmd's program in a goroutine; the returned run ends when
// it returns or is stopped.
func (s *Sandbox) launch(ctx context.Context, cmd []string, opt sandbox.ExecOptions, stdin io.Reader, stdout, stderr io.Writer, closed func()) (*run, error) {
	if len(cmd) == 0 {
		return nil, errors.New("exec: empty command")
	}
	if err := s.usable(); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	dir, err := s.workingDir(opt.Dir)
	if err != nil {
		return nil, err
	}
	for _, kv := range opt.Env {
		if k, _, ok := strings.Cut(kv, "="); !ok || k == "" {
			return nil, fmt.Errorf("exec: environment entry %q is not KEY=VALUE", kv)
		}
	}
	pctx, cancel := context.WithCancelCause(context.WithoutCancel(ctx))
	r := &run{s: s, cancel: cancel, closed: closed, done: make(chan struct{})}
	if !s.track(r) {
		cancel(nil)
		return nil, s.usable()
	}
	c := &Cmd{
		Args:   slices.Clone(cmd),
		Dir:    dir,
		Env:    slices.Clone(opt.Env),
		Stdin:  gatedReader{g: &r.gate, r: stdin},
		Stdout: gatedWriter{g: &r.gate, w: stdout},
		Stderr: gatedWriter{g: &r.gate, w: stderr},
		FS:     &FS{files: s.box.files, dir: dir, run: r, limit: s.box.opt.Limits.WorkBytes},
	}
	prog := s.b.program(cmd[0])
	go func() { r.end(prog(pctx, c), killNone, "") }()
	sandbox.Watch(ctx, opt.Timeout, r.done, func(timedOut bool) {
		if timedOut {
			r.end(sandbox.ExitTimedOut, killTimeout, "")
		} else {
			r.end(-1, killCanceled, "")
		}
	})
	return r, nil
}

// workingDir is opt.Dir made absolute, which must be a directory under
// /work: nothing else exists in a memory sandbox.
func (s *Sandbox) workingDir(dir string) (string, error) {
	if dir == "" {
		return sandbox.WorkDir, nil
	}
	rel, err := workPath(sandbox.WorkDir, dir)
	if err != nil {
		return "", fmt.Errorf("working directory: %w", err)
	}
	ok, err := s.box.files.isDir(rel)
	if err != nil {
		return "", err
	}
	if !ok {
		return "", fmt.Errorf("working directory %s is not a directory in /work", dir)
	}
	return path.Join(sandbox.WorkDir, rel), nil
}

// process is a sandbox.Process started by Start.
type process struct {
	r      *run
	ctx    context.Context // Start's, to say why the process was killed
	stdin  *pipe
	stdout *pipe
	stderr *pipe
}

var _ sandbox.StopReporter = (*process)(nil)

func (p *process) Stdin() io.WriteCloser { return p.stdin }
func (p *process) Stdout() io.Reader     { return p.stdout }
func (p *process) Stderr() io.Reader     { return p.stderr }

// signals are the exit codes of a command a signal ends, as in a shell:
// a program has no handlers, so every signal ends it.
var signals = map[sandbox.Signal]int{sandbox.SIGINT: 128 + 2, sandbox.SIGTERM: 128 + 15, sandbox.SIGKILL: 128 + 9}

// Signal ends the command with 128 plus the signal's number.
func (p *process) Signal(sig sandbox.Signal) error {
	code, ok := signals[sig]
	if !ok {
		return fmt.Errorf("signal %q is not supported", sig)
	}
	p.r.end(code, killSignal, "")
	return nil
}

// Wait waits for the command to end and returns its exit code, with the
// conventions of Exec. It may be called more than once.
func (p *process) Wait() (int, error) {
	code, reason, _ := p.r.result()
	switch reason {
	case killTimeout:
		return code, nil
	case killCanceled:
		return code, fmt.Errorf("process killed: %w", context.Cause(p.ctx))
	case killStopped:
		return code, fmt.Errorf("sandbox %s was stopped while the process ran", p.r.s.box.id)
	}
	return code, nil
}

// StopReason says why the sandbox stopped the process for breaking one of
// its limits, or "".
func (p *process) StopReason() string {
	_, _, why := p.r.result()
	return why
}

// pipe is an in-memory pipe whose writes never block: what is written
// waits until it is read. Close ends it for the reader once drained;
// breakRead makes later writes fail, as a pipe whose reader is gone.
type pipe struct {
	mu     sync.Mutex
	cond   sync.Cond
	buf    []byte
	closed bool
	broken bool
}

func newPipe() *pipe {
	p := &pipe{}
	p.cond.L = &p.mu
	return p
}

func (p *pipe) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed || p.broken {
		return 0, io.ErrClosedPipe
	}
	p.buf = append(p.buf, b...)
	p.cond.Broadcast()
	return len(b), nil
}

func (p *pipe) Read(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for len(p.buf) == 0 && !p.closed && !p.broken {
		p.cond.Wait()
	}
	if len(p.buf) == 0 {
		return 0, io.EOF
	}
	n := copy(b, p.buf)
	p.buf = p.buf[n:]
	return n, nil
}

// Close ends what the reader will read, once it has read what is there.
func (p *pipe) Close() error {
	p.mu.Lock()
	p.closed = true
	p.cond.Broadcast()
	p.mu.Unlock()
	return nil
}

// breakRead drops what is unread and fails later writes.
func (p *pipe) breakRead() {
	p.mu.Lock()
	p.broken, p.buf = true, nil
	p.cond.Broadcast()
	p.mu.Unlock()
}
