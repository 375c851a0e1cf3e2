// Package conversation is the life of a conversation, the same for every
// front-end: it creates or resumes the sandbox, uploads the user's files
// (and uploads them again when the sandbox is lost), runs turns, pauses the
// sandbox when the user is away and when it has lived its lifetime, tells the
// model what it lost, saves the record after every step and downloads what
// the code saved. It knows nothing about terminals or HTTP: `terp ask`, the
// chat (both modes), `terp batch` and the servers only add rendering and
// protocol. What the user should hear comes back as values (Turn.Warnings,
// Warnings, Close) and as the agent's events, never as writes to a stream.
//
// A conversation is safe for concurrent use under one locking policy. Its
// turn lock orders everything that reads or changes what the model has (the
// history, the settings, the sandbox and runner the agent uses), and is taken
// in one place, one of two ways. Turns and runs (Turn, Ask, Continue, Run)
// are refused at once with ErrBusy while another holds it: a server answers
// a second request for the same conversation 409 rather than queue it behind
// a turn that may take minutes; the settings a turn brings (TurnRequest) are
// applied under the lock with it. Everything else that needs it (History,
// PendingCalls, Rewind, Restart, Upload, Put and the setters) waits for it as
// long as its context allows, and returns the context's error when that ends
// first. Info, Paused and Warnings never wait for a turn, nor do Files,
// ReadFile, Download and RemoveFile, which touch only the sandbox. A turn's
// send function runs under no lock of the conversation but the turn lock: a
// warning found under another (a save that failed) is queued and sent once
// that is let go, so that a slow client (a server's stream of events) holds
// up only its own turn.
//
// Words, used the same way everywhere: a conversation is the questions,
// answers, steps and /work of one line of inquiry, live or stored; its
// sandbox is where its code runs; a sandbox's pause handle is its sandbox id
// (sandbox.SessionID, the contract's word); Python is the kernel or script
// that runs the code inside the sandbox.
package conversation

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"golang.org/x/sys/unix"

	"github.com/terpdev/terp/internal/agent"
	"github.com/terpdev/terp/internal/config"
	"github.com/terpdev/terp/internal/sandbox"
	"github.com/terpdev/terp/internal/store"
)

// Service opens, resumes and removes conversations. It is safe for
// concurrent use, and so is each conversation it returns: a server holds
// many at once, each with its own settings, sandbox and lock.
type Service struct {
	store      store.Store
	newBackend func(*config.Config) (sandbox.Backend, error)
	newModel   func(*config.Config) agent.Completer
	warm       *warmPools
}

// Deps are what a Service is built from. NewBackend is called once per
// conversation opened with that conversation's configuration; a front-end
// that runs many (batch, a server) returns one shared backend from it.
// NewModel may be nil for a front-end whose client writes the code itself
// (Conversation.Run) and never asks a question.
type Deps struct {
	Store      store.Store
	NewBackend func(*config.Config) (sandbox.Backend, error)
	NewModel   func(*config.Config) agent.Completer
	// Warm is how many sandboxes to keep made, with Python started and
	// its prewarm imports done, for each setup conversations were opened
	// with lately (see warm.go): a server's conversations then start
	// without waiting for them. Zero keeps none, as a command that opens
	// one conversation should. Log hears of a warm sandbox that could not
	// be made; nil discards.
	Warm int
	Log  *slog.Logger
}

// New returns the service for deps. Close it when done if it keeps warm
// sandboxes.
func New(deps Deps) *Service {
	return &Service{store: deps.Store, newBackend: deps.NewBackend, newModel: deps.NewModel,
		warm: newWarmPools(deps.Warm, deps.Log)}
}

// KeepWarm has the service keep Deps.Warm sandboxes ready, from now on,
// for conversations opened with cfg and opts: the setup a front-end
// expects most of its conversations in, whose first one then starts warm
// too. It does nothing when the service keeps no warm sandboxes.
func (s *Service) KeepWarm(cfg *config.Config, opts Options) error {
	if s.warm == nil || s.warm.size <= 0 {
		return nil
	}
	own := *cfg
	backend, err := s.newBackend(&own)
	if err != nil {
		return err
	}
	s.warm.keep(setupOf(backend, &own, opts.ValueApart))
	return nil
}

// WarmReady counts the warm sandboxes ready for a conversation to take,
// with their imports done.
func (s *Service) WarmReady() int { return s.warm.ready() }

// Close removes the warm sandboxes and stops making them. The
// conversations the service opened are the caller's to close.
func (s *Service) Close() { s.warm.close() }

// Model is the model client cfg's conversations talk to, for a front-end
// that asks the model itself, without a conversation (terp serve's
// Responses adapter); nil when the service has no model.
func (s *Service) Model(cfg *config.Config) agent.Completer {
	if s.newModel == nil {
		return nil
	}
	return s.newModel(cfg)
}

// Store is where the service keeps its conversations.
func (s *Service) Store() store.Store { return s.store }

// InputError is a mistake in what the caller asked for (a file that cannot
// be uploaded, an id that names no conversation), as opposed to a failure
// of the sandbox, the store or the model: the front-end tells the user what
// to change (a CLI exits 2, a server answers 400 or 404).
type InputError struct{ Err error }

func (e *InputError) Error() string { return e.Err.Error() }
func (e *InputError) Unwrap() error { return e.Err }

func inputErrorf(format string, a ...any) error {
	return &InputError{fmt.Errorf(format, a...)}
}

// Options are how a new conversation is opened.
type Options struct {
	// Origin is the front-end that started it, as stored: ask, chat, batch.
	Origin string
	// KeepFiles leaves the files the code saved in the sandbox: Ask reports
	// them in Turn.Result.Files and downloads none (batch without
	// --artifacts, a server, which serves them from the sandbox).
	KeepFiles bool
	// ValueApart keeps a cell's trailing value out of its output (a
	// Jupyter kernel shows it as execute_result); it is kept with the
	// conversation, for every kernel it starts.
	ValueApart bool
}

// Open starts a new conversation with its own copy of cfg: nothing the
// conversation does to its settings reaches cfg or any other conversation.
func (s *Service) Open(ctx context.Context, cfg *config.Config, opts Options) (*Conversation, error) {
	own := *cfg
	backend, err := s.newBackend(&own)
	if err != nil {
		return nil, err
	}
	id := store.NewID()
	lock, err := s.store.Lock(id)
	if err != nil {
		return nil, err
	}
	c := &Conversation{ID: id, svc: s, cfg: &own, lock: lock, backend: backend, keepFiles: opts.KeepFiles, valueApart: opts.ValueApart, turn: make(chan struct{}, 1)}
	c.rec = store.New(id, opts.Origin, "", store.Settings{
		Model: own.Model, BaseURL: own.BaseURL, ExecMode: own.ExecMode, MaxSteps: own.MaxSteps,
		Network: own.Network, NetworkAllow: own.NetworkPolicy().Allow, ValueApart: opts.ValueApart,
	}, own.Sandbox)
	if w, ok := s.warm.take(setupOf(backend, &own, opts.ValueApart)); ok {
		c.use(w.sbx)
		c.useRunner(w.runner)
		c.agent = c.newAgent()
		// Its lifetime runs from when it was made.
		c.awakeSince = w.made
		return c, nil
	}
	if err := c.create(ctx); err != nil {
		// No sandbox was made, so no code ran and nothing was uploaded:
		// the record is only the one create may have written.
		c.release()
		_ = s.store.Remove(id)
		return nil, err
	}
	if err := c.startRunner(ctx); err != nil {
		c.Close(ctx) // discards the conversation only while it is empty
		return nil, err
	}
	c.agent = c.newAgent()
	c.awakeSince = time.Now()
	return c, nil
}

// Resume goes on with a stored conversation: ref is an id or a unique prefix
// of one, or "" for the latest. It runs with its own copy of cfg, in which the
// model, endpoint and exec mode it used are kept unless the environment or a
// flag names others, and its network policy always (see keepStored). Its
// sandbox is resumed, or, if it expired or vanished, replaced by a new one
// with the original uploads; either way the model is told what it lost. A
// resume that fails leaves the conversation as it was stored.
func (s *Service) Resume(ctx context.Context, cfg *config.Config, ref string) (*Conversation, error) {
	id, err := s.resolve(ref)
	if err != nil {
		return nil, err
	}
	lock, err := s.store.Lock(id)
	if err != nil {
		return nil, err
	}
	rec, err := s.store.Load(id)
	if err != nil {
		_ = lock.Unlock()
		return nil, err
	}
	own := *cfg
	c := &Conversation{ID: id, rec: rec, svc: s, cfg: &own, lock: lock, valueApart: rec.Settings.ValueApart, turn: make(chan struct{}, 1)}
	if warning := keepStored(&own, rec.Settings); warning != "" {
		c.pending = append(c.pending, warning)
	}
	if c.backend, err = s.newBackend(&own); err != nil {
		_ = lock.Unlock()
		return nil, err
	}
	if err := c.wake(ctx); err != nil {
		if c.sbx != nil {
			c.Close(ctx) // pauses it: Close discards only an empty conversation
		} else {
			c.release()
		}
		return nil, err
	}
	return c, nil
}

// resolve turns a reference into a stored conversation's id.
func (s *Service) resolve(ref string) (string, error) {
	var id string
	var err error
	if ref == "" {
		id, err = s.store.Latest()
	} else {
		id, err = s.store.Resolve(ref)
	}
	if err != nil {
		return "", &InputError{err}
	}
	return id, nil
}

// Remove deletes a stored conversation: its sandbox, on the backend the
// record names whatever cfg says, then its record. It is what `terp
// sessions rm` does. A conversation open elsewhere is not removed.
func (s *Service) Remove(ctx context.Context, cfg *config.Config, rec *store.Conversation) error {
	lock, err := s.store.Lock(rec.ID)
	if err != nil {
		return err
	}
	defer func() { _ = lock.Unlock() }()
	if rec.Sandbox.SessionID != "" {
		own := *cfg
		if rec.Sandbox.Backend != "" {
			own.Sandbox = rec.Sandbox.Backend
		}
		backend, err := s.newBackend(&own)
		if err != nil {
			return fmt.Errorf("remove the sandbox of conversation %s (on %s): %w", rec.ID, own.Sandbox, err)
		}
		sbx, err := backend.Resume(ctx, sandbox.SessionID(rec.Sandbox.SessionID))
		switch {
		case err == nil:
			if err := sbx.Close(ctx); err != nil {
				return fmt.Errorf("remove the sandbox of conversation %s: %w", rec.ID, err)
			}
		case !errors.Is(err, sandbox.ErrExpired):
			return fmt.Errorf("remove the sandbox of conversation %s: %w", rec.ID, err)
		}
	}
	return s.store.Remove(rec.ID)
}

// CheckUploads makes sure every file can be read before anything runs, so a
// typo costs no model call, and that no two land on the same name in /work.
func CheckUploads(paths []string) error {
	seen := map[string]string{}
	for _, p := range paths {
		st, err := os.Stat(p)
		if err != nil {
			return inputErrorf("cannot upload %s: %v", p, unwrapPath(err))
		}
		if !st.Mode().IsRegular() {
			return inputErrorf("cannot upload %s: not a regular file", p)
		}
		fh, err := os.Open(p)
		if err != nil {
			return inputErrorf("cannot upload %s: %v", p, unwrapPath(err))
		}
		fh.Close()
		name := filepath.Base(p)
		if prev, ok := seen[name]; ok {
			return inputErrorf("%s and %s would both be uploaded as /work/%s; rename one", prev, p, name)
		}
		seen[name] = p
	}
	return nil
}

// CheckOutDir makes sure the files the code saves can be downloaded to dir,
// the -o the user gave, before any model call: a dir that is a file, or in a
// place terp may not write, would otherwise be found out only after the
// answer. Without -o nothing is checked: a question whose code saves no file
// needs no directory, and terp-<id> is made only when one is saved.
func CheckOutDir(dir string) error {
	if dir == "" {
		return nil
	}
	for d := filepath.Clean(dir); ; d = filepath.Dir(d) {
		fi, err := os.Stat(d)
		switch {
		case err == nil && !fi.IsDir():
			return inputErrorf("cannot download to %s: %s is not a directory; give -o a directory", dir, d)
		case err == nil:
			if unix.Access(d, unix.W_OK|unix.X_OK) != nil {
				return inputErrorf("cannot download to %s: %s is not writable; give -o a directory you may write", dir, d)
			}
			return nil
		case !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, unix.ENOTDIR):
			return inputErrorf("cannot download to %s: %v", dir, unwrapPath(err))
		}
		if d == filepath.Dir(d) {
			return nil
		}
	}
}

// unwrapPath drops the path from a *PathError, which the message already names.
func unwrapPath(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}
