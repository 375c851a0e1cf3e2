package conversation

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/terpdev/terp/internal/config"
	"github.com/terpdev/terp/internal/llm/llmtest"
	"github.com/terpdev/terp/internal/sandbox"
	"github.com/terpdev/terp/internal/sandbox/memory"
	"github.com/terpdev/terp/internal/store"
)

// These test the pool's logic on the memory sandbox. What a user sees of
// it (a server's container that starts on an interpreter made before the
// request, and never sees another's files) is tested on the real local
// sandbox through the binary: TestServeWarmSandboxes in internal/cli.

// madeBackend is a memory backend that lists the sandboxes it made and
// can be told to fail the next few.
type madeBackend struct {
	*memory.Backend
	mu   sync.Mutex
	made []sandbox.SessionID
	fail int
}

func (b *madeBackend) Create(ctx context.Context, opt sandbox.Options) (sandbox.Sandbox, error) {
	b.mu.Lock()
	if b.fail > 0 {
		b.fail--
		b.mu.Unlock()
		return nil, errors.New("no room for another sandbox")
	}
	b.mu.Unlock()
	sbx, err := b.Backend.Create(ctx, opt)
	if err == nil {
		b.mu.Lock()
		b.made = append(b.made, sbx.ID())
		b.mu.Unlock()
	}
	return sbx, err
}

func (b *madeBackend) list() []sandbox.SessionID {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Clone(b.made)
}

// removed reports whether the sandbox id is gone from the backend.
func (b *madeBackend) removed(t *testing.T, id sandbox.SessionID) bool {
	sbx, err := b.Resume(ctx(t), id)
	if err == nil {
		_ = sbx.Close(ctx(t))
		t.Fatalf("sandbox %s was paused, not running nor removed", id)
	}
	return errors.Is(err, sandbox.ErrExpired)
}

// warmWorld is a service that keeps warm sandboxes on a madeBackend, and
// the log it writes.
type warmWorld struct {
	svc     *Service
	backend *madeBackend
	cfg     *config.Config
	log     *lockedLog
}

type lockedLog struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *lockedLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *lockedLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

func newWarmWorld(t *testing.T, warm int, programs map[string]memory.Program) *warmWorld {
	t.Helper()
	st, err := store.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	s := llmtest.New(t)
	w := &warmWorld{backend: &madeBackend{Backend: memory.New(memory.Config{Programs: programs})}, log: &lockedLog{}}
	cfg := config.Default()
	cfg.Sandbox = "memory"
	cfg.ExecMode = "script"
	cfg.BaseURL = s.BaseURL()
	cfg.IdlePause = 0
	w.cfg = cfg
	w.svc = New(Deps{
		Store:      st,
		NewBackend: func(*config.Config) (sandbox.Backend, error) { return w.backend, nil },
		Warm:       warm,
		Log:        slog.New(slog.NewTextHandler(w.log, nil)),
	})
	t.Cleanup(w.svc.Close)
	return w
}

var standIn = map[string]memory.Program{"python3": memory.PythonStandIn}

// until waits for ok, failing the test after a generous while.
func until(t *testing.T, what string, ok func() bool) {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); !ok(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("gave up waiting for %s", what)
		}
	}
}

func (w *warmWorld) open(t *testing.T, cfg *config.Config) *Conversation {
	t.Helper()
	c, err := w.svc.Open(ctx(t), cfg, Options{Origin: "ask"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close(context.Background()) })
	return c
}

func sandboxOf(c *Conversation) sandbox.SessionID {
	c.recMu.Lock()
	defer c.recMu.Unlock()
	return sandbox.SessionID(c.rec.Sandbox.SessionID)
}

// A conversation takes the sandbox made for its setup before it was asked
// for, runs its code there, and the pool makes the next; no two
// conversations get the same; closing the service removes what is left
// and leaves the conversations alone.
func TestWarmSandboxIsTakenOnceAndReplaced(t *testing.T) {
	w := newWarmWorld(t, 1, standIn)
	if err := w.svc.KeepWarm(w.cfg, Options{}); err != nil {
		t.Fatal(err)
	}
	until(t, "a warm sandbox", func() bool { return w.svc.WarmReady() == 1 })
	first := w.backend.list()
	if len(first) != 1 {
		t.Fatalf("made %v for one warm sandbox", first)
	}

	a := w.open(t, w.cfg)
	if got := sandboxOf(a); got != first[0] {
		t.Fatalf("the conversation got sandbox %s, not the warm one %s", got, first[0])
	}
	res, err := a.Run(ctx(t), "print hello from the warm one\nwrite mine.txt a's")
	if err != nil || res.Stdout != "hello from the warm one\n" {
		t.Fatalf("a run in the warm sandbox: %v %+v", err, res.Result)
	}
	until(t, "the next warm sandbox", func() bool { return w.svc.WarmReady() == 1 })

	b := w.open(t, w.cfg)
	made := w.backend.list()
	if len(made) < 2 || sandboxOf(b) != made[1] {
		t.Fatalf("the second conversation got %s, not the second made; made %v", sandboxOf(b), made)
	}
	res, err = b.Run(ctx(t), "cat mine.txt")
	if err != nil || res.ExitCode == 0 {
		t.Fatalf("the second conversation read the first's file: %v %+v", err, res.Result)
	}

	until(t, "a third warm sandbox", func() bool { return w.svc.WarmReady() == 1 })
	third := w.backend.list()[2]
	w.svc.Close()
	if !w.backend.removed(t, third) {
		t.Errorf("closing the service left the warm sandbox %s", third)
	}
	if w.svc.WarmReady() != 0 {
		t.Errorf("WarmReady after Close = %d", w.svc.WarmReady())
	}
	if res, err := a.Run(ctx(t), "cat mine.txt"); err != nil || res.Stdout != "a's" {
		t.Errorf("after the service closed, the first conversation's sandbox: %v %+v", err, res.Result)
	}
	if _, err := w.svc.Open(ctx(t), w.cfg, Options{}); err != nil {
		t.Fatalf("a conversation opened after Close: %v", err)
	}
	time.Sleep(50 * time.Millisecond)
	if n := len(w.backend.list()); n != 4 {
		t.Errorf("after Close the pool made sandboxes again: %d in all, want 4", n)
	}
}

// A conversation whose setup no sandbox was made for gets its own, as
// without a pool; the pool then keeps one ready for that setup too.
func TestWarmOtherSetupsAreMadeWhenAskedFor(t *testing.T) {
	w := newWarmWorld(t, 1, standIn)
	if err := w.svc.KeepWarm(w.cfg, Options{}); err != nil {
		t.Fatal(err)
	}
	until(t, "a warm sandbox", func() bool { return w.svc.WarmReady() == 1 })
	warm := w.backend.list()[0]

	for _, change := range []func(*config.Config){
		func(c *config.Config) { c.MemoryLimit = 1 << 30 },
		func(c *config.Config) { c.ExecMode = "kernel" },
		func(c *config.Config) { c.Network, c.NetworkAllow = "allowlist", []string{"pypi.org"} },
	} {
		other := *w.cfg
		change(&other)
		before, made := w.svc.WarmReady(), w.backend.list()
		c := w.open(t, &other)
		if slices.Contains(made, sandboxOf(c)) {
			t.Fatalf("a conversation with other settings took a sandbox made for another setup")
		}
		until(t, "a warm sandbox for the new setup", func() bool { return w.svc.WarmReady() == before+1 })
	}
	if c := w.open(t, w.cfg); sandboxOf(c) != warm {
		t.Errorf("the default setup's conversation got %s, not %s", sandboxOf(c), warm)
	}
	// Value apart is a setup of its own: a Jupyter kernel's.
	before := w.backend.list()
	c, err := w.svc.Open(ctx(t), w.cfg, Options{ValueApart: true})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(context.Background())
	if slices.Contains(before, sandboxOf(c)) {
		t.Errorf("a value-apart conversation took a sandbox made before it: %s of %v", sandboxOf(c), before)
	}
}

// A warm sandbox is replaced once it has waited a tenth of its lifetime,
// so that the conversation that takes it has the rest; the one replaced
// is removed. The conversation's own renewal counts from when it was
// made.
func TestWarmSandboxIsReplacedWhenOld(t *testing.T) {
	w := newWarmWorld(t, 1, standIn)
	w.cfg.SandboxTimeout = 2 * time.Second // a warm one waits 200 ms
	if err := w.svc.KeepWarm(w.cfg, Options{}); err != nil {
		t.Fatal(err)
	}
	until(t, "three warm sandboxes in turn", func() bool { return len(w.backend.list()) >= 3 })
	made := w.backend.list()
	for _, id := range made[:2] {
		if !w.backend.removed(t, id) {
			t.Errorf("the warm sandbox %s, replaced, was not removed", id)
		}
	}
	c := w.open(t, w.cfg)
	if age := time.Since(c.awakeSince); age < 0 || age > w.cfg.SandboxTimeout {
		t.Errorf("the conversation's sandbox is %s old by its own count", age)
	}
}

// A sandbox that cannot be made is tried again, after a second, and said
// in the log; a worker that does not start is a failure too, and leaves no
// sandbox behind.
func TestWarmSandboxFailuresAreRetriedAndLogged(t *testing.T) {
	w := newWarmWorld(t, 1, standIn)
	w.backend.fail = 1
	if err := w.svc.KeepWarm(w.cfg, Options{}); err != nil {
		t.Fatal(err)
	}
	until(t, "a warm sandbox after a failure", func() bool { return w.svc.WarmReady() == 1 })
	if log := w.log.String(); !strings.Contains(log, "could not make a warm sandbox (trying again in 1s): no room for another sandbox") {
		t.Errorf("the log does not tell of the failure:\n%s", log)
	}

	// No python3 in the sandbox: the worker exits while it starts.
	w = newWarmWorld(t, 1, map[string]memory.Program{})
	if err := w.svc.KeepWarm(w.cfg, Options{}); err != nil {
		t.Fatal(err)
	}
	until(t, "two tries", func() bool { return len(w.backend.list()) >= 2 })
	if log := w.log.String(); !strings.Contains(log, "could not make a warm sandbox") || !strings.Contains(log, "Python worker") {
		t.Errorf("the log does not tell why the worker did not start:\n%s", log)
	}
	if w.svc.WarmReady() != 0 {
		t.Errorf("a sandbox whose worker did not start is counted as warm")
	}
	if id := w.backend.list()[0]; !w.backend.removed(t, id) {
		t.Errorf("the sandbox %s whose worker did not start was left", id)
	}
}

// Without Warm, nothing is made ahead: a command that opens one
// conversation pays for no other.
func TestNoWarmSandboxesByDefault(t *testing.T) {
	w := newWarmWorld(t, 0, standIn)
	if err := w.svc.KeepWarm(w.cfg, Options{}); err != nil {
		t.Fatal(err)
	}
	w.open(t, w.cfg)
	time.Sleep(50 * time.Millisecond)
	if made := w.backend.list(); len(made) != 1 || w.svc.WarmReady() != 0 {
		t.Errorf("made %v, %d warm, for one conversation without a pool", made, w.svc.WarmReady())
	}
}

// Closing the service while it makes a sandbox is no failure to report.
func TestWarmCloseWhileMakingIsQuiet(t *testing.T) {
	for range 20 {
		w := newWarmWorld(t, 1, standIn)
		if err := w.svc.KeepWarm(w.cfg, Options{}); err != nil {
			t.Fatal(err)
		}
		w.svc.Close()
		if log := w.log.String(); log != "" {
			t.Fatalf("the log after Close:\n%s", log)
		}
		for _, id := range w.backend.list() {
			if !w.backend.removed(t, id) {
				t.Errorf("closing the service while it made %s left it", id)
			}
		}
	}
}
