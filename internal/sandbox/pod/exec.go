package pod

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/terpdev/terp/internal/sandbox"
	"github.com/terpdev/terp/internal/sandbox/local"
)

// killReason says why terp killed a command.
type killReason int

const (
	killNone killReason = iota
	killTimeout
	killCanceled
	killStopped // the sandbox was paused or closed, or a limit was broken
)

// proc is one running command: the leader of its own process group.
type proc struct {
	cmd  *exec.Cmd
	s    *Sandbox
	done chan struct{} // closed once the command was waited for

	mu      sync.Mutex
	reason  killReason
	stopped string
	code    int
	err     error
}

// Exec runs cmd under /work and waits for it; see sandbox.Sandbox.
func (s *Sandbox) Exec(ctx context.Context, cmd []string, opt sandbox.ExecOptions) (sandbox.ExecResult, error) {
	stdout, stderr := opt.Captures()
	start := time.Now()
	// The command writes to pipes, not to the captures, so that its exit
	// is seen at once (exec.Cmd would wait for whatever holds the pipes)
	// and its group killed; then the output is read to the end.
	outR, outW, err := os.Pipe()
	if err != nil {
		return sandbox.ExecResult{}, err
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		outR.Close()
		outW.Close()
		return sandbox.ExecResult{}, err
	}
	p, err := s.launch(ctx, cmd, opt, opt.Stdin, outW, errW)
	outW.Close()
	errW.Close()
	if err != nil {
		outR.Close()
		errR.Close()
		return sandbox.ExecResult{}, err
	}
	var copies sync.WaitGroup
	copies.Go(func() { _, _ = io.Copy(stdout, outR) })
	copies.Go(func() { _, _ = io.Copy(stderr, errR) })
	sandbox.Watch(ctx, opt.Timeout, p.done, func(timedOut bool) {
		if timedOut {
			p.kill(killTimeout)
		} else {
			p.kill(killCanceled)
		}
	})
	<-p.done
	drained := make(chan struct{})
	go func() { copies.Wait(); close(drained) }()
	select {
	case <-drained:
	case <-time.After(2 * time.Second):
		// A process that left the group (setsid) holds the pipes; Pause
		// and Close will kill it.
	}
	outR.Close()
	errR.Close()
	copies.Wait()
	p.mu.Lock()
	code, reason, stopped, werr := p.code, p.reason, p.stopped, p.err
	p.mu.Unlock()
	res := sandbox.Captured(code, stdout, stderr, start)
	res.Stopped = stopped
	switch {
	case reason == killTimeout:
		res.ExitCode, res.TimedOut = sandbox.ExitTimedOut, true
	case reason == killCanceled:
		res.ExitCode = -1
		return res, fmt.Errorf("exec: %w", context.Cause(ctx))
	case reason == killStopped && stopped == "":
		return res, fmt.Errorf("exec: sandbox %s was stopped while the command ran", s.id)
	case werr != nil:
		return res, fmt.Errorf("exec: %w", werr)
	}
	return res, nil
}

// Start runs cmd in the background with pipes to its standard streams.
func (s *Sandbox) Start(ctx context.Context, cmd []string, opt sandbox.ExecOptions) (sandbox.Process, error) {
	inR, inW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		inR.Close()
		inW.Close()
		return nil, err
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		inR.Close()
		inW.Close()
		outR.Close()
		outW.Close()
		return nil, err
	}
	p, err := s.launch(ctx, cmd, opt, inR, outW, errW)
	// The child holds its ends now; the readers see EOF once it and
	// everything it started have closed theirs.
	inR.Close()
	outW.Close()
	errW.Close()
	if err != nil {
		inW.Close()
		outR.Close()
		errR.Close()
		return nil, err
	}
	if opt.Timeout > 0 {
		sandbox.Watch(context.Background(), opt.Timeout, p.done, func(bool) { p.kill(killTimeout) })
	}
	return &process{p: p, stdin: inW, stdout: outR, stderr: errR}, nil
}

// launch starts cmd as the leader of a new process group, limited by
// prlimit, with an environment of its own.
func (s *Sandbox) launch(ctx context.Context, cmd []string, opt sandbox.ExecOptions, stdin io.Reader, stdout, stderr io.Writer) (*proc, error) {
	if len(cmd) == 0 {
		return nil, errors.New("exec: empty command")
	}
	dir, err := s.workingDir(opt.Dir)
	if err != nil {
		return nil, err
	}
	l := s.opt.Limits
	argv := []string{s.b.prlimit,
		"--as=" + strconv.FormatInt(l.MemoryBytes, 10),
		"--nproc=" + strconv.Itoa(l.Processes),
		"--fsize=" + strconv.FormatInt(l.FileSizeBytes, 10),
		"--core=0", "--"}
	name := cmd[0]
	if name == "python3" || name == "python" {
		name = s.b.cfg.Python
	}
	argv = append(argv, name)
	argv = append(argv, cmd[1:]...)

	// Not ctx's cancellation: exec.CommandContext would kill the leader
	// alone. Exec's watch, the timeout and Pause and Close kill the group.
	c := exec.CommandContext(context.WithoutCancel(ctx), argv[0], argv[1:]...)
	c.Dir = dir
	for _, kv := range local.Env() {
		c.Env = append(c.Env, kv[0]+"="+kv[1])
	}
	c.Env = append(c.Env, opt.Env...)
	c.Stdin, c.Stdout, c.Stderr = stdin, stdout, stderr
	c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	// Copying opt.Stdin must not hold the wait once the command is gone.
	c.WaitDelay = 2 * time.Second

	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.state.Usable(s.ID(), s.deadline, s.opt.Timeout); err != nil {
		return nil, err
	}
	if err := c.Start(); err != nil {
		return nil, fmt.Errorf("exec %s: %w", cmd[0], err)
	}
	p := &proc{cmd: c, s: s, done: make(chan struct{})}
	s.procs[p] = struct{}{}
	s.watch.Started()
	go p.wait()
	return p, nil
}

// workingDir is opt.Dir inside the pod: under /work (which must exist) or
// anywhere else absolute, such as /tmp.
func (s *Sandbox) workingDir(dir string) (string, error) {
	if dir == "" {
		dir = sandbox.WorkDir
	}
	if !path.IsAbs(dir) {
		dir = path.Join(sandbox.WorkDir, dir)
	}
	host := dir
	if rel, err := sandbox.WorkPath(dir); err == nil {
		host = filepath.Join(s.b.cfg.Work, rel)
	}
	if fi, err := os.Stat(host); err != nil || !fi.IsDir() {
		return "", fmt.Errorf("exec: working directory %s does not exist", dir)
	}
	return host, nil
}

func (p *proc) wait() {
	err := p.cmd.Wait()
	code := 0
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			code = 128 + int(ws.Signal())
		} else {
			code = ee.ExitCode()
		}
		err = nil
	case errors.Is(err, exec.ErrWaitDelay):
		err = nil
	}
	// Whatever the command left in its group goes with it.
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
	p.mu.Lock()
	p.code, p.err = code, err
	p.mu.Unlock()
	p.s.mu.Lock()
	delete(p.s.procs, p)
	p.s.mu.Unlock()
	close(p.done)
}

// kill ends the command's whole process group, recording why.
func (p *proc) kill(reason killReason) {
	p.mu.Lock()
	if p.reason == killNone {
		p.reason = reason
	}
	p.mu.Unlock()
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
}

func (p *proc) stopFor(why string) {
	p.mu.Lock()
	if p.stopped == "" {
		p.stopped = why
	}
	p.mu.Unlock()
	p.kill(killStopped)
}

// process is a started command as sandbox.Process.
type process struct {
	p      *proc
	stdin  *os.File
	stdout *os.File
	stderr *os.File
}

func (pr *process) Stdin() io.WriteCloser { return pr.stdin }
func (pr *process) Stdout() io.Reader     { return pr.stdout }
func (pr *process) Stderr() io.Reader     { return pr.stderr }

// Signal delivers sig to the process's whole group.
func (pr *process) Signal(sig sandbox.Signal) error {
	n, err := sig.Number()
	if err != nil {
		return err
	}
	select {
	case <-pr.p.done:
		return nil
	default:
	}
	return syscall.Kill(-pr.p.cmd.Process.Pid, n)
}

// Wait blocks until the process exits and returns its exit code.
func (pr *process) Wait() (int, error) {
	<-pr.p.done
	_ = pr.stdin.Close()
	pr.p.mu.Lock()
	defer pr.p.mu.Unlock()
	if pr.p.reason == killTimeout {
		return sandbox.ExitTimedOut, pr.p.err
	}
	return pr.p.code, pr.p.err
}

// StopReason says why the sandbox stopped the process, if it did.
func (pr *process) StopReason() string {
	pr.p.mu.Lock()
	defer pr.p.mu.Unlock()
	return pr.p.stopped
}
