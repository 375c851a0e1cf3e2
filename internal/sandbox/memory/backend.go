// Package memory is a sandbox backend for tests: its files live in memory
// and its commands are Go functions (Programs) that the test provides, so
// the logic above the sandbox (the script runner, a conversation) is tested
// in milliseconds, without bubblewrap, Docker or Python. It keeps the rules
// every backend keeps that do not need a real process: paths stay in /work,
// output is bounded and counted, a command that times out or is killed
// stops changing anything, the host environment never reaches a command,
// and pause, resume and close behave as they do elsewhere. It passes the
// conformance suite's contract checks (conformance.RunContract).
//
// A test registers the commands its code runs by name:
//
//	b := memory.New(memory.Config{Programs: map[string]memory.Program{
//		"python3": memory.PythonStandIn,
//	}})
//
// PythonStandIn runs a tiny line language in place of Python, so that a
// kernel (kernel.Start, in script or kernel mode) on a memory sandbox runs
// "code" a test wrote.
package memory

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"path"
	"sync"
	"time"

	"github.com/terpdev/terp/internal/sandbox"
)

var (
	_ sandbox.Backend = (*Backend)(nil)
	_ sandbox.Sandbox = (*Sandbox)(nil)
)

// DefaultTimeout is a sandbox's lifetime when Options leaves it unset, as
// for the real backends.
const DefaultTimeout = 30 * time.Minute

// Config configures a Backend.
type Config struct {
	// Programs are the commands a sandbox runs, by name: a command line
	// runs the program named by its first word, or failing that by the
	// word's last element ("/usr/bin/python3" runs "python3"). Any other
	// command exits 127, as in a shell.
	Programs map[string]Program
	// MaxList bounds what List returns; zero means sandbox.MaxListEntries.
	// A test lowers it to see a listing cut without 100,000 files.
	MaxList int
}

// Backend keeps its sandboxes, running and paused, by id, for as long as
// it lives: Resume gives back the same files.
type Backend struct {
	cfg Config

	mu    sync.Mutex
	boxes map[sandbox.SessionID]*box
}

// box is one sandbox whatever Sandbox values stand for it: the one Create
// returned, paused, and the one Resume returned.
type box struct {
	id    sandbox.SessionID
	opt   sandbox.Options
	files *tree

	// Under Backend.mu.
	paused   bool
	deadline time.Time
}

// New returns a backend with no sandboxes.
func New(cfg Config) *Backend {
	return &Backend{cfg: cfg, boxes: make(map[sandbox.SessionID]*box)}
}

// Create makes an empty sandbox. Options.Network is accepted and means
// nothing: programs are Go functions, and can do what the test lets them.
func (b *Backend) Create(ctx context.Context, opt sandbox.Options) (sandbox.Sandbox, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if opt.Timeout <= 0 {
		opt.Timeout = DefaultTimeout
	}
	id, err := newID()
	if err != nil {
		return nil, err
	}
	deadline := time.Now().Add(opt.Timeout)
	bx := &box{id: id, opt: opt, files: newTree(), deadline: deadline}
	b.mu.Lock()
	b.boxes[id] = bx
	b.mu.Unlock()
	return b.handle(bx, deadline), nil
}

// Resume returns the sandbox id names, with its files, for a new lifetime.
// A sandbox closed, never made by this backend, or left running (not
// paused) past its lifetime is gone: the error is then sandbox.ErrExpired.
func (b *Backend) Resume(ctx context.Context, id sandbox.SessionID) (sandbox.Sandbox, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	bx := b.boxes[id]
	if bx == nil {
		return nil, fmt.Errorf("resume sandbox %s: %w", id, sandbox.ErrExpired)
	}
	if !bx.paused && time.Now().After(bx.deadline) {
		delete(b.boxes, id)
		bx.files.remove()
		return nil, fmt.Errorf("resume sandbox %s: its %s lifetime ended while it was not paused: %w", id, bx.opt.Timeout, sandbox.ErrExpired)
	}
	bx.paused = false
	bx.deadline = time.Now().Add(bx.opt.Timeout)
	return b.handle(bx, bx.deadline), nil
}

// handle is a new Sandbox standing for bx until deadline.
func (b *Backend) handle(bx *box, deadline time.Time) *Sandbox {
	return &Sandbox{b: b, box: bx, deadline: deadline, runs: make(map[*run]struct{})}
}

func (b *Backend) pause(bx *box) {
	b.mu.Lock()
	bx.paused = true
	b.mu.Unlock()
}

// remove forgets bx and drops its files, for every Sandbox standing for it.
func (b *Backend) remove(bx *box) {
	b.mu.Lock()
	if b.boxes[bx.id] == bx {
		delete(b.boxes, bx.id)
	}
	b.mu.Unlock()
	bx.files.remove()
}

// program finds what runs for a command line's first word.
func (b *Backend) program(name string) Program {
	if p, ok := b.cfg.Programs[name]; ok {
		return p
	}
	if p, ok := b.cfg.Programs[path.Base(name)]; ok {
		return p
	}
	return notFound
}

func newID() (sandbox.SessionID, error) {
	var b [6]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	return sandbox.SessionID("mem-" + hex.EncodeToString(b[:])), nil
}
