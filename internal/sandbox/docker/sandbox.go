package docker

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"sync"
	"time"

	"github.com/terpdev/terp/internal/egress"
	"github.com/terpdev/terp/internal/sandbox"
)

// Sandbox is one conversation's container. It is safe for concurrent use: the
// persistent kernel may run (Start) while the agent reads files or runs
// other commands (Exec).
type Sandbox struct {
	b           *Backend
	id          string
	containerID string
	timeout     time.Duration

	mu       sync.Mutex
	state    sandbox.State
	deadline time.Time
	runs     map[*execution]struct{} // running commands, killed by Pause and Close
	egress   *egress.Socket          // nil unless the network mode is allowlist
	watch    *sandbox.WorkWatch      // keeps /work under Limits.WorkBytes
}

func (b *Backend) newSandbox(id, containerID string, timeout time.Duration, deadline time.Time, workLimit int64) *Sandbox {
	s := &Sandbox{
		b:           b,
		id:          id,
		containerID: containerID,
		timeout:     timeout,
		deadline:    deadline,
		runs:        make(map[*execution]struct{}),
	}
	s.watch = s.newWorkWatch(workLimit)
	return s
}

// ID is the sandbox's id, found in its container's dev.terp.sandbox label
// and its name, and the SessionID Pause returns.
func (s *Sandbox) ID() sandbox.SessionID { return sandbox.SessionID(s.id) }

// ContainerID is the Docker container's id, for `docker inspect`.
func (s *Sandbox) ContainerID() string { return s.containerID }

// usable returns an error when the sandbox may not start new commands. The
// caller holds s.mu.
func (s *Sandbox) usable() error {
	return s.state.Usable(s.ID(), s.deadline, s.timeout)
}

func (s *Sandbox) usableErr() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.usable()
}

// track registers a started command so that Pause and Close can stop it. It
// reports false if the sandbox stopped meanwhile.
func (s *Sandbox) track(e *execution) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.state != sandbox.Running {
		return false
	}
	s.runs[e] = struct{}{}
	s.watch.Started()
	return true
}

func (s *Sandbox) untrack(e *execution) {
	s.mu.Lock()
	delete(s.runs, e)
	s.mu.Unlock()
}

// Pause kills every command running in the sandbox, then freezes the
// container (docker pause): it keeps its files, and costs no CPU until
// Backend.Resume, in this process or a later one. The Sandbox itself
// refuses new commands afterwards.
//
// Commands are killed rather than frozen with the container because a later
// terp cannot reattach to their streams: the kernel starts afresh after a
// resume.
func (s *Sandbox) Pause(ctx context.Context) (sandbox.SessionID, error) {
	s.mu.Lock()
	if s.state == sandbox.Closed {
		s.mu.Unlock()
		return "", fmt.Errorf("sandbox %s is closed", s.id)
	}
	s.state = sandbox.Paused
	s.mu.Unlock()

	err := s.stopAll(ctx)
	s.egress.Close()
	if perr := s.b.eng.ContainerPause(ctx, s.containerID); perr != nil {
		err = errors.Join(err, fmt.Errorf("pause sandbox %s: %w", s.id, perr))
	}
	return sandbox.SessionID(s.id), err
}

// Close removes the container, with everything running in it, and its
// volume. Closing twice is not an error.
func (s *Sandbox) Close(ctx context.Context) error {
	s.mu.Lock()
	if s.state == sandbox.Closed {
		s.mu.Unlock()
		return nil
	}
	s.state = sandbox.Closed
	runs := s.runList()
	s.mu.Unlock()

	for _, e := range runs {
		e.markKilled(killStopped)
	}
	// Removing the container kills its processes, which ends their streams.
	s.egress.Close()
	err := s.b.remove(ctx, s.containerID, s.id)
	for _, e := range runs {
		e.closeStreams()
	}
	if err != nil {
		return fmt.Errorf("remove sandbox %s: %w", s.id, err)
	}
	return nil
}

// runList copies the running commands. The caller holds s.mu.
func (s *Sandbox) runList() []*execution {
	runs := make([]*execution, 0, len(s.runs))
	for e := range s.runs {
		runs = append(runs, e)
	}
	return runs
}

// stopAll kills every command terp started in the container and waits for
// their streams to end.
func (s *Sandbox) stopAll(ctx context.Context) error {
	s.mu.Lock()
	runs := s.runList()
	s.mu.Unlock()
	for _, e := range runs {
		e.markKilled(killStopped)
	}
	err := s.signalAll(ctx, 9)
	for _, e := range runs {
		e.awaitStreams(ctx)
	}
	return err
}

// signalAll sends signal sig to every command terp started in the
// container, including those of a terp that died.
func (s *Sandbox) signalAll(ctx context.Context, sig int) error {
	return s.helperExec(ctx, "", []string{"python3", "-I", "-S", "-c", killPy, strconv.Itoa(sig), "all"})
}

// rootExec runs a setup command as root (without capabilities, like
// everything in the container) and fails unless it exits 0.
func (s *Sandbox) rootExec(ctx context.Context, cmd ...string) error {
	return s.helperExec(ctx, "0:0", cmd)
}

// helperExec runs one of terp's own commands to completion, outside the
// session machinery of run.py. user empty means the sandbox's user.
func (s *Sandbox) helperExec(ctx context.Context, user string, cmd []string) error {
	if user == "" {
		user = s.b.cfg.User
	}
	out := sandbox.NewCapture(4 << 10)
	code, err := s.b.simpleExec(ctx, s.containerID, user, cmd, nil, out)
	if err != nil {
		return err
	}
	if code != 0 {
		return fmt.Errorf("%s exited %d: %s", cmd[0], code, out.String())
	}
	return nil
}

// simpleExec runs cmd in a container and copies its stdout to stdout, its
// stderr to stdout too, and returns its exit code.
func (b *Backend) simpleExec(ctx context.Context, containerID, user string, cmd []string, env []string, stdout io.Writer) (int, error) {
	execID, err := b.eng.ExecCreate(ctx, containerID, execConfig{
		User:         user,
		AttachStdout: true,
		AttachStderr: true,
		Env:          env,
		WorkingDir:   "/",
		Cmd:          cmd,
	})
	if err != nil {
		return -1, err
	}
	att, err := b.eng.ExecAttach(ctx, execID)
	if err != nil {
		return -1, err
	}
	defer att.Close()
	var copyErr error
	done := make(chan struct{})
	go func() {
		copyErr = demux(stdout, stdout, att)
		close(done)
	}()
	select {
	case <-done:
	case <-ctx.Done():
		att.Close() // ends the copy
		<-done
		return -1, ctx.Err()
	}
	if err := copyErr; err != nil {
		return -1, err
	}
	return b.exitCode(ctx, execID)
}

// exitCode asks the daemon for a finished exec's exit code. The stream can
// end a moment before the daemon records the exit, hence the retries.
func (b *Backend) exitCode(ctx context.Context, execID string) (int, error) {
	delay := time.Millisecond
	for {
		r, err := b.eng.ExecInspect(ctx, execID)
		if err != nil {
			return -1, err
		}
		if !r.Running {
			return r.ExitCode, nil
		}
		select {
		case <-time.After(delay):
		case <-ctx.Done():
			return -1, ctx.Err()
		}
		delay = min(2*delay, 100*time.Millisecond)
	}
}
