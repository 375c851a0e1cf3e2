package local

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/terpdev/terp/internal/sandbox"
)

// Exec runs cmd in the sandbox and waits for it. It writes no files: the
// caller uploads main.py first. "python3" or "python" as cmd[0] runs
// Config.Python.
//
// Output is kept through sandbox.Capture, so a command printing gigabytes
// costs terp MaxStdout+MaxStderr bytes. The exit code is the command's; a
// command killed by a signal (the OOM killer, say) exits 128+signal, as in a
// shell; one killed by opt.Timeout exits sandbox.ExitTimedOut with TimedOut
// set. Either way nothing it started survives Exec.
//
// The error is for the sandbox failing, or for ctx ending (the command is
// then killed and ExitCode is -1).
func (s *Sandbox) Exec(ctx context.Context, cmd []string, opt sandbox.ExecOptions) (sandbox.ExecResult, error) {
	stdout, stderr := opt.Captures()
	start := time.Now()
	p, err := s.launch(ctx, cmd, opt, stdio{in: opt.Stdin, out: stdout, err: stderr})
	if err != nil {
		return sandbox.ExecResult{}, bwrapError(err, stderr.String())
	}
	code, reason, err := p.wait()
	res := sandbox.Captured(code, stdout, stderr, start)
	res.TimedOut, res.Stopped = reason == killTimeout, p.stopReason()
	switch {
	case err != nil:
		return res, bwrapError(err, res.Stderr)
	case reason == killCanceled:
		return res, fmt.Errorf("exec: %w", context.Cause(ctx))
	case reason == killStopped:
		return res, fmt.Errorf("exec: sandbox %s was stopped while the command ran", s.id)
	}
	return res, nil
}

// bwrapError adds bwrap's own complaint, which it prints on the command's
// stderr, to an error about bwrap failing.
func bwrapError(err error, stderr string) error {
	if !errors.Is(err, errBwrapFailed) {
		return err
	}
	msg := strings.TrimSpace(stderr)
	if msg == "" {
		return err
	}
	err = fmt.Errorf("%w: %s", err, msg)
	if setup := explainBwrap(msg, err); setup != nil {
		return setup
	}
	return err
}

// Start runs cmd in the sandbox in the background, for the persistent
// kernel. The process gets the same isolation and limits as Exec. Its
// standard streams are raw pipes (MaxStdout and MaxStderr do not apply); if
// opt.Stdin is set it is copied into the stdin pipe, which is then closed.
// ctx and opt.Timeout kill the process, as for exec.CommandContext.
func (s *Sandbox) Start(ctx context.Context, cmd []string, opt sandbox.ExecOptions) (sandbox.Process, error) {
	var pipes [3][2]*os.File // stdin, stdout, stderr; [0] read end, [1] write end
	closeAll := func() {
		for _, pp := range pipes {
			for _, f := range pp {
				if f != nil {
					f.Close()
				}
			}
		}
	}
	for i := range pipes {
		r, w, err := os.Pipe()
		if err != nil {
			closeAll()
			return nil, err
		}
		pipes[i] = [2]*os.File{r, w}
	}
	p, err := s.launch(ctx, cmd, opt, stdio{in: pipes[0][0], out: pipes[1][1], err: pipes[2][1]})
	// The child's ends now belong to bwrap; terp must not hold them, or the
	// command's stdin never sees EOF and its output never ends.
	pipes[0][0].Close()
	pipes[1][1].Close()
	pipes[2][1].Close()
	if err != nil {
		pipes[0][1].Close()
		pipes[1][0].Close()
		// bwrap's message, if it wrote one. The read is bounded in time:
		// a start cut short by ctx may leave a dying process holding the
		// write end a while.
		_ = pipes[2][0].SetReadDeadline(time.Now().Add(2 * time.Second))
		msg, _ := io.ReadAll(io.LimitReader(pipes[2][0], 4<<10))
		pipes[2][0].Close()
		return nil, bwrapError(err, string(msg))
	}
	sp := &process{
		p:      p,
		s:      s,
		ctx:    ctx,
		stdin:  pipes[0][1],
		stdout: &eofCloser{f: pipes[1][0]},
		stderr: &eofCloser{f: pipes[2][0]},
	}
	if opt.Stdin != nil {
		go func() {
			_, _ = io.Copy(sp.stdin, opt.Stdin)
			sp.stdin.Close()
		}()
	}
	return sp, nil
}

// process is a sandbox.Process started by Start.
type process struct {
	p      *proc
	s      *Sandbox
	ctx    context.Context // Start's, to say why the process was killed
	stdin  *os.File
	stdout *eofCloser
	stderr *eofCloser

	waitOnce sync.Once
	code     int
	err      error
}

func (sp *process) Stdin() io.WriteCloser { return sp.stdin }
func (sp *process) Stdout() io.Reader     { return sp.stdout }
func (sp *process) Stderr() io.Reader     { return sp.stderr }

// Signal delivers sig to every process of the command's sandbox: the
// command, its children, and anything they started in the background. SIGKILL
// kills the sandbox's init and with it all of them at once.
func (sp *process) Signal(sig sandbox.Signal) error {
	n, err := sig.Number()
	if err != nil {
		return err
	}
	return sp.p.signal(n)
}

var _ sandbox.StopReporter = (*process)(nil)

// StopReason says why the sandbox stopped the process for breaking one of
// its limits, or "".
func (sp *process) StopReason() string { return sp.p.stopReason() }

// Wait blocks until the process exits and returns its exit code, with the
// same conventions as Exec. The stdout and stderr readers stay readable
// until drained. Wait may be called more than once.
func (sp *process) Wait() (int, error) {
	sp.waitOnce.Do(func() {
		code, reason, err := sp.p.wait()
		sp.code = code
		sp.stdin.Close()
		switch {
		case err != nil:
			sp.err = err
		case reason == killCanceled:
			sp.err = fmt.Errorf("process killed: %w", context.Cause(sp.ctx))
		case reason == killStopped:
			sp.err = fmt.Errorf("sandbox %s was stopped while the process ran", sp.s.id)
		}
	})
	return sp.code, sp.err
}

// eofCloser closes its pipe once it has been read to the end, so a caller
// that drains the output does not have to close it too.
type eofCloser struct {
	mu sync.Mutex
	f  *os.File
}

func (e *eofCloser) Read(p []byte) (int, error) {
	e.mu.Lock()
	f := e.f
	e.mu.Unlock()
	if f == nil {
		return 0, io.EOF
	}
	n, err := f.Read(p)
	if err != nil {
		e.mu.Lock()
		if e.f != nil {
			e.f.Close()
			e.f = nil
		}
		e.mu.Unlock()
		if errors.Is(err, os.ErrClosed) {
			err = io.EOF
		}
	}
	return n, err
}
