// Package servetest builds a terp serve host for the tests of the protocols
// on it: conversations kept in a directory of the test's, on the real local
// sandbox or the in-memory one, two keys, real HTTP.
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
	"github.com/terpdev/terp/internal/sandbox/memory"
	"github.com/terpdev/terp/internal/serve"
	"github.com/terpdev/terp/internal/store"
)

// The keys of the hosts Config makes, and whose they are: alice's and
// bob's.
const (
	AliceKey = "sk-alice-0123456789abcdef"
	BobKey   = "sk-bob-0123456789abcdef01"
)

// The sandboxes a host's code may run on (Options.Sandbox).
const (
	// Local is bubblewrap, with a Python kernel that keeps variables:
	// what users run.
	Local = "local"
	// Memory is the in-memory backend, whose stand-in for Python runs a
	// line language (print, write, cat, ...), each run a new script: fast,
	// for tests of what surrounds the code.
	Memory = "memory"
)

// Options change the host Config builds. The zero value runs code on the
// local sandbox and asks no model.
type Options struct {
	// ModelURL is the scripted model's, for a protocol that runs model
	// turns, or "".
	ModelURL string
	// Sandbox is Local ("" too) or Memory.
	Sandbox string
	// Settings, if set, changes the settings before the host is built
	// (the key terp sends upstream, the idle pause, ...).
	Settings func(*config.Config)
}

// Config is a host's configuration that keeps everything in dir: the
// conversations (dir/data), the local sandboxes (dir/sandboxes) and the
// host's state (dir/serve); a host made again in the same dir finds what
// the one before it kept. The model client never retries: a retried request
// would hide what the first answer was.
func Config(t testing.TB, dir string, opt Options) (serve.Config, store.Store) {
	t.Helper()
	st, err := store.Open(filepath.Join(dir, "data"))
	if err != nil {
		t.Fatal(err)
	}
	cfg := config.Default()
	var backend sandbox.Backend
	switch opt.Sandbox {
	case "", Local:
		lb, err := local.New(local.Config{Root: filepath.Join(dir, "sandboxes")})
		if err != nil {
			t.Fatal(err)
		}
		backend, cfg.Sandbox, cfg.ExecMode = lb, Local, "kernel"
	case Memory:
		backend = memory.New(memory.Config{Programs: map[string]memory.Program{"python3": memory.PythonStandIn}})
		cfg.Sandbox, cfg.ExecMode = Memory, "script"
	default:
		t.Fatalf("servetest: no sandbox %q: use servetest.Local or servetest.Memory", opt.Sandbox)
	}
	deps := conversation.Deps{Store: st, NewBackend: func(*config.Config) (sandbox.Backend, error) { return backend, nil }}
	if opt.ModelURL != "" {
		cfg.BaseURL, cfg.Model = opt.ModelURL, "test-model"
		deps.NewModel = func(c *config.Config) agent.Completer {
			key, _ := c.APIKey()
			return llm.New(llm.Config{BaseURL: c.BaseURL, APIKey: key, Stream: c.Stream, MaxRetries: -1})
		}
	}
	if opt.Settings != nil {
		opt.Settings(cfg)
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
