package local

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/terpdev/terp/internal/sandbox"
)

// How a command is run:
//
//  1. bwrap starts in its own process group (so a Ctrl-C meant for terp does
//     not reach it) with PR_SET_PDEATHSIG, from a goroutine locked to its OS
//     thread until the command is reaped: the signal fires when the creating
//     thread exits, not the process (golang/go#27505).
//  2. bwrap clones the sandbox's init, the pid 1 of a new pid namespace,
//     reports its host pid on --json-status-fd and holds it on --block-fd.
//  3. terp opens a pidfd for it, applies rlimits and joins the cgroup (v1;
//     with cgroup v2 bwrap was started inside it), then releases it. Only now
//     does the command start, as init's child, inheriting all of it.
//  4. When the command exits, init exits, and the kernel kills everything
//     left in the pid namespace: a background `sleep 1000` or a double-forked
//     daemon does not outlive the step. On timeout, cancellation, Pause or
//     Close, terp kills init through the pidfd (immune to pid reuse) with the
//     same effect, and bwrap itself through os.Process.
//
// Killing by process group (kill(-pgid)) is not used: the command runs in a
// new session, hence another group, and a group id can be reused once bwrap
// is reaped, while a pidfd cannot.

// Descriptors bwrap inherits, after stdin, stdout and stderr.
const (
	statusFD = 3 // --json-status-fd: {"child-pid": N, ...} then {"exit-code": N}
	blockFD  = 4 // --block-fd: bwrap waits for a byte here before the command starts
	filterFD = 5 // --seccomp: the compiled filter, when there is one
)

// waitDelay bounds how long Wait waits for output pipes after bwrap exits.
// Nothing in the sandbox survives bwrap, so this is only a safety net.
const waitDelay = 2 * time.Second

type killReason int

const (
	killNone killReason = iota
	killTimeout
	killCanceled
	killStopped // Pause or Close
	killSignal  // Process.Signal(SIGKILL)
	killLimit   // a sandbox limit that is not an rlimit or cgroup's (stopFor)
)

// proc is one running bwrap and what terp knows about the sandbox it made.
type proc struct {
	cmd *exec.Cmd

	mu     sync.Mutex
	pidfd  int    // the sandbox init's pidfd; -1 until known and after exit; -(pid+1) without pidfd support
	pidns  uint64 // the sandbox's pid namespace inode, 0 until known
	reaped bool   // bwrap has been waited for
	reason killReason
	why    string // for killLimit, the words for the model
	exit   *int   // from bwrap's status, once the command ended

	waited     chan struct{} // closed when bwrap is reaped
	statusRead chan struct{} // closed when bwrap's status descriptor is drained
	done       chan struct{} // closed when both are
	waitErr    error
}

// stdio is what a command's standard streams connect to.
type stdio struct {
	in       io.Reader
	out, err io.Writer
}

// launch starts cmd and returns once the command runs inside its limits. The
// returned proc is tracked by the sandbox until it ends. ctx and timeout
// (zero for none) kill it.
func (s *Sandbox) launch(ctx context.Context, cmd []string, opt sandbox.ExecOptions, std stdio) (*proc, error) {
	if err := s.usableErr(); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	dir, err := workingDir(opt.Dir)
	if err != nil {
		return nil, err
	}
	if err := s.checkDir(dir); err != nil {
		return nil, err
	}
	control := []string{
		"--json-status-fd", strconv.Itoa(statusFD),
		"--block-fd", strconv.Itoa(blockFD),
	}
	filterR, err := s.b.filterPipe()
	if err != nil {
		return nil, err
	}
	if filterR != nil {
		defer filterR.Close()
		control = append(control, "--seccomp", strconv.Itoa(filterFD))
	}
	argv, err := s.argv(cmd, opt, control)
	if err != nil {
		return nil, err
	}
	if s.meta.HostUID != 0 {
		argv = append(prlimitArgs(s.b.prlimit, s.b.limits.kind, s.meta.Limits), argv...)
	}

	statusR, statusW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	defer statusW.Close()
	blockR, blockW, err := os.Pipe()
	if err != nil {
		statusR.Close()
		return nil, err
	}
	defer blockR.Close()
	defer blockW.Close()

	c := &exec.Cmd{
		Path:       argv[0],
		Args:       argv,
		Dir:        "/",        // terp's own directory may be closed to the sandbox's uid
		Env:        []string{}, // bwrap's own environment is readable as /proc/1/environ inside
		Stdin:      std.in,
		Stdout:     std.out,
		Stderr:     std.err,
		ExtraFiles: []*os.File{statusW, blockR},
		SysProcAttr: &syscall.SysProcAttr{
			Setpgid:    true,
			Pdeathsig:  syscall.SIGKILL, // set after the uid changes, so it holds
			Credential: credential(s.meta.HostUID),
		},
		WaitDelay: waitDelay,
	}
	if filterR != nil {
		c.ExtraFiles = append(c.ExtraFiles, filterR)
	}
	cgfd, err := s.cgroup.openDir()
	if err != nil {
		statusR.Close()
		return nil, fmt.Errorf("open cgroup: %w", err)
	}
	if cgfd >= 0 {
		c.SysProcAttr.UseCgroupFD = true
		c.SysProcAttr.CgroupFD = cgfd
	}

	p := &proc{
		cmd:        c,
		pidfd:      -1,
		waited:     make(chan struct{}),
		statusRead: make(chan struct{}),
		done:       make(chan struct{}),
	}
	started := make(chan error, 1)
	go p.run(started)
	err = <-started
	if cgfd >= 0 {
		unix.Close(cgfd)
	}
	if err != nil {
		statusR.Close()
		return nil, fmt.Errorf("start bwrap: %w", err)
	}
	statusW.Close()
	blockR.Close()
	if !s.track(p) {
		// Paused or closed while bwrap started.
		p.kill(killStopped)
		statusR.Close()
		<-p.waited
		return nil, s.usableErr()
	}
	go func() {
		<-p.waited
		<-p.statusRead
		close(p.done)
		s.untrack(p)
	}()
	sandbox.Watch(ctx, opt.Timeout, p.done, func(timedOut bool) {
		if timedOut {
			p.kill(killTimeout)
		} else {
			p.kill(killCanceled)
		}
	})

	if err := p.handshake(statusR, blockW, s); err != nil {
		p.kill(killStopped)
		<-p.done
		p.mu.Lock()
		reason := p.reason
		p.mu.Unlock()
		switch reason {
		case killCanceled:
			return nil, context.Cause(ctx)
		case killTimeout:
			return nil, fmt.Errorf("sandbox setup took longer than the command's timeout (%s)", opt.Timeout)
		}
		return nil, err
	}
	return p, nil
}

// checkDir makes sure a working directory under /work exists, so that a
// typo is reported as such rather than as the command failing with bwrap's
// "Can't chdir".
func (s *Sandbox) checkDir(dir string) error {
	rel, err := workPath(dir)
	if err != nil {
		return nil // elsewhere in the sandbox (/tmp): bwrap will tell
	}
	root, err := os.OpenRoot(s.work)
	if err != nil {
		return err
	}
	defer root.Close()
	fi, err := root.Stat(rel)
	if err != nil {
		return fmt.Errorf("working directory %s: %w", dir, err)
	}
	if !fi.IsDir() {
		return fmt.Errorf("working directory %s is not a directory", dir)
	}
	return nil
}

// run starts bwrap and waits for it on one locked OS thread (see the
// comment at the top of this file).
func (p *proc) run(started chan<- error) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if err := p.cmd.Start(); err != nil {
		started <- err
		return
	}
	started <- nil
	p.waitErr = p.cmd.Wait()
	p.mu.Lock()
	if p.pidfd >= 0 {
		unix.Close(p.pidfd)
	}
	p.pidfd = -1
	p.reaped = true
	p.mu.Unlock()
	close(p.waited)
}

// handshake reads the sandbox init's pid from bwrap, limits it and lets the
// command start. The first status message arrives once bwrap has cloned
// init; bwrap that fails earlier (no user namespaces, a bad option) closes
// the descriptor without a message and says why on stderr.
func (p *proc) handshake(statusR, blockW *os.File, s *Sandbox) error {
	dec := json.NewDecoder(statusR)
	var first struct {
		ChildPid     int    `json:"child-pid"`
		PidNamespace uint64 `json:"pid-namespace"`
	}
	if err := dec.Decode(&first); err != nil || first.ChildPid <= 0 {
		statusR.Close()
		close(p.statusRead)
		return errBwrapFailed
	}
	go p.readStatus(dec, statusR)

	pid := first.ChildPid
	fd, err := unix.PidfdOpen(pid, 0)
	if err != nil && !errors.Is(err, unix.ENOSYS) {
		return fmt.Errorf("sandbox init %d: %w", pid, err)
	}
	if err != nil {
		fd = -pid - 1 // no pidfd (Linux < 5.3): remember the pid for kill(2)
	}
	ns := first.PidNamespace
	if ns == 0 {
		var st unix.Stat_t
		if unix.Stat(fmt.Sprintf("/proc/%d/ns/pid", pid), &st) == nil {
			ns = st.Ino
		}
	}
	p.mu.Lock()
	if p.reaped {
		p.mu.Unlock()
		if fd >= 0 {
			unix.Close(fd)
		}
		return errors.New("bwrap exited while starting the sandbox")
	}
	p.pidfd, p.pidns = fd, ns
	reason := p.reason
	p.mu.Unlock()
	if reason != killNone {
		// Killed (timeout, cancel) before the pid was known: finish the job.
		p.kill(reason)
	}

	if s.meta.HostUID == 0 { // otherwise prlimit started bwrap limited
		if err := setRlimits(pid, s.b.limits.kind, s.meta.Limits); err != nil {
			return fmt.Errorf("limit sandbox: %w", err)
		}
	}
	if err := s.cgroup.join(pid); err != nil {
		return fmt.Errorf("limit sandbox: %w", err)
	}
	if _, err := blockW.Write([]byte{0}); err != nil {
		return fmt.Errorf("release sandbox: %w", err)
	}
	return blockW.Close()
}

// errBwrapFailed means bwrap exited before making the sandbox. Its message
// is on the command's stderr, which the caller adds.
var errBwrapFailed = errors.New("bwrap could not create the sandbox")

// readStatus waits for bwrap's last status message, the command's exit code.
func (p *proc) readStatus(dec *json.Decoder, statusR *os.File) {
	defer close(p.statusRead)
	defer statusR.Close()
	for {
		var msg struct {
			ExitCode *int `json:"exit-code"`
		}
		if err := dec.Decode(&msg); err != nil {
			return
		}
		if msg.ExitCode != nil {
			p.mu.Lock()
			p.exit = msg.ExitCode
			p.mu.Unlock()
		}
	}
}

// kill ends the command and everything in its sandbox. The first reason
// sticks: a command that timed out and was then closed still timed out.
func (p *proc) kill(reason killReason) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.reason == killNone {
		p.reason = reason
	}
	if p.reaped {
		return
	}
	switch {
	case p.pidfd >= 0:
		_ = unix.PidfdSendSignal(p.pidfd, unix.SIGKILL, nil, 0)
	case p.pidfd < -1:
		_ = unix.Kill(-p.pidfd-1, unix.SIGKILL)
	}
	if reason == killSignal && p.pidfd != -1 {
		// Let bwrap report the command's death (137) as its exit code.
		return
	}
	_ = p.cmd.Process.Kill()
}

// stopFor kills the command for breaking a sandbox limit, keeping why.
func (p *proc) stopFor(why string) {
	p.mu.Lock()
	if p.reason == killNone {
		p.why = why
	}
	p.mu.Unlock()
	p.kill(killLimit)
}

// stopReason is why stopFor killed the command, or "".
func (p *proc) stopReason() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.reason != killLimit {
		return ""
	}
	return p.why
}

// signal delivers sig to every process in the sandbox's pid namespace except
// its init (which, as bwrap's reaper, would ignore it anyway): the command,
// its children and whatever they daemonized.
func (p *proc) signal(sig unix.Signal) error {
	if sig == unix.SIGKILL {
		p.kill(killSignal)
		return nil
	}
	p.mu.Lock()
	ns, alive := p.pidns, !p.reaped
	p.mu.Unlock()
	if !alive {
		return os.ErrProcessDone
	}
	if ns == 0 {
		return errors.New("signal: the sandbox's pid namespace is unknown")
	}
	pids, err := pidsInNamespace(ns)
	if err != nil {
		return err
	}
	sent := 0
	for _, pid := range pids {
		if nsPid(pid) == 1 {
			continue
		}
		if unix.Kill(pid, sig) == nil {
			sent++
		}
	}
	if sent == 0 {
		// Only init is left, or the command is gone: say so rather than
		// let a caller wait for a signal nobody got.
		return fmt.Errorf("signal %v: no process of the command is left in the sandbox (of %d in its pid namespace)", sig, len(pids))
	}
	return nil
}

// wait blocks until the command ends and returns its exit code, how it was
// killed and any failure of bwrap itself.
func (p *proc) wait() (code int, reason killReason, err error) {
	<-p.done
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case p.reason == killTimeout:
		return sandbox.ExitTimedOut, p.reason, nil
	case p.reason == killCanceled || p.reason == killStopped:
		return -1, p.reason, nil
	case p.exit != nil:
		return *p.exit, p.reason, nil
	case p.reason == killSignal || p.reason == killLimit:
		return 128 + int(unix.SIGKILL), p.reason, nil
	}
	// bwrap ended without reporting the command's exit: bwrap itself failed.
	code = -1
	if p.cmd.ProcessState != nil {
		code = p.cmd.ProcessState.ExitCode()
	}
	if p.waitErr != nil && !errors.As(p.waitErr, new(*exec.ExitError)) {
		return code, killNone, p.waitErr
	}
	return code, killNone, errBwrapFailed
}

// pidsInNamespace lists the host pids of the processes in pid namespace ns.
func pidsInNamespace(ns uint64) ([]int, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil, err
	}
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		var st unix.Stat_t
		if unix.Stat("/proc/"+e.Name()+"/ns/pid", &st) == nil && st.Ino == ns {
			pids = append(pids, pid)
		}
	}
	return pids, nil
}

// nsPid is pid's number inside its own pid namespace (the last NSpid field
// of /proc/<pid>/status), or 0 if unknown.
func nsPid(pid int) int {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0
	}
	for line := range strings.Lines(string(data)) {
		if rest, ok := strings.CutPrefix(line, "NSpid:"); ok {
			f := strings.Fields(rest)
			if len(f) > 0 {
				n, _ := strconv.Atoi(f[len(f)-1])
				return n
			}
		}
	}
	return 0
}
