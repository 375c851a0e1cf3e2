package store

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// fileLock is a conversation held by this process. Two terp processes must not
// run the same conversation at once: both would append to one history and
// drive one sandbox. The lock is an flock on a file in the conversation's
// directory, so the kernel releases it when the process dies, however it
// dies: a SIGKILLed terp never leaves a conversation locked.
type fileLock struct {
	f *os.File
}

// ErrBusy is returned by Lock for a conversation another process holds.
var ErrBusy = errors.New("conversation is in use")

// Lock takes the conversation id for this process, or fails at once with an
// error wrapping ErrBusy that names the process holding it.
func (s *Dir) Lock(id string) (Lock, error) {
	dir := s.path(id)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("lock conversation %s: %w", id, err)
	}
	path := filepath.Join(dir, "lock")
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("lock conversation %s: %w", id, err)
	}
	if err := flockSoon(f, path); err != nil {
		f.Close()
		holder := "another terp process"
		if pid := holderPid(path); pid != 0 {
			holder = fmt.Sprintf("another terp process (pid %d)", pid)
		}
		if errors.Is(err, unix.EWOULDBLOCK) {
			return nil, fmt.Errorf("%w: conversation %s is open in %s; wait for it to finish or quit it", ErrBusy, id, holder)
		}
		return nil, fmt.Errorf("lock conversation %s: %w", id, err)
	}
	// The pid is only for the message above; the flock is the lock.
	_ = f.Truncate(0)
	_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	return &fileLock{f: f}, nil
}

// flockSoon takes the lock on f. When the holder is this process, it tries
// again for a moment: a lock this process has just released may still be
// held by a child between its fork and its exec (a sandbox being started
// for another conversation), which has a copy of every descriptor until
// exec closes it. Another process's lock fails at once.
func flockSoon(f *os.File, path string) error {
	deadline := time.Now().Add(500 * time.Millisecond)
	for {
		err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		if !errors.Is(err, unix.EWOULDBLOCK) || holderPid(path) != os.Getpid() || time.Now().After(deadline) {
			return err
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// holderPid is the pid the lock file names, or 0.
func holderPid(path string) int {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	return pid
}

// Unlock releases the conversation.
func (l *fileLock) Unlock() error {
	if l == nil || l.f == nil {
		return nil
	}
	err := l.f.Close() // closing the last descriptor releases the flock
	l.f = nil
	return err
}
