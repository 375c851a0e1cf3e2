// Package serve is the host under `terp serve`: the HTTP server that wire
// protocols plug into (OpenAI's API in package openaiapi, Jupyter's kernel
// API in package jupyter, LibreChat's code API in package librechat) with
// what they all share: the key
// ring, limits and their refusals, containers with leases and expiry,
// forwarding to the replica a container is open in, one turn runner for
// model turns and one exec path for code a client wrote, probes, metrics
// and logs. A protocol registers its routes (Register); the host knows
// nothing of its wire format.
//
// A container is one terp conversation: its sandbox holds the files, its
// history the code and outputs. Every container belongs to the principal
// whose key made it; another key is told it does not exist. Files,
// container records, stored responses and token usage are kept in a
// state.State (terp's data directory, or PostgreSQL shared by replicas), so
// a restarted server, or another replica, goes on with them; a container is
// open in one process at a time (see forward.go).
package serve

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/terpdev/terp/internal/agent"
	"github.com/terpdev/terp/internal/config"
	"github.com/terpdev/terp/internal/conversation"
	"github.com/terpdev/terp/internal/serve/state"
)

// Config is what a Server is built from.
type Config struct {
	// Conversations runs the containers' conversations.
	Conversations *conversation.Service
	// Settings are the defaults every container starts from: upstream's
	// base URL and model, the sandbox, its limits. Each container gets its
	// own copy.
	Settings *config.Config
	// Keys maps each accepted key to its principal: its owner's name and
	// limits. Empty with NoAuth set, every request belongs to one owner,
	// "local", held to LocalLimits.
	Keys        map[string]Principal
	NoAuth      bool
	LocalLimits Limits
	// Caps bound the whole server, whatever the key.
	Caps Caps
	// State keeps the files, containers, responses and usage across
	// restarts; nil means a state.Dir in DataDir.
	State state.State
	// DataDir holds the state when State is nil.
	DataDir string
	// Replica is the address (http://HOST:PORT) other replicas reach this
	// one at, when several share State; see forward.go.
	Replica string
	// Upstream sends requests that need no code interpreter to the model
	// server as they are (chat completions without the tool, the model
	// list). Nil means http.DefaultClient.
	Upstream *http.Client
	// Log receives one line per request; nil discards.
	Log *slog.Logger
	// ExpiryTick is how often containers past their expiry are looked for
	// (0: 30 s).
	ExpiryTick time.Duration
	// Metrics are the server's Prometheus metrics; nil makes new ones.
	// See MetricsHandler and docs/serve.md.
	Metrics *Metrics
	// Ready are more checks for /readyz, beside the model server and the
	// state: the sandbox backend's (SandboxCheck), which the front-end
	// that made the backend adds.
	Ready []ReadyCheck
	// PublicURL is the address clients reach the server at (https://HOST
	// behind a proxy), which links start with; "" is the address each
	// request came to. See BaseURL.
	PublicURL string
	// LinkLifetime is how long the links to files the code saved work (0:
	// DefaultLinkLifetime); see links.go.
	LinkLifetime time.Duration
	// LogDebug logs, at debug level, what clients send and what runs:
	// their keys, prompts, code and outputs. Without it none of these is
	// ever logged.
	LogDebug bool
}

// Server holds the state of a running `terp serve`.
type Server struct {
	cfg   Config
	state state.State
	mux   *http.ServeMux
	// routeOf is every registered route by its pattern.
	routeOf map[string]*route
	metrics *Metrics
	ready   []*readyState
	lim     *limiter
	keys    *Keyring

	// secret is the replicas' shared secret (State.Secret), once read.
	secretMu sync.Mutex
	secret   []byte

	// mu guards containers, the containers live in this process (the
	// others are records in the state, opened on first use); opening
	// serialises opening them.
	mu         sync.Mutex
	containers map[string]*Container
	opening    sync.Mutex

	stop      chan struct{}
	done      sync.WaitGroup
	closeOnce sync.Once

	// base is the context requests run in; Abort cancels it, and sets
	// aborted so that they answer why.
	base       context.Context
	cancelBase context.CancelFunc
	aborted    atomic.Bool
	// draining is set by Drain: the server still serves, but /readyz
	// says it is stopping.
	draining atomic.Bool

	modelOnce sync.Once
	model     agent.Completer
}

// New returns a server for cfg. Close stops its background work and pauses
// every container.
func New(cfg Config) (*Server, error) {
	if cfg.Upstream == nil {
		cfg.Upstream = http.DefaultClient
	}
	if cfg.ExpiryTick == 0 {
		cfg.ExpiryTick = 30 * time.Second
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	st := cfg.State
	if st == nil {
		var err error
		if st, err = state.OpenDir(cfg.DataDir); err != nil {
			return nil, err
		}
	}
	s := &Server{cfg: cfg, state: st, containers: map[string]*Container{}, stop: make(chan struct{}), keys: NewKeyring(cfg.Keys, cfg.NoAuth, cfg.LocalLimits)}
	s.lim = newLimiter(cfg.Caps, s.keys)
	s.base, s.cancelBase = context.WithCancel(context.Background())
	if err := s.instrument(); err != nil {
		return nil, err
	}
	s.mux, s.routeOf = http.NewServeMux(), map[string]*route{}
	s.Register(s.health())
	s.Register(s.links())
	s.done.Add(1)
	go s.expireLoop()
	return s, nil
}

// Handler is the server's HTTP handler: every route behind its protocol's
// key check but the public ones, each request admitted under the limits,
// counted and logged.
func (s *Server) Handler() http.Handler {
	return s.observe(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rt, _ := s.lookupRoute(r)
		if rt == nil || rt.Public {
			s.mux.ServeHTTP(w, r)
			return
		}
		p, err := s.principal(rt.proto, r)
		if err != nil {
			rt.proto.Refuse(w, err)
			return
		}
		noteOwner(r, p.Name)
		rctx := withOwner(r.Context(), p.Name)
		if r.Header.Get(ForwardedHeader) != "" {
			rctx = context.WithValue(rctx, forwardedKey{}, true)
		}
		if r, ok := s.admit(w, r, p.Name, rt); ok {
			s.replayable(r, rt)
			s.mux.ServeHTTP(w, r.WithContext(rctx))
		}
	}))
}

// BaseContext is the context an http.Server should run the requests in,
// for Abort to end them.
func (s *Server) BaseContext(net.Listener) context.Context { return s.base }

// Drain tells load balancers that the server is stopping: /readyz answers
// 503 from now on, while every request, new ones too, is still served, so
// that a balancer stops sending before the listener closes.
func (s *Server) Drain() { s.draining.Store(true) }

// Abort stops the requests still running when a stopping server's grace
// period is over: their turns are cancelled, and each answers 503 (or a
// failed response, when streaming) saying the server stopped.
func (s *Server) Abort() {
	s.aborted.Store(true)
	s.cancelBase()
}

// stoppedError is a turn's error, a *StoppedError when Abort ended it.
func (s *Server) stoppedError(err error) error {
	if err != nil && s.aborted.Load() {
		return &StoppedError{cause: err}
	}
	return err
}

// Refuse answers err, an error the host ended r with, in the words of the
// protocol r's route belongs to.
func (s *Server) Refuse(w http.ResponseWriter, r *http.Request, err error) {
	if rt, _ := s.lookupRoute(r); rt != nil {
		rt.proto.Refuse(w, err)
		return
	}
	refusePlainly(w, err)
}

// Close stops the expiry loop and pauses every container's sandbox, so that
// their conversations can be resumed.
func (s *Server) Close(ctx context.Context) {
	s.closeOnce.Do(func() { s.close(ctx) })
}

func (s *Server) close(ctx context.Context) {
	close(s.stop)
	s.done.Wait()
	s.cancelBase()
	s.mu.Lock()
	all := make([]*Container, 0, len(s.containers))
	for _, c := range s.containers {
		all = append(all, c)
	}
	clear(s.containers)
	s.mu.Unlock()
	for _, c := range all {
		for _, w := range c.conv.Close(ctx) {
			s.cfg.Log.Warn("closing container", "container", c.ID, "warning", w)
		}
		// Paused: any replica may open it now.
		s.Change(ctx, c, func(r *state.Container) { r.Replica = "" })
	}
	if s.cfg.State == nil {
		_ = s.state.Close()
	}
}

type ownerKey struct{}

func withOwner(ctx context.Context, owner string) context.Context {
	return context.WithValue(ctx, ownerKey{}, owner)
}

// Owner is the owner the request was authenticated as.
func Owner(r *http.Request) string {
	o, _ := r.Context().Value(ownerKey{}).(string)
	return o
}

// statusWriter remembers the status, for the log; it passes Flush through,
// for streams.
type statusWriter struct {
	http.ResponseWriter
	status int
	// ctx and log are the request's, for Internal.
	ctx context.Context
	log *slog.Logger
}

// Internal logs err, a failure of terp's own that ends the request w
// answers (a sandbox's, the disk's, the database's), under an error id,
// and returns what the client is told instead: the id, never the error,
// which may name host paths or internals. The log line carries the id and
// the request id.
func Internal(w http.ResponseWriter, err error) string {
	id := NewID("err_")[:20]
	for w != nil {
		if sw, ok := w.(*statusWriter); ok {
			sw.log.WarnContext(sw.ctx, "internal error", "error_id", id, "error", err)
			break
		}
		u, ok := w.(interface{ Unwrap() http.ResponseWriter })
		if !ok {
			break
		}
		w = u.Unwrap()
	}
	return fmt.Sprintf("terp serve failed to answer: internal error %s. The server's log has its cause under that id.", id)
}

func (w *statusWriter) WriteHeader(code int) { w.status = code; w.ResponseWriter.WriteHeader(code) }
func (w *statusWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// NotFoundError is an object that does not exist, or is another key's:
// the two are told alike, so that no key learns of another's objects.
type NotFoundError struct{ Kind, ID string }

func (e *NotFoundError) Error() string { return fmt.Sprintf("No %s found with id '%s'.", e.Kind, e.ID) }

// StoppedError is a request that Abort ended: the server stopped before it
// finished.
type StoppedError struct{ cause error }

func (e *StoppedError) Error() string {
	if e.cause == nil {
		return "terp serve stopped before this request finished; the container is kept: send the request again"
	}
	return fmt.Sprintf("terp serve stopped before this finished (%v); the container is kept: send the request again", e.cause)
}

func (e *StoppedError) Unwrap() error { return e.cause }

// UnavailableError is a request for a container whose replica does not
// answer, which could not be run here instead (its body was an upload,
// read already): the client should send it again.
type UnavailableError struct{ ContainerID string }

func (e *UnavailableError) Error() string {
	return fmt.Sprintf("the terp serve replica container %s was open in does not answer; send the request again", e.ContainerID)
}

// writeJSON answers v as JSON, as every protocol's JSON answers are
// written: no HTML escapes, which would garble code and output.
func WriteJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v)
}

// MaxUpstreamBody bounds an answer from the model server that terp reads
// whole (the model list); a client's request body is bounded by
// Caps.Request.
const MaxUpstreamBody = 8 << 20

// UpstreamURL is the model server's endpoint p.
func (s *Server) UpstreamURL(p string) string {
	return strings.TrimRight(s.cfg.Settings.BaseURL, "/") + p
}

// NewID is a new object's id: prefix and 128 random bits, which no client
// can guess.
func NewID(prefix string) string {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		panic(err) // crypto/rand does not fail on Linux
	}
	return prefix + hex.EncodeToString(b)
}

// Model is the model client of the server's settings, for a protocol
// that asks the model itself, without a container (the Responses API's
// requests without the code interpreter). It is made once.
func (s *Server) Model() agent.Completer {
	s.modelOnce.Do(func() { s.model = s.cfg.Conversations.Model(s.cfg.Settings) })
	return s.model
}

// State is where the server keeps its files, containers, responses and
// usage.
func (s *Server) State() state.State { return s.state }

// Settings are the defaults every container starts from: upstream's base
// URL and model, the sandbox, its limits.
func (s *Server) Settings() *config.Config { return s.cfg.Settings }

// Upstream is the client requests to the model server go through.
func (s *Server) Upstream() *http.Client { return s.cfg.Upstream }

// Log is the server's log.
func (s *Server) Log() *slog.Logger { return s.cfg.Log }

// Caps are the bounds of the whole server, the defaults filled in: a
// protocol whose library bounds what it reads itself (the MCP Go SDK) is
// told the host's bound, so that both say the same.
func (s *Server) Caps() Caps { return s.lim.caps }
