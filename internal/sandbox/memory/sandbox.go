package memory

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/terpdev/terp/internal/sandbox"
)

// Sandbox is one sandbox of a Backend, as Create or Resume returned it. It
// is safe for concurrent use.
type Sandbox struct {
	b   *Backend
	box *box

	mu       sync.Mutex
	state    sandbox.State
	deadline time.Time
	runs     map[*run]struct{} // running commands, stopped by Pause and Close
}

// ID names the sandbox for Backend.Resume.
func (s *Sandbox) ID() sandbox.SessionID { return s.box.id }

// WriteFile creates or replaces the file at p (under /work; a relative p is
// relative to it) with r's bytes, making its parent directories.
func (s *Sandbox) WriteFile(ctx context.Context, p string, r io.Reader) error {
	rel, err := filePath(sandbox.WorkDir, p)
	if err != nil {
		return fmt.Errorf("write %s: %w", p, err)
	}
	if err := s.filesErr(); err != nil {
		return fmt.Errorf("write %s: %w", p, err)
	}
	data, err := io.ReadAll(sandbox.ContextReader(ctx, r))
	if err == nil {
		err = s.box.files.write(rel, data, 0)
	}
	if err != nil {
		return fmt.Errorf("write %s: %w", p, err)
	}
	return nil
}

// ReadFile opens the file at p. What it reads is the file as it was when
// opened, whatever is written to it afterwards.
func (s *Sandbox) ReadFile(ctx context.Context, p string) (io.ReadCloser, error) {
	rel, err := filePath(sandbox.WorkDir, p)
	if err == nil {
		err = ctx.Err()
	}
	if err == nil {
		err = s.filesErr()
	}
	var data []byte
	if err == nil {
		data, err = s.box.files.read(rel)
	}
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", p, err)
	}
	return io.NopCloser(bytes.NewReader(data)), nil
}

// List returns the regular files under dir ("" for /work), with paths
// relative to dir: past Config.MaxList (sandbox.MaxListEntries), the most
// recently modified, with a *sandbox.TruncatedError.
func (s *Sandbox) List(ctx context.Context, dir string) ([]sandbox.FileInfo, error) {
	if dir == "" {
		dir = sandbox.WorkDir
	}
	rel, err := workPath(sandbox.WorkDir, dir)
	if err == nil {
		err = ctx.Err()
	}
	if err == nil {
		err = s.filesErr()
	}
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", dir, err)
	}
	files, err := s.box.files.list(rel, s.b.cfg.MaxList)
	if err != nil && !errors.Is(err, sandbox.ErrListTruncated) {
		return nil, fmt.Errorf("list %s: %w", dir, err)
	}
	return files, err
}

// filesErr says why the sandbox's files may not be used: only once it is
// closed. A paused or expired sandbox keeps them readable, as the local
// backend's does.
func (s *Sandbox) filesErr() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.state == sandbox.Closed {
		return fmt.Errorf("sandbox %s is closed", s.box.id)
	}
	return nil
}

// usable says why the sandbox may not start a command, or nil.
func (s *Sandbox) usable() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.state.Usable(s.box.id, s.deadline, s.box.opt.Timeout)
}

// Pause stops the sandbox's commands and keeps its files for
// Backend.Resume. This Sandbox runs nothing afterwards.
func (s *Sandbox) Pause(ctx context.Context) (sandbox.SessionID, error) {
	s.mu.Lock()
	if s.state == sandbox.Closed {
		s.mu.Unlock()
		return "", fmt.Errorf("sandbox %s is closed", s.box.id)
	}
	s.state = sandbox.Paused
	s.mu.Unlock()
	s.stopAll()
	s.b.pause(s.box)
	return s.box.id, nil
}

// Close stops the sandbox's commands and drops its files, for every
// Sandbox standing for it. Closing twice is not an error.
func (s *Sandbox) Close(ctx context.Context) error {
	s.mu.Lock()
	if s.state == sandbox.Closed {
		s.mu.Unlock()
		return nil
	}
	s.state = sandbox.Closed
	s.mu.Unlock()
	s.stopAll()
	s.b.remove(s.box)
	return nil
}

// stopAll ends every running command. Ending one is immediate: its
// program may go on in its goroutine, but nothing it does reaches the
// sandbox any more.
func (s *Sandbox) stopAll() {
	s.mu.Lock()
	runs := make([]*run, 0, len(s.runs))
	for r := range s.runs {
		runs = append(runs, r)
	}
	s.mu.Unlock()
	for _, r := range runs {
		r.end(-1, killStopped, "")
	}
}

// track registers a command about to start, unless the sandbox stopped.
func (s *Sandbox) track(r *run) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.state != sandbox.Running {
		return false
	}
	s.runs[r] = struct{}{}
	return true
}

func (s *Sandbox) untrack(r *run) {
	s.mu.Lock()
	delete(s.runs, r)
	s.mu.Unlock()
}
