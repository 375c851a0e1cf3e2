package conversation

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/terpdev/terp/internal/llm"
	"github.com/terpdev/terp/internal/llm/llmtest"
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
