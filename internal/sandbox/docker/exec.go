package docker

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/terpdev/terp/internal/egress"
	"github.com/terpdev/terp/internal/sandbox"
)

// How a command is run:
//
//  1. An exec runs `python3 -I -S -c RUN_PY CMD...` (run.py, embedded below)
//     as the sandbox's user. Docker makes each exec a session leader; run.py
//     writes the session id as the first line of stdout, which terp strips,
//     and runs CMD as its child.
//  2. Output arrives multiplexed on the hijacked connection and is split
//     into stdout and stderr as it is read, into a sandbox.Capture for Exec
//     or pipes for Start.
//  3. When CMD exits, run.py kills what CMD left in its session and exits
//     with CMD's code, so nothing a command started outlives it.
//  4. Docker cannot kill an exec. On timeout, cancellation, Pause or
//     Process.Signal, a second exec runs kill.py, which signals every
//     process of the session by scanning /proc in the container. This works
//     on a remote daemon too: terp never needs a host pid.
//
// A process that leaves the session (setsid, a double-forked daemon) is not
// in it; run.py also kills, when its command ends, every process of the
// sandbox's user whose session no terp script leads. Pause kills every terp
// session in the container, and Close removes the container.

var (
	//go:embed run.py
	runPy string
	//go:embed kill.py
	killPy string
	//go:embed list.py
	listPy string
)

// streamGrace bounds how long terp waits for a command's streams to end
// once its session was killed. Only a process that escaped the session
// can hold them open longer.
const streamGrace = 3 * time.Second

type killReason int

const (
	killNone killReason = iota
	killTimeout
	killCanceled
	killStopped // Pause or Close
	killSignal  // Process.Signal(SIGKILL)
	killLimit   // /work grew past its limit (stopFor)
)

// execution is one command started through run.py.
type execution struct {
	s      *Sandbox
	execID string
	att    *stream

	sidKnown chan struct{} // closed once sid is set, or the stream ended
	sid      int
	streams  chan struct{} // closed when the output stream ended

	mu       sync.Mutex
	reason   killReason
	why      string // for killLimit, the words for the model
	closed   bool
	killOnce sync.Once
}

// stopFor kills the command for breaking a sandbox limit, keeping why.
func (e *execution) stopFor(why string) {
	e.mu.Lock()
	if e.reason == killNone {
		e.reason, e.why = killLimit, why
	}
	e.mu.Unlock()
	e.kill(killLimit)
}

// stopReason is why stopFor killed the command, or "".
func (e *execution) stopReason() string {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.reason != killLimit {
		return ""
	}
	return e.why
}

// launch starts cmd through run.py with its output going to stdout and
// stderr. withStdin attaches the command's stdin to the connection.
func (s *Sandbox) launch(ctx context.Context, cmd []string, opt sandbox.ExecOptions, withStdin bool, stdout, stderr io.Writer) (*execution, error) {
	if len(cmd) == 0 {
		return nil, errors.New("exec: empty command")
	}
	if err := s.usableErr(); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	dir := opt.Dir
	if dir == "" {
		dir = sandbox.WorkDir
	}
	if !path.IsAbs(dir) {
		return nil, fmt.Errorf("exec: working directory %q is not absolute", dir)
	}
	if err := s.checkDir(ctx, path.Clean(dir)); err != nil {
		return nil, err
	}
	for _, kv := range opt.Env {
		if k, _, ok := strings.Cut(kv, "="); !ok || k == "" {
			return nil, fmt.Errorf("exec: environment entry %q is not KEY=VALUE", kv)
		}
	}
	if s.egress != nil {
		cmd = egress.Wrap("python3", cmd)
	}
	execID, err := s.b.eng.ExecCreate(ctx, s.containerID, execConfig{
		User:         s.b.cfg.User,
		AttachStdin:  withStdin,
		AttachStdout: true,
		AttachStderr: true,
		Env:          opt.Env,
		WorkingDir:   path.Clean(dir),
		Cmd:          append([]string{"python3", "-I", "-S", "-c", runPy}, cmd...),
	})
	if err != nil {
		return nil, s.execError(ctx, err)
	}
	att, err := s.b.eng.ExecAttach(ctx, execID)
	if err != nil {
		return nil, s.execError(ctx, err)
	}
	e := &execution{
		s:        s,
		execID:   execID,
		att:      att,
		sidKnown: make(chan struct{}),
		streams:  make(chan struct{}),
	}
	if !s.track(e) {
		att.Close()
		return nil, s.usableErr()
	}
	sw := &sidWriter{w: stdout, e: e}
	go func() {
		_ = demux(sw, stderr, att)
		sw.end()
		close(e.streams)
		s.untrack(e)
	}()
	sandbox.Watch(ctx, opt.Timeout, e.streams, func(timedOut bool) {
		if timedOut {
			e.kill(killTimeout)
		} else {
			e.kill(killCanceled)
		}
	})
	return e, nil
}

// checkDir makes sure a working directory under /work exists, so that a
// typo is reported as such rather than as the runtime's exit 126. It costs
// a round trip, so the usual /work itself is taken on trust.
func (s *Sandbox) checkDir(ctx context.Context, dir string) error {
	if dir == sandbox.WorkDir || !strings.HasPrefix(dir, sandbox.WorkDir+"/") {
		return nil
	}
	st, err := s.b.eng.ContainerStatPath(ctx, s.containerID, dir)
	if err != nil {
		if isNotFound(err) {
			return fmt.Errorf("working directory %s: %w", dir, fs.ErrNotExist)
		}
		return s.execError(ctx, err)
	}
	if !st.Mode.IsDir() {
		return fmt.Errorf("working directory %s is not a directory", dir)
	}
	return nil
}

// execError says what a failed exec means: a container that is gone was
// removed behind terp's back.
func (s *Sandbox) execError(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if strings.Contains(err.Error(), "No such container") || strings.Contains(err.Error(), "is not running") {
		return fmt.Errorf("sandbox %s: its container is gone (removed, or the daemon restarted): %w", s.id, err)
	}
	if strings.Contains(err.Error(), "is paused") {
		return fmt.Errorf("sandbox %s is paused: %w", s.id, err)
	}
	return fmt.Errorf("exec in sandbox %s: %w", s.id, err)
}

// markKilled records why the command is being stopped. The first reason
// sticks: a command that timed out and was then closed still timed out.
func (e *execution) markKilled(reason killReason) {
	e.mu.Lock()
	if e.reason == killNone {
		e.reason = reason
	}
	e.mu.Unlock()
}

// kill records reason and kills the command's whole session, then makes
// sure its stream ends.
func (e *execution) kill(reason killReason) {
	e.markKilled(reason)
	e.killOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = e.signal(ctx, 9)
		e.awaitStreams(ctx)
	})
}

// signal delivers sig to the command's session once its id is known.
func (e *execution) signal(ctx context.Context, sig int) error {
	select {
	case <-e.sidKnown:
	case <-ctx.Done():
		return ctx.Err()
	}
	e.mu.Lock()
	sid := e.sid
	e.mu.Unlock()
	if sid <= 1 {
		return errors.New("the command has ended")
	}
	return e.s.helperExec(ctx, "", []string{"python3", "-I", "-S", "-c", killPy, strconv.Itoa(sig), strconv.Itoa(sid)})
}

// awaitStreams waits a little for the output to end and then cuts the
// connection, so that a process that escaped the kill cannot hold terp.
func (e *execution) awaitStreams(ctx context.Context) {
	t := time.NewTimer(streamGrace)
	defer t.Stop()
	select {
	case <-e.streams:
	case <-t.C:
		e.closeStreams()
	case <-ctx.Done():
		e.closeStreams()
	}
}

func (e *execution) closeStreams() {
	e.mu.Lock()
	defer e.mu.Unlock()
	if !e.closed {
		e.closed = true
		e.att.Close()
	}
}

// wait blocks until the command's output ended and returns its exit code
// and why it was killed, if it was.
func (e *execution) wait() (int, killReason, error) {
	<-e.streams
	e.mu.Lock()
	reason := e.reason
	e.mu.Unlock()
	defer e.closeStreams()
	switch reason {
	case killTimeout:
		return sandbox.ExitTimedOut, reason, nil
	case killCanceled, killStopped:
		return -1, reason, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	code, err := e.s.b.exitCode(ctx, e.execID)
	if err != nil {
		return -1, reason, fmt.Errorf("exec in sandbox %s: %w", e.s.id, err)
	}
	return code, reason, nil
}

// sidWriter takes run.py's first line, the session id, off the command's
// stdout and passes the rest on.
type sidWriter struct {
	w    io.Writer
	e    *execution
	head []byte
	done bool
}

func (sw *sidWriter) Write(p []byte) (int, error) {
	if sw.done {
		return sw.w.Write(p)
	}
	n := len(p)
	i := strings.IndexByte(string(p), '\n')
	if i < 0 {
		sw.head = append(sw.head, p...)
		if len(sw.head) > 32 {
			sw.end()
			return n, errors.New("run.py did not report its session")
		}
		return n, nil
	}
	sw.head = append(sw.head, p[:i]...)
	sid, err := strconv.Atoi(string(sw.head))
	sw.e.mu.Lock()
	sw.e.sid = sid
	sw.e.mu.Unlock()
	sw.end()
	if err != nil {
		// Not run.py speaking: the runtime's own error (a working
		// directory it cannot enter, say) goes to the caller.
		if _, err := sw.w.Write(sw.head[:len(sw.head):len(sw.head)]); err != nil {
			return n, err
		}
		if _, err := sw.w.Write([]byte{'\n'}); err != nil {
			return n, err
		}
	}
	if rest := p[i+1:]; len(rest) > 0 {
		if _, err := sw.w.Write(rest); err != nil {
			return n, err
		}
	}
	return n, nil
}

// end stops looking for the session id; kill then knows there is none.
func (sw *sidWriter) end() {
	if !sw.done {
		sw.done = true
		close(sw.e.sidKnown)
	}
}

// Exec runs cmd in the container and waits for it. The host environment is
// never passed; opt.Env adds to the container's own.
//
// Output is kept through sandbox.Capture as it arrives, so a command
// printing gigabytes costs terp MaxStdout+MaxStderr bytes. The exit code is
// the command's; a command killed by a signal exits 128+signal, as in a
// shell; one killed by opt.Timeout exits sandbox.ExitTimedOut with TimedOut
// set. Either way nothing it started survives Exec.
//
// The error is for the sandbox failing, or for ctx ending (the command is
// then killed and ExitCode is -1).
func (s *Sandbox) Exec(ctx context.Context, cmd []string, opt sandbox.ExecOptions) (sandbox.ExecResult, error) {
	stdout, stderr := opt.Captures()
	start := time.Now()
	e, err := s.launch(ctx, cmd, opt, opt.Stdin != nil, stdout, stderr)
	if err != nil {
		return sandbox.ExecResult{}, err
	}
	if opt.Stdin != nil {
		go func() {
			_, _ = io.Copy(e.att, opt.Stdin)
			_ = e.att.CloseWrite()
		}()
	}
	code, reason, err := e.wait()
	res := sandbox.Captured(code, stdout, stderr, start)
	res.TimedOut, res.Stopped = reason == killTimeout, e.stopReason()
	switch {
	case err != nil:
		return res, err
	case reason == killCanceled:
		return res, fmt.Errorf("exec: %w", context.Cause(ctx))
	case reason == killStopped:
		return res, fmt.Errorf("exec: sandbox %s was stopped while the command ran", s.id)
	}
	return res, nil
}

// Start runs cmd in the background through an attached exec, for the
// persistent kernel. Its standard streams are pipes (MaxStdout and MaxStderr
// do not apply); if opt.Stdin is set it is copied into stdin, which is then
// closed. ctx and opt.Timeout kill the process.
func (s *Sandbox) Start(ctx context.Context, cmd []string, opt sandbox.ExecOptions) (sandbox.Process, error) {
	outR, outW := io.Pipe()
	errR, errW := io.Pipe()
	e, err := s.launch(ctx, cmd, opt, true, outW, errW)
	if err != nil {
		return nil, err
	}
	go func() {
		<-e.streams
		_ = outW.Close()
		_ = errW.Close()
	}()
	p := &process{e: e, ctx: ctx, stdin: &stdinWriter{e: e}, stdout: outR, stderr: errR}
	if opt.Stdin != nil {
		go func() {
			_, _ = io.Copy(p.stdin, opt.Stdin)
			_ = p.stdin.Close()
		}()
	}
	return p, nil
}

// process is a sandbox.Process started by Start.
type process struct {
	e      *execution
	ctx    context.Context // Start's, to say why the process was killed
	stdin  *stdinWriter
	stdout *io.PipeReader
	stderr *io.PipeReader

	waitOnce sync.Once
	code     int
	err      error
}

func (p *process) Stdin() io.WriteCloser { return p.stdin }
func (p *process) Stdout() io.Reader     { return p.stdout }
func (p *process) Stderr() io.Reader     { return p.stderr }

// Signal delivers sig to every process of the command's session: the
// command, its children, and what they started in the background. SIGKILL
// takes run.py with them and ends the streams.
func (p *process) Signal(sig sandbox.Signal) error {
	n := 0
	switch sig {
	case sandbox.SIGINT:
		n = 2
	case sandbox.SIGTERM:
		n = 15
	case sandbox.SIGKILL:
		p.e.markKilled(killSignal)
		go p.e.kill(killSignal)
		return nil
	default:
		return fmt.Errorf("signal %q is not supported", sig)
	}
	select {
	case <-p.e.streams:
		return errors.New("the process has exited")
	default:
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return p.e.signal(ctx, n)
}

// Wait blocks until the process exits and returns its exit code, with the
// same conventions as Exec. Wait may be called more than once.
func (p *process) Wait() (int, error) {
	p.waitOnce.Do(func() {
		code, reason, err := p.e.wait()
		p.code = code
		switch {
		case err != nil:
			p.err = err
		case reason == killCanceled:
			p.err = fmt.Errorf("process killed: %w", context.Cause(p.ctx))
		case reason == killStopped:
			p.err = fmt.Errorf("sandbox %s was stopped while the process ran", p.e.s.id)
		case (reason == killSignal || reason == killLimit) && code == -1:
			p.code = 128 + 9
		}
	})
	return p.code, p.err
}

var _ sandbox.StopReporter = (*process)(nil)

// StopReason says why the sandbox stopped the process for breaking one of
// its limits, or "".
func (p *process) StopReason() string { return p.e.stopReason() }

// stdinWriter writes to the exec's stdin; Close half-closes the connection,
// which the command reads as end of file.
type stdinWriter struct {
	e  *execution
	mu sync.Mutex
}

func (w *stdinWriter) Write(p []byte) (int, error) { return w.e.att.Write(p) }

func (w *stdinWriter) Close() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.e.att.CloseWrite()
}
