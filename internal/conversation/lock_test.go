package conversation

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/terpdev/terp/internal/agent"
	"github.com/terpdev/terp/internal/llm"
	"github.com/terpdev/terp/internal/llm/llmtest"
	"github.com/terpdev/terp/internal/store"
)

// guard is how long a test waits for a call that must return before it
// gives up on it: a failure, never a measure of speed.
const guard = 30 * time.Second

// heldTurn opens a conversation whose first turn, asking "one", stays in
// the model until the returned release is called; the turn has begun when
// heldTurn returns, and its outcome comes on done. The model answers the
// requests after it with then.
func heldTurn(t *testing.T, then ...llmtest.Step) (c *Conversation, s *llmtest.Server, release func(), done <-chan error) {
	t.Helper()
	entered, held := make(chan struct{}), make(chan struct{})
	s = llmtest.New(t, append([]llmtest.Step{func(llmtest.Request) llmtest.Reply {
		close(entered)
		<-held
		return llmtest.Answer("first")
	}}, then...)...)
	w := newWorld(t, s)
	c, err := w.svc.Open(ctx(t), w.cfg, Options{Origin: "serve"})
	if err != nil {
		t.Fatal(err)
	}
	closeQuietly(t, c)
	ended := make(chan error, 1)
	go func() {
		_, err := c.Ask(ctx(t), "one", nil)
		ended <- err
	}()
	<-entered
	released := false
	release = func() {
		if !released {
			released = true
			close(held)
		}
	}
	t.Cleanup(release)
	return c, s, release, ended
}

// Everything but a turn or a run waits for the running turn, and gives up
// with its context's error when that ends first, without waiting for the
// turn; once the turn is over each goes ahead.
func TestWaitingForATurn(t *testing.T) {
	calls := []struct {
		name string
		call func(context.Context, *Conversation) error
	}{
		{"History", func(ctx context.Context, c *Conversation) error { _, err := c.History(ctx); return err }},
		{"PendingCalls", func(ctx context.Context, c *Conversation) error { _, err := c.PendingCalls(ctx); return err }},
		{"Restart", func(ctx context.Context, c *Conversation) error { return c.Restart(ctx) }},
		{"Rewind", func(ctx context.Context, c *Conversation) error { return c.Rewind(ctx, nil) }},
		{"SetModel", func(ctx context.Context, c *Conversation) error { return c.SetModel(ctx, "other-model") }},
		{"SetMaxSteps", func(ctx context.Context, c *Conversation) error { return c.SetMaxSteps(ctx, 3) }},
		{"SetClientTools", func(ctx context.Context, c *Conversation) error {
			return c.SetClientTools(ctx, []llm.Tool{weather})
		}},
		{"Put", func(ctx context.Context, c *Conversation) error {
			_, err := c.Put(ctx, "data.csv", strings.NewReader("a,b\n"))
			return err
		}},
	}
	c, _, release, done := heldTurn(t)

	for _, tc := range calls {
		waiting, cancel := context.WithCancel(ctx(t))
		got := make(chan error, 1)
		go func() { got <- tc.call(waiting, c) }()
		cancel()
		select {
		case err := <-got:
			if !errors.Is(err, context.Canceled) {
				t.Errorf("%s cancelled during a turn = %v, want context.Canceled", tc.name, err)
			}
		case <-time.After(guard):
			t.Fatalf("%s waited for the turn after its context was cancelled", tc.name)
		}
	}

	results := make([]chan error, len(calls))
	for i, tc := range calls {
		results[i] = make(chan error, 1)
		go func() { results[i] <- tc.call(ctx(t), c) }()
	}
	// A call that does not wait returns within the pause; one that waits
	// never does, so the pause can miss a fault but never make one up.
	time.Sleep(100 * time.Millisecond)
	early := make([]bool, len(calls))
	for i, tc := range calls {
		select {
		case err := <-results[i]:
			t.Errorf("%s returned during the turn (%v); want it to wait", tc.name, err)
			early[i] = true
		default:
		}
	}
	release()
	if err := <-done; err != nil {
		t.Errorf("the turn: %v", err)
	}
	for i, tc := range calls {
		if early[i] {
			continue
		}
		select {
		case err := <-results[i]:
			if err != nil {
				t.Errorf("%s after the turn: %v", tc.name, err)
			}
		case <-time.After(guard):
			t.Errorf("%s never went ahead after the turn", tc.name)
		}
	}
}

// testStore is a store that counts the saves, which fail while fail is
// set, as those to a full disk do.
type testStore struct {
	store.Store
	fail  atomic.Bool
	saves atomic.Int64
}

func (s *testStore) Save(rec *store.Conversation) error {
	s.saves.Add(1)
	if s.fail.Load() {
		return errors.New("no space left on device")
	}
	return s.Store.Save(rec)
}

// A turn's send function may be a network write to a slow client (terp
// serve's stream of events): while it is held up telling that a save
// failed, wherever the save was (a step's, the first run's, a woken
// sandbox's), no lock of the conversation but the turn's is held, so Info,
// Kept and the next save go ahead meanwhile.
func TestASlowSendHoldsNoLock(t *testing.T) {
	tests := []struct {
		name  string
		steps []llmtest.Step
		// before runs ahead of the turn whose save fails.
		before func(t *testing.T, c *Conversation)
	}{
		{name: "a step's save", steps: []llmtest.Step{llmtest.Fixed(llmtest.Answer("done"))}},
		{name: "the first run's save", steps: []llmtest.Step{
			llmtest.Fixed(llmtest.RunPython("print hi")), llmtest.Fixed(llmtest.Answer("done"))}},
		{name: "a woken sandbox's save",
			steps: []llmtest.Step{llmtest.Fixed(llmtest.Answer("one")), llmtest.Fixed(llmtest.Answer("done"))},
			before: func(t *testing.T, c *Conversation) {
				if _, err := c.Ask(ctx(t), "one", nil); err != nil {
					t.Fatal(err)
				}
				for deadline := time.Now().Add(guard); !c.Paused(); time.Sleep(5 * time.Millisecond) {
					if time.Now().After(deadline) {
						t.Fatal("the idle conversation's sandbox was never paused")
					}
				}
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := newWorld(t, llmtest.New(t, tt.steps...))
			st := &testStore{Store: w.store}
			w.svc.store = st
			w.cfg.IdlePause = 10 * time.Millisecond
			c, err := w.svc.Open(ctx(t), w.cfg, Options{Origin: "serve", KeepFiles: true})
			if err != nil {
				t.Fatal(err)
			}
			// Its warnings are the failed save's and its recovery's.
			t.Cleanup(func() { c.Close(context.Background()) })
			if tt.before != nil {
				tt.before(t, c)
			}

			st.fail.Store(true)
			heard, release := make(chan struct{}), make(chan struct{})
			var once sync.Once
			send := func(e agent.Event) {
				if n, ok := e.(agent.Notice); ok && strings.Contains(n.Text, "no space left on device") {
					once.Do(func() { close(heard) })
					<-release
				}
			}
			done := make(chan error, 1)
			go func() {
				_, err := c.Ask(ctx(t), "two", send)
				done <- err
			}()
			defer func() {
				close(release)
				if err := <-done; err != nil {
					t.Errorf("the turn: %v", err)
				}
			}()
			select {
			case <-heard:
			case err := <-done:
				t.Fatalf("the turn ended (%v) without telling of the failed save", err)
			case <-time.After(guard):
				t.Fatal("the failed save was never told")
			}

			meanwhile := make(chan struct{})
			go func() {
				c.Info()
				c.Kept()
				c.save()
				close(meanwhile)
			}()
			select {
			case <-meanwhile:
			case <-time.After(guard):
				t.Error("Info, Kept and a save waited for the turn's send: it was called under a lock of the conversation")
			}
		})
	}
}
