package local

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/terpdev/terp/internal/sandbox"
)

// Sandbox is one conversation's directory and the commands running in it. It
// is safe for concurrent use: the persistent kernel may run (Start) while the
// agent reads files or runs other commands (Exec).
type Sandbox struct {
	b      *Backend
	id     string
	dir    string // <Root>/<id> on the host
	work   string // <Root>/<id>/work, bound at /work
	meta   meta
	cgroup *cgroup      // nil when limits are rlimits only
	egress *egressProxy // nil unless the network mode is allowlist

	mu       sync.Mutex
	state    sandbox.State
	deadline time.Time
	procs    map[*proc]struct{} // running commands, killed by Pause and Close
	watch    *sandbox.WorkWatch // keeps /work under Limits.WorkBytes
}

// ID is the sandbox's id, also its directory name under Config.Root and the
// SessionID Pause returns.
func (s *Sandbox) ID() sandbox.SessionID { return sandbox.SessionID(s.id) }

// HostDir is the host directory bound at /work. Reading or writing it
// directly is unsafe while code runs (it may plant symlinks); use ReadFile,
// WriteFile and List, which are not fooled by them.
func (s *Sandbox) HostDir() string { return s.work }

// usable returns an error when the sandbox may not start new commands.
func (s *Sandbox) usable() error {
	return s.state.Usable(s.ID(), s.deadline, s.meta.Timeout)
}

// Pause stops every process of the sandbox and keeps its files. The returned
// id goes to Backend.Resume, in this process or a later one. The Sandbox
// itself refuses new commands afterwards.
func (s *Sandbox) Pause(ctx context.Context) (sandbox.SessionID, error) {
	s.mu.Lock()
	if s.state == sandbox.Closed {
		s.mu.Unlock()
		return "", fmt.Errorf("sandbox %s is closed", s.id)
	}
	s.state = sandbox.Paused
	s.meta.Paused = true
	m := s.meta
	s.mu.Unlock()

	err := s.stopAll(ctx)
	s.egress.close()
	if werr := writeMeta(s.dir, m); werr != nil {
		err = errors.Join(err, fmt.Errorf("pause sandbox %s: %w", s.id, werr))
	}
	return sandbox.SessionID(s.id), err
}

// Close kills everything the sandbox runs and removes its directory, even
// parts the code made read-only. Closing twice is not an error.
func (s *Sandbox) Close(ctx context.Context) error {
	s.mu.Lock()
	if s.state == sandbox.Closed {
		s.mu.Unlock()
		return nil
	}
	s.state = sandbox.Closed
	s.mu.Unlock()

	err := s.stopAll(ctx)
	s.egress.close()
	if rmErr := removeTree(s.dir); rmErr != nil {
		err = errors.Join(err, fmt.Errorf("remove sandbox %s: %w", s.id, rmErr))
	}
	return err
}

// stopAll kills the running commands, waits for them to go and removes the
// cgroup, which has to be empty to be removed.
func (s *Sandbox) stopAll(ctx context.Context) error {
	procs := s.running()
	for _, p := range procs {
		p.kill(killStopped)
	}
	for _, p := range procs {
		select {
		case <-p.done:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	if s.cgroup != nil {
		return s.cgroup.remove()
	}
	return nil
}

// running copies the set of running commands.
func (s *Sandbox) running() []*proc {
	s.mu.Lock()
	defer s.mu.Unlock()
	procs := make([]*proc, 0, len(s.procs))
	for p := range s.procs {
		procs = append(procs, p)
	}
	return procs
}

// track registers a started command so that Pause and Close can kill it. It
// reports false, and does not register it, if the sandbox stopped meanwhile.
func (s *Sandbox) track(p *proc) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.state != sandbox.Running {
		return false
	}
	s.procs[p] = struct{}{}
	s.watch.Started()
	return true
}

// usableErr is usable with the lock taken.
func (s *Sandbox) usableErr() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.usable()
}

func (s *Sandbox) untrack(p *proc) {
	s.mu.Lock()
	delete(s.procs, p)
	s.mu.Unlock()
}

// meta is what a sandbox directory remembers about its sandbox, so that a
// later terp process can resume it with the same limits.
type meta struct {
	ID      string          `json:"id"`
	Created time.Time       `json:"created"`
	Timeout time.Duration   `json:"timeout"`
	Limits  sandbox.Limits  `json:"limits"`
	Network sandbox.Network `json:"egress"`
	// Deadline ends the sandbox's lifetime, counted from its creation or
	// its last resume. Paused is set while nothing runs in it: a paused
	// sandbox costs only disk and does not expire, while one left running
	// (its terp killed before it could pause) is expired after Deadline.
	Deadline time.Time `json:"deadline"`
	Paused   bool      `json:"paused"`
	// HostUID is the host uid the code runs as, set when terp runs as root
	// (see hostuid.go); 0 means terp's own user.
	HostUID uint32 `json:"host_uid,omitempty"`
}

// expired reports whether a sandbox left running is past its lifetime.
func (m meta) expired(now time.Time) bool {
	return !m.Paused && !m.Deadline.IsZero() && now.After(m.Deadline)
}

func (m *meta) fillDefaults() {
	if m.Timeout <= 0 {
		m.Timeout = DefaultTimeout
	}
	if m.Limits.MemoryBytes <= 0 {
		m.Limits.MemoryBytes = DefaultMemoryBytes
	}
	if m.Limits.Processes <= 0 {
		m.Limits.Processes = DefaultProcesses
	}
	if m.Limits.FileSizeBytes <= 0 {
		m.Limits.FileSizeBytes = DefaultFileSizeBytes
	}
	if m.Limits.WorkBytes <= 0 {
		m.Limits.WorkBytes = DefaultWorkBytes
	}
}

const metaFile = "sandbox.json"

func writeMeta(dir string, m meta) error {
	data, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return err
	}
	tmp := filepath.Join(dir, metaFile+".tmp")
	if err := os.WriteFile(tmp, append(data, '\n'), 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, filepath.Join(dir, metaFile))
}

func readMeta(dir string) (meta, error) {
	var m meta
	data, err := os.ReadFile(filepath.Join(dir, metaFile))
	if err != nil {
		return m, err
	}
	if err := json.Unmarshal(data, &m); err != nil {
		return m, fmt.Errorf("%s: %w", metaFile, err)
	}
	if m.ID != filepath.Base(dir) {
		return m, fmt.Errorf("%s names sandbox %q, not %q", metaFile, m.ID, filepath.Base(dir))
	}
	m.fillDefaults()
	return m, nil
}

// removeTree removes dir. The code in the sandbox owns the files under work/
// and may have removed the write or search permission of directories, which
// stops a plain RemoveAll for a non-root user; those are given back first.
func removeTree(dir string) error {
	if err := os.RemoveAll(dir); err == nil {
		return nil
	}
	restorePermissions(dir)
	return os.RemoveAll(dir)
}

// restorePermissions makes every directory under dir accessible to its
// owner again. Directories are reached through an os.Root and only real
// directories are changed, so a symlink planted by the code cannot turn the
// chmod onto a host directory.
func restorePermissions(dir string) {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return
	}
	defer root.Close()
	_ = root.Chmod(".", 0o700)
	_ = fs.WalkDir(root.FS(), ".", func(p string, d fs.DirEntry, err error) error {
		// WalkDir visits a directory before reading it, so the chmod here
		// is what lets it read the directory next.
		if d != nil && d.IsDir() && err == nil {
			_ = root.Chmod(p, 0o700)
		}
		return nil
	})
}
