// Package servetest builds a terp serve host for the tests of the protocols
// on it: conversations on the real local sandbox, kept in a directory of
// the test's, two keys, real HTTP.
package servetest

import (
	"context"
	"net/http/httptest"
	"path/filepath"
	"testing"

	"github.com/terpdev/terp/internal/agent"
	"github.com/terpdev/terp/internal/config"
	"github.com/terpdev/terp/internal/conversation"
	"github.com/terpdev/terp/internal/llm"
	"github.com/terpdev/terp/internal/sandbox"
	"github.com/terpdev/terp/internal/sandbox/local"
	"github.com/terpdev/terp/internal/serve"
	"github.com/terpdev/terp/internal/store"
)

// The keys of the hosts Config makes, and whose they are: alice's and
// bob's.
const (
	AliceKey = "sk-alice-0123456789abcdef"
	BobKey   = "sk-bob-0123456789abcdef01"
)

// Config is a host's configuration that keeps everything in dir: the
// conversations (dir/data), the sandboxes (dir/sandboxes, on the local
// backend, kernel mode) and the host's state (dir/serve); a host made
// again in the same dir finds what the one before it kept. modelURL is
// the scripted model's, for a protocol that runs model turns, or "".
func Config(t testing.TB, dir, modelURL string) (serve.Config, store.Store) {
	t.Helper()
	st, err := store.Open(filepath.Join(dir, "data"))
	if err != nil {
		t.Fatal(err)
	}
	backend, err := local.New(local.Config{Root: filepath.Join(dir, "sandboxes")})
	if err != nil {
		t.Fatal(err)
	}
	cfg := config.Default()
	cfg.Sandbox, cfg.ExecMode = "local", "kernel"
	deps := conversation.Deps{Store: st, NewBackend: func(*config.Config) (sandbox.Backend, error) { return backend, nil }}
	if modelURL != "" {
		cfg.BaseURL, cfg.Model = modelURL, "test-model"
		deps.NewModel = func(c *config.Config) agent.Completer {
			return llm.New(llm.Config{BaseURL: c.BaseURL, Stream: c.Stream})
		}
	}
	return serve.Config{Conversations: conversation.New(deps), Settings: cfg, DataDir: filepath.Join(dir, "serve"),
		Keys: map[string]serve.Principal{AliceKey: {Name: "alice"}, BobKey: {Name: "bob"}}}, st
}

// Start starts a host of sc, with the protocols register puts on it, over
// real HTTP; both are closed when the test ends.
func Start(t testing.TB, sc serve.Config, register func(*serve.Server)) (*httptest.Server, *serve.Server) {
	t.Helper()
	srv, err := serve.New(sc)
	if err != nil {
		t.Fatal(err)
	}
	register(srv)
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(func() {
		hs.Close()
		srv.Close(context.Background())
	})
	return hs, srv
}
