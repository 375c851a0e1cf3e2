package conversation

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/terpdev/terp/internal/agent"
	"github.com/terpdev/terp/internal/config"
	"github.com/terpdev/terp/internal/llm"
	"github.com/terpdev/terp/internal/llm/llmtest"
	"github.com/terpdev/terp/internal/sandbox"
	"github.com/terpdev/terp/internal/sandbox/memory"
	"github.com/terpdev/terp/internal/store"
)

// These tests drive the service's orchestration fast, on the in-memory
// sandbox (its Python stand-in runs a line language: print, write, cat,
// exit) and a scripted model over real HTTP. What a user sees of each
// behaviour is also tested end to end on the real local sandbox, through
// the terp binary, in internal/cli.

// world is one service on a fresh store and memory backend.
type world struct {
	svc     *Service
	backend *memory.Backend
	store   store.Store
	cfg     *config.Config
	// backends counts the backends the service asked for, by sandbox name.
	mu       sync.Mutex
	backends map[string]int
}

func newWorld(t *testing.T, s *llmtest.Server) *world {
	t.Helper()
	st, err := store.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	w := &world{
		backend:  memory.New(memory.Config{Programs: map[string]memory.Program{"python3": memory.PythonStandIn}}),
		store:    st,
		backends: map[string]int{},
	}
	cfg := config.Default()
	cfg.Sandbox = "memory"
	cfg.ExecMode = "script"
	cfg.Model = "chat-model"
	cfg.BaseURL = s.BaseURL()
	cfg.OutDir = t.TempDir()
	cfg.IdlePause = 0
	w.cfg = cfg
	w.svc = New(Deps{
		Store: st,
		NewBackend: func(c *config.Config) (sandbox.Backend, error) {
			w.mu.Lock()
			w.backends[c.Sandbox]++
			w.mu.Unlock()
			return w.backend, nil
		},
		NewModel: func(c *config.Config) agent.Completer { return llm.New(llm.Config{BaseURL: c.BaseURL}) },
	})
	return w
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return c
}

// closeQuietly closes c when the test ends and fails it on any warning left.
func closeQuietly(t *testing.T, c *Conversation) {
	t.Cleanup(func() {
		if w := c.Close(context.Background()); len(w) > 0 {
			t.Errorf("closing warned: %q", w)
		}
	})
}

// A turn's files come back downloaded, the record keeps the exchange, the
// upload and the download, and Close pauses the sandbox so that Resume goes
// on with the same history and /work.
func TestAskDownloadsAndResumeGoesOn(t *testing.T) {
	s := llmtest.New(t,
		llmtest.Fixed(llmtest.RunPython("cat data.csv\nwrite out.txt from the code")),
		func(req llmtest.Request) llmtest.Reply {
			res, _ := req.ToolResult()
			return llmtest.Answer("read: " + strings.TrimSpace(res.Stdout))
		},
		func(req llmtest.Request) llmtest.Reply {
			if len(req.Messages) < 5 {
				t.Errorf("the resumed turn sent %d messages; the first turn's are missing", len(req.Messages))
			}
			return llmtest.RunPython("cat out.txt")
		},
		func(req llmtest.Request) llmtest.Reply {
			res, _ := req.ToolResult()
			return llmtest.Answer("still: " + res.Stdout)
		})
	w := newWorld(t, s)
	data := filepath.Join(t.TempDir(), "data.csv")
	if err := os.WriteFile(data, []byte("month,revenue"), 0o644); err != nil {
		t.Fatal(err)
	}
	c, err := w.svc.Open(ctx(t), w.cfg, Options{Origin: "ask"})
	if err != nil {
		t.Fatal(err)
	}
	if dest, err := c.Upload(ctx(t), data); err != nil || dest != "/work/data.csv" {
		t.Fatalf("Upload = %q, %v", dest, err)
	}
	turn, err := c.Ask(ctx(t), "what is in it?", nil)
	if err != nil || turn.Result.Answer != "read: month,revenue" {
		t.Fatalf("Ask = %+v, %v", turn, err)
	}
	if len(turn.Files) != 1 || turn.Files[0].Name != "out.txt" || turn.Files[0].SandboxPath() != "/work/out.txt" {
		t.Fatalf("downloaded %+v, want out.txt", turn.Files)
	}
	if b, _ := os.ReadFile(turn.Files[0].Path); string(b) != "from the code" {
		t.Errorf("%s holds %q", turn.Files[0].Path, b)
	}
	id := c.ID
	if warnings := c.Close(ctx(t)); len(warnings) != 0 {
		t.Errorf("Close warned: %q", warnings)
	}
	rec, err := w.store.Load(id)
	if err != nil {
		t.Fatal(err)
	}
	if rec.Turns != 1 || rec.Sandbox.SessionID == "" || len(rec.Inputs) != 1 || len(rec.Downloads) != 1 || rec.Title != "what is in it?" {
		t.Errorf("stored %+v; want one turn, the paused sandbox's id, the upload and the download", rec)
	}

	again, err := w.svc.Resume(ctx(t), w.cfg, id[:4])
	if err != nil {
		t.Fatal(err)
	}
	closeQuietly(t, again)
	if info := again.Info(); info.ID != id || info.Earlier != 1 || len(info.Past) != 1 || info.Past[0].Answer != "read: month,revenue" {
		t.Errorf("Info after resume = %+v", info)
	}
	turn, err = again.Ask(ctx(t), "and now?", nil)
	if err != nil || turn.Result.Answer != "still: from the code" {
		t.Errorf("resumed Ask = %+v, %v", turn, err)
	}
}

// Settings belong to a conversation: what one does to its own (a /model, a
// stored conversation's model and network kept on resume) never reaches the
// configuration it was opened with, nor the next conversation.
func TestSettingsBelongToTheConversation(t *testing.T) {
	s := llmtest.New(t, llmtest.Fixed(llmtest.Answer("a")), llmtest.Fixed(llmtest.Answer("b")), llmtest.Fixed(llmtest.Answer("c")))
	w := newWorld(t, s)
	allow := *w.cfg
	allow.Network, allow.NetworkAllow, allow.Model = "allowlist", []string{"example.org"}, "stored-model"
	stored, err := w.svc.Open(ctx(t), &allow, Options{Origin: "chat"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := stored.Ask(ctx(t), "one", nil); err != nil {
		t.Fatal(err)
	}
	if err := stored.SetModel(ctx(t), "picked-model"); err != nil {
		t.Fatal(err)
	}
	if allow.Model != "stored-model" {
		t.Errorf("SetModel changed the configuration the conversation was opened with: %q", allow.Model)
	}
	stored.Close(ctx(t))

	resumed, err := w.svc.Resume(ctx(t), w.cfg, stored.ID)
	if err != nil {
		t.Fatal(err)
	}
	if info := resumed.Info(); info.Model != "picked-model" {
		t.Errorf("the resumed conversation runs %q, want its own picked-model", info.Model)
	}
	if _, err := resumed.Ask(ctx(t), "two", nil); err != nil {
		t.Fatal(err)
	}
	resumed.Close(ctx(t))
	if w.cfg.Network != "none" || w.cfg.Model != "chat-model" {
		t.Errorf("resuming changed the chat's settings: network %q, model %q", w.cfg.Network, w.cfg.Model)
	}

	fresh, err := w.svc.Open(ctx(t), w.cfg, Options{Origin: "chat"})
	if err != nil {
		t.Fatal(err)
	}
	closeQuietly(t, fresh)
	if _, err := fresh.Ask(ctx(t), "three", nil); err != nil {
		t.Fatal(err)
	}
	reqs := s.Requests()
	if got := []string{reqs[0].Model, reqs[1].Model, reqs[2].Model}; !slices.Equal(got, []string{"stored-model", "picked-model", "chat-model"}) {
		t.Errorf("the three turns went to %q", got)
	}
	if desc := reqs[2].Tools[0].Function.Description; !strings.Contains(desc, "There is no network.") {
		t.Errorf("the new conversation inherited a network: %s", desc)
	}
	rec, _ := w.store.Load(fresh.ID)
	if rec.Settings.Network == "allowlist" || rec.Settings.Model != "chat-model" {
		t.Errorf("the new conversation is stored with %+v", rec.Settings)
	}
}

// Many conversations run at once in one service, as a server holds them,
// each with its own sandbox: each answer is computed from its own /work.
func TestManyConversationsAtOnce(t *testing.T) {
	const n = 16
	step := func(req llmtest.Request) llmtest.Reply {
		if res, err := req.ToolResult(); err == nil {
			return llmtest.Answer("got " + res.Stdout)
		}
		return llmtest.RunPython("write mine.txt " + req.LastUser() + "\ncat mine.txt")
	}
	steps := make([]llmtest.Step, 2*n)
	for i := range steps {
		steps[i] = step
	}
	w := newWorld(t, llmtest.New(t, steps...))
	var wg sync.WaitGroup
	answers := make([]string, n)
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() {
			c, err := w.svc.Open(ctx(t), w.cfg, Options{Origin: "serve", KeepFiles: true})
			if err != nil {
				errs[i] = err
				return
			}
			defer c.Close(context.Background())
			turn, err := c.Ask(ctx(t), fmt.Sprintf("question-%d", i), nil)
			answers[i], errs[i] = turn.Result.Answer, err
		})
	}
	wg.Wait()
	for i := range n {
		if want := fmt.Sprintf("got question-%d", i); errs[i] != nil || answers[i] != want {
			t.Errorf("conversation %d: %q, %v; want %q", i, answers[i], errs[i], want)
		}
	}
	if entries, _ := w.store.List(); len(entries) != n {
		t.Errorf("the store holds %d conversations, want %d", len(entries), n)
	}
}

// One conversation runs one turn at a time: a second question while the
// first runs is refused with ErrBusy, and Info answers meanwhile.
func TestOneTurnAtATime(t *testing.T) {
	entered, release := make(chan struct{}), make(chan struct{})
	s := llmtest.New(t, func(llmtest.Request) llmtest.Reply {
		close(entered)
		<-release
		return llmtest.Answer("first")
	})
	w := newWorld(t, s)
	c, err := w.svc.Open(ctx(t), w.cfg, Options{Origin: "serve"})
	if err != nil {
		t.Fatal(err)
	}
	closeQuietly(t, c)
	done := make(chan error)
	go func() {
		_, err := c.Ask(ctx(t), "one", nil)
		done <- err
	}()
	<-entered
	if info := c.Info(); info.ID != c.ID {
		t.Errorf("Info during a turn = %+v", info)
	}
	if _, err := c.Ask(ctx(t), "two", nil); !errors.Is(err, ErrBusy) {
		t.Errorf("a second question during a turn: %v, want ErrBusy", err)
	}
	close(release)
	if err := <-done; err != nil {
		t.Errorf("the first question: %v", err)
	}
}

// A turn's warnings reach the user twice over and nowhere else: as
// agent.Notice events while it runs, and in Turn.Warnings; a file over
// max_download_size is one.
func TestWarningsAreEventsAndValues(t *testing.T) {
	s := llmtest.New(t,
		llmtest.Fixed(llmtest.RunPython("write big.txt "+strings.Repeat("x", 2000)+"\nwrite small.txt ok")),
		llmtest.Fixed(llmtest.Answer("done")))
	w := newWorld(t, s)
	w.cfg.MaxDownloadSize = 1000
	c, err := w.svc.Open(ctx(t), w.cfg, Options{Origin: "ask"})
	if err != nil {
		t.Fatal(err)
	}
	closeQuietly(t, c)
	var mu sync.Mutex
	var notices []string
	turn, err := c.Ask(ctx(t), "save them", func(e agent.Event) {
		if n, ok := e.(agent.Notice); ok {
			mu.Lock()
			notices = append(notices, n.Text)
			mu.Unlock()
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(turn.Files) != 1 || turn.Files[0].Name != "small.txt" {
		t.Errorf("downloaded %+v, want small.txt alone", turn.Files)
	}
	want := "skipped /work/big.txt: 2.0 KiB is over max_download_size (1000 B)"
	if !slices.Contains(turn.Warnings, want) {
		t.Errorf("Turn.Warnings = %q, want %q", turn.Warnings, want)
	}
	if !slices.Equal(notices, turn.Warnings) {
		t.Errorf("the events told %q, the turn %q; want the same", notices, turn.Warnings)
	}
	if left := c.Warnings(); len(left) != 0 {
		t.Errorf("warnings left over after the turn: %q", left)
	}
}

// A conversation left idle pauses its sandbox, and the next question wakes
// it with /work as it was.
func TestIdlePauseAndWake(t *testing.T) {
	s := llmtest.New(t,
		llmtest.Fixed(llmtest.RunPython("write kept.txt kept")), llmtest.Fixed(llmtest.Answer("saved")),
		llmtest.Fixed(llmtest.RunPython("cat kept.txt")),
		func(req llmtest.Request) llmtest.Reply { res, _ := req.ToolResult(); return llmtest.Answer(res.Stdout) })
	w := newWorld(t, s)
	w.cfg.IdlePause = 10 * time.Millisecond
	w.cfg.OutDir = ""
	t.Chdir(t.TempDir())
	c, err := w.svc.Open(ctx(t), w.cfg, Options{Origin: "chat", KeepFiles: true})
	if err != nil {
		t.Fatal(err)
	}
	closeQuietly(t, c)
	if _, err := c.Ask(ctx(t), "save it", nil); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(30 * time.Second); !c.Paused(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the idle conversation's sandbox was never paused")
		}
	}
	turn, err := c.Ask(ctx(t), "still there?", nil)
	if err != nil || turn.Result.Answer != "kept" {
		t.Errorf("after the pause: %q, %v; want the file read back", turn.Result.Answer, err)
	}
}

// A stored conversation whose sandbox is gone gets a new one with the
// uploads put back, and the model is told what was lost.
func TestResumeReplacesALostSandbox(t *testing.T) {
	s := llmtest.New(t,
		llmtest.Fixed(llmtest.RunPython("write out.txt x")), llmtest.Fixed(llmtest.Answer("one")),
		func(req llmtest.Request) llmtest.Reply {
			if q := req.LastUser(); !strings.Contains(q, "sandbox had expired") || !strings.Contains(q, "uploaded again: /work/data.csv") {
				t.Errorf("the model was not told its sandbox is new: %q", q)
			}
			return llmtest.RunPython("cat data.csv\ncat out.txt")
		},
		func(req llmtest.Request) llmtest.Reply {
			res, _ := req.ToolResult()
			return llmtest.Answer(res.Stdout + "|" + res.Stderr)
		})
	w := newWorld(t, s)
	data := filepath.Join(t.TempDir(), "data.csv")
	if err := os.WriteFile(data, []byte("a,b\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	c, err := w.svc.Open(ctx(t), w.cfg, Options{Origin: "ask", KeepFiles: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Upload(ctx(t), data); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Ask(ctx(t), "one", nil); err != nil {
		t.Fatal(err)
	}
	c.Close(ctx(t))
	rec, _ := w.store.Load(c.ID)
	lost, err := w.backend.Resume(ctx(t), sandbox.SessionID(rec.Sandbox.SessionID))
	if err != nil {
		t.Fatal(err)
	}
	if err := lost.Close(ctx(t)); err != nil {
		t.Fatal(err)
	}
	again, err := w.svc.Resume(ctx(t), w.cfg, c.ID)
	if err != nil {
		t.Fatal(err)
	}
	closeQuietly(t, again)
	turn, err := again.Ask(ctx(t), "two", nil)
	if err != nil || !strings.HasPrefix(turn.Result.Answer, "a,b\n") || strings.Contains(turn.Result.Answer, "|x") {
		t.Errorf("in the new sandbox: %q, %v; want the upload back and out.txt gone", turn.Result.Answer, err)
	}
}

// Remove deletes the sandbox on the backend the record names, whatever the
// configuration says now, and then the record.
func TestRemoveUsesTheRecordsBackend(t *testing.T) {
	s := llmtest.New(t, llmtest.Fixed(llmtest.Answer("one")))
	w := newWorld(t, s)
	c, err := w.svc.Open(ctx(t), w.cfg, Options{Origin: "ask"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Ask(ctx(t), "one", nil); err != nil {
		t.Fatal(err)
	}
	c.Close(ctx(t))
	rec, err := w.store.Load(c.ID)
	if err != nil {
		t.Fatal(err)
	}
	other := *w.cfg
	other.Sandbox = "docker"
	w.backends = map[string]int{}
	if err := w.svc.Remove(ctx(t), &other, rec); err != nil {
		t.Fatal(err)
	}
	if w.backends["memory"] != 1 || w.backends["docker"] != 0 {
		t.Errorf("Remove asked for backends %v; want the record's memory backend", w.backends)
	}
	if _, err := w.backend.Resume(ctx(t), sandbox.SessionID(rec.Sandbox.SessionID)); !errors.Is(err, sandbox.ErrExpired) {
		t.Errorf("the sandbox survived Remove: %v", err)
	}
	if _, err := w.store.Load(c.ID); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("the record survived Remove: %v", err)
	}
}

// A conversation in which nothing happened is not kept; any other is, even
// when its first question failed.
func TestOnlyAnEmptyConversationIsDiscarded(t *testing.T) {
	s := llmtest.New(t, llmtest.Fixed(llmtest.Reply{Status: 400, Body: `{"error":{"message":"no such model"}}`}))
	w := newWorld(t, s)
	empty, err := w.svc.Open(ctx(t), w.cfg, Options{Origin: "chat"})
	if err != nil {
		t.Fatal(err)
	}
	empty.Close(ctx(t))
	if _, err := w.store.Load(empty.ID); !errors.Is(err, store.ErrNotFound) || empty.Kept() {
		t.Errorf("an empty conversation was kept (Kept %v): %v", empty.Kept(), err)
	}
	failed, err := w.svc.Open(ctx(t), w.cfg, Options{Origin: "ask"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := failed.Ask(ctx(t), "what was asked", nil); err == nil {
		t.Fatal("a turn the server refused succeeded")
	}
	failed.Close(ctx(t))
	rec, err := w.store.Load(failed.ID)
	if err != nil || rec.Title != "what was asked" || !failed.Kept() {
		t.Errorf("the failed question's conversation: %+v, %v; want it kept with its question", rec, err)
	}
}
