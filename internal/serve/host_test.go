package serve

import (
	"context"
	"fmt"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/terpdev/terp/internal/agent"
	"github.com/terpdev/terp/internal/config"
	"github.com/terpdev/terp/internal/conversation"
	"github.com/terpdev/terp/internal/llm"
	"github.com/terpdev/terp/internal/llm/llmtest"
	"github.com/terpdev/terp/internal/sandbox"
	"github.com/terpdev/terp/internal/sandbox/local"
	"github.com/terpdev/terp/internal/store"
	"github.com/terpdev/terp/internal/terptest"
)

// The keys the test hosts accept, and whose they are.
const (
	aliceKey = "sk-alice-0123456789abcdef"
	bobKey   = "sk-bob-0123456789abcdef01"
)

// testHost is the host alone, no protocol of its own but the probes, on
// the real local sandbox, in front of the scripted model s, over real HTTP.
type testHost struct {
	*httptest.Server
	srv   *Server
	store store.Store
}

func newTestHost(t *testing.T, s *llmtest.Server, change ...func(*Config)) *testHost {
	t.Helper()
	dir := terptest.TempDir(t)
	st, err := store.Open(filepath.Join(dir, "data"))
	if err != nil {
		t.Fatal(err)
	}
	backend, err := local.New(local.Config{Root: filepath.Join(dir, "sandboxes")})
	if err != nil {
		t.Fatal(err)
	}
	cfg := config.Default()
	cfg.BaseURL, cfg.Model, cfg.Sandbox, cfg.ExecMode = s.BaseURL(), "test-model", "local", "kernel"
	svc := conversation.New(conversation.Deps{
		Store:      st,
		NewBackend: func(*config.Config) (sandbox.Backend, error) { return backend, nil },
		NewModel: func(c *config.Config) agent.Completer {
			return llm.New(llm.Config{BaseURL: c.BaseURL, Stream: c.Stream})
		},
	})
	sc := Config{Conversations: svc, Settings: cfg, DataDir: filepath.Join(dir, "serve"),
		Keys: map[string]Principal{aliceKey: {Name: "alice"}, bobKey: {Name: "bob"}}}
	for _, ch := range change {
		ch(&sc)
	}
	srv, err := New(sc)
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(func() {
		hs.Close()
		srv.Close(context.Background())
	})
	return &testHost{Server: hs, srv: srv, store: st}
}

// create makes a container of alice's, expiring after a minute unused,
// and gives its lease back.
func (th *testHost) create(t *testing.T, name string) *Container {
	t.Helper()
	l, err := th.srv.CreateContainer(ctx(t), "alice", ContainerSpec{Name: name, Minutes: 1})
	if err != nil {
		t.Fatal(err)
	}
	l.Release(ctx(t))
	return l.Container()
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return c
}

// A container unused for its expiry is removed with its sandbox and
// conversation; one a request holds a lease on is not.
func TestContainersExpire(t *testing.T) {
	th := newTestHost(t, llmtest.New(t), func(c *Config) { c.ExpiryTick = 10 * time.Millisecond })
	old, busy := th.create(t, "old"), th.create(t, "busy")
	// A response runs in busy: it holds a lease.
	if _, err := th.srv.Acquire(ctx(t), "alice", busy.ID); err != nil {
		t.Fatal(err)
	}
	// Both were last used two minutes ago.
	for _, c := range []*Container{old, busy} {
		if _, err := c.Conversation().Put(ctx(t), "kept.txt", strings.NewReader("x")); err != nil {
			t.Fatal(err)
		}
		c.mu.Lock()
		c.rec.LastActive = time.Now().Add(-2 * time.Minute)
		c.mu.Unlock()
	}
	oldConv := old.Conversation().ID
	stored := func() bool { _, err := th.store.Load(oldConv); return err == nil }
	recorded := func() bool { _, err := th.srv.ContainerRecord(ctx(t), "alice", old.ID); return err == nil }
	for deadline := time.Now().Add(30 * time.Second); recorded() || stored(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the expired container was never removed with its conversation (stored: %v)", stored())
		}
	}
	if l, err := th.srv.Acquire(ctx(t), "alice", old.ID); l != nil || err != nil {
		t.Errorf("the expired container is still found: %v, %v", l, err)
	}
	if _, err := th.srv.ContainerRecord(ctx(t), "alice", busy.ID); err != nil {
		t.Errorf("the busy container expired: %v", err)
	}
}

// A request still finishing in a container that was removed meanwhile
// does not save the container's record back: the container stays gone.
func TestDeletedContainerStaysGone(t *testing.T) {
	th := newTestHost(t, llmtest.New(t))
	made := th.create(t, "short-lived")
	l, err := th.srv.Acquire(ctx(t), "alice", made.ID) // a response running in it
	if err != nil || l == nil {
		t.Fatalf("container: %v", err)
	}
	if err := th.srv.RemoveContainer(ctx(t), "alice", made.ID); err != nil {
		t.Fatal(err)
	}
	c := l.Container()
	c.mu.Lock()
	c.savedActive = time.Time{} // its end would save the record
	c.mu.Unlock()
	l.Release(ctx(t))
	if _, err := th.srv.state.Container(ctx(t), "alice", made.ID); err == nil {
		t.Fatal("the deleted container's record was saved back by the response that ended in it")
	}
	if l, err := th.srv.Acquire(ctx(t), "alice", made.ID); l != nil || err != nil {
		t.Errorf("the deleted container is found again: %v, %v", l, err)
	}
	if err := th.srv.RemoveContainer(ctx(t), "alice", made.ID); StatusOf(err) != 404 {
		t.Errorf("removing it again: %v; want not found", err)
	}
}

// A request that finds a container holds it: expiry, running at the same
// moment, either removes the container before it is found (and the request
// is told it does not exist) or leaves it alone until the lease is given
// back. Never is a found container removed under the request.
func TestLeaseRacesExpiry(t *testing.T) {
	th := newTestHost(t, llmtest.New(t), func(c *Config) { c.ExpiryTick = time.Hour })
	for round := range 20 {
		made := th.create(t, fmt.Sprint("race-", round))
		// Every container is past its expiry as the two race.
		later := time.Now().Add(2 * time.Minute)
		found := make(chan *Lease, 1)
		go func() {
			l, err := th.srv.Acquire(ctx(t), "alice", made.ID)
			if err != nil {
				t.Error(err)
			}
			found <- l
		}()
		th.srv.expire(later)
		l := <-found
		if l == nil {
			continue // expiry came first
		}
		// Expiry again, now that the lease is surely held: it must wait.
		th.srv.expire(later)
		c := l.Container()
		c.saveMu.Lock()
		removed := c.removed
		c.saveMu.Unlock()
		if removed {
			t.Fatalf("round %d: the container was removed while a request held it", round)
		}
		if _, err := c.Conversation().Files(ctx(t)); err != nil {
			t.Fatalf("round %d: the leased container's sandbox is gone: %v", round, err)
		}
		l.Release(ctx(t))
		th.srv.expire(time.Now().Add(2 * time.Minute))
		if th.srv.live(made.ID) != nil {
			t.Fatalf("round %d: the container outlived its expiry once its lease was given back", round)
		}
	}
}
