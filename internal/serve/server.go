// Package serve is `terp serve`: an HTTP server that speaks the OpenAI API
// to its clients (the Responses API with the code_interpreter tool,
// containers, files and chat completions), talks to the configured
// open-model server upstream, and runs the code-interpreter loop in terp's
// sandboxes through the conversation service. An app written for OpenAI's
// hosted code interpreter works against it by changing only its base URL and
// key.
//
// A container is one terp conversation: its sandbox holds the files, its
// history the code and outputs. Every object (file, container, response)
// belongs to the key that made it; another key is told it does not exist.
// Files, container records, stored responses and token usage are kept in a
// state.State (terp's data directory, or PostgreSQL shared by replicas), so
// a restarted server, or another replica, goes on with them; a container is
// open in one process at a time (see forward.go).
package serve

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/terpdev/terp/internal/config"
	"github.com/terpdev/terp/internal/conversation"
	"github.com/terpdev/terp/internal/serve/state"
	"github.com/terpdev/terp/internal/store"
)

// Config is what a Server is built from.
type Config struct {
	// Conversations runs the containers' conversations.
	Conversations *conversation.Service
	// Settings are the defaults every container starts from: upstream's
	// base URL and model, the sandbox, its limits. Each container gets its
	// own copy.
	Settings *config.Config
	// Keys maps each accepted bearer key to its owner's name and limits.
	// Empty with NoAuth set, every request belongs to one owner, "local",
	// held to LocalLimits.
	Keys        map[string]Key
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
	// AliasSuffix makes a chat model named MODEL+AliasSuffix run the
	// code interpreter on MODEL, for clients that cannot add the tool; ""
	// means DefaultAliasSuffix.
	AliasSuffix string
	// Steps is where chat completions show the steps (code and output),
	// one of StepsModes, unless a request's terp_steps says; "" means the
	// first.
	Steps string
	// Metrics are the server's Prometheus metrics; nil makes new ones.
	// See MetricsHandler and docs/serve.md.
	Metrics *Metrics
	// Ready are more checks for /readyz, beside the model server and the
	// state: the sandbox backend's (SandboxCheck), which the front-end
	// that made the backend adds.
	Ready []ReadyCheck
	// LogDebug logs, at debug level, what clients send and what runs:
	// their keys, prompts, code and outputs. Without it none of these is
	// ever logged.
	LogDebug bool
}

// Server holds the state of a running `terp serve`.
type Server struct {
	cfg     Config
	state   state.State
	mux     *http.ServeMux
	metrics *Metrics
	ready   []*readyState
	lim     *limiter

	// mu guards containers, the containers live in this process (the
	// others are records in the state, opened on first use); opening
	// serialises opening them.
	mu         sync.Mutex
	containers map[string]*container
	opening    sync.Mutex

	stop      chan struct{}
	done      sync.WaitGroup
	closeOnce sync.Once

	// base is the context requests run in; Abort cancels it, and sets
	// aborted so that they answer why.
	base       context.Context
	cancelBase context.CancelFunc
	aborted    atomic.Bool
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
	s := &Server{cfg: cfg, state: st, containers: map[string]*container{}, stop: make(chan struct{}), lim: newLimiter(cfg)}
	s.base, s.cancelBase = context.WithCancel(context.Background())
	if err := s.instrument(); err != nil {
		return nil, err
	}
	s.mux = http.NewServeMux()
	s.routes()
	s.done.Add(1)
	go s.expireLoop()
	return s, nil
}

// Handler is the server's HTTP handler: every route behind the key check
// but the probes, each request counted and logged.
func (s *Server) Handler() http.Handler {
	return s.observe(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, route := s.mux.Handler(r); publicRoutes[route] {
			s.mux.ServeHTTP(w, r)
			return
		}
		owner, ok := s.owner(r)
		if !ok {
			writeError(w, http.StatusUnauthorized, "invalid_request_error", "invalid_api_key",
				"Incorrect API key provided: send one of the server's keys as Authorization: Bearer KEY (terp serve --keys-file or TERP_SERVE_KEY).", "")
			return
		}
		noteOwner(r, owner)
		rctx := withOwner(r.Context(), owner)
		if r.Header.Get(ForwardedHeader) != "" {
			rctx = context.WithValue(rctx, forwardedKey{}, true)
		}
		if r, ok := s.admit(w, r, owner); ok {
			s.replayable(r)
			s.mux.ServeHTTP(w, r.WithContext(rctx))
		}
	}))
}

func (s *Server) routes() {
	s.mux.HandleFunc("GET /v1/models", s.listModels)
	s.mux.HandleFunc("POST /v1/files", s.createFile)
	s.mux.HandleFunc("GET /v1/files", s.listFiles)
	s.mux.HandleFunc("GET /v1/files/{id}", s.getFile)
	s.mux.HandleFunc("GET /v1/files/{id}/content", s.getFileContent)
	s.mux.HandleFunc("DELETE /v1/files/{id}", s.deleteFile)
	s.mux.HandleFunc("POST /v1/containers", s.createContainer)
	s.mux.HandleFunc("GET /v1/containers", s.listContainers)
	s.mux.HandleFunc("GET /v1/containers/{id}", s.getContainer)
	s.mux.HandleFunc("DELETE /v1/containers/{id}", s.deleteContainer)
	s.mux.HandleFunc("POST /v1/containers/{id}/files", s.createContainerFile)
	s.mux.HandleFunc("GET /v1/containers/{id}/files", s.listContainerFiles)
	s.mux.HandleFunc("GET /v1/containers/{id}/files/{fid}", s.getContainerFile)
	s.mux.HandleFunc("GET /v1/containers/{id}/files/{fid}/content", s.getContainerFileContent)
	s.mux.HandleFunc("DELETE /v1/containers/{id}/files/{fid}", s.deleteContainerFile)
	s.mux.HandleFunc("POST /v1/responses", s.createResponse)
	s.mux.HandleFunc("GET /v1/responses/{id}", s.getResponse)
	s.mux.HandleFunc("DELETE /v1/responses/{id}", s.deleteResponse)
	s.mux.HandleFunc("POST /v1/chat/completions", s.chatCompletions)
	s.healthRoutes()
	s.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, "invalid_request_error", "unknown_url",
			fmt.Sprintf("terp serve has no %s %s; see docs/serve.md for what it serves", r.Method, r.URL.Path), "")
	})
}

// BaseContext is the context an http.Server should run the requests in,
// for Abort to end them.
func (s *Server) BaseContext(net.Listener) context.Context { return s.base }

// Abort stops the requests still running when a stopping server's grace
// period is over: their turns are cancelled, and each answers 503 (or a
// failed response, when streaming) saying the server stopped.
func (s *Server) Abort() {
	s.aborted.Store(true)
	s.cancelBase()
}

// stoppedError is a turn's error, said plainly when Abort ended it.
func (s *Server) stoppedError(err error) error {
	if err != nil && s.aborted.Load() {
		return fmt.Errorf("terp serve stopped before this finished (%v); the container is kept: send the request again", err)
	}
	return err
}

// answerStopped answers a request that Abort ended, if it did.
func (s *Server) answerStopped(w http.ResponseWriter) bool {
	if !s.aborted.Load() {
		return false
	}
	w.Header().Set("Retry-After", "5")
	writeError(w, http.StatusServiceUnavailable, "server_error", "server_stopping",
		"terp serve stopped before this request finished; the container is kept: send the request again", "")
	return true
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
	all := make([]*container, 0, len(s.containers))
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
		s.change(ctx, c, func(r *state.Container) { r.Replica = "" })
	}
	if s.cfg.State == nil {
		_ = s.state.Close()
	}
}

// owner is who the request's bearer key belongs to.
func (s *Server) owner(r *http.Request) (string, bool) {
	if s.cfg.NoAuth {
		return "local", true
	}
	key, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok || key == "" {
		return "", false
	}
	// Every key is compared, in constant time, so the time taken says
	// nothing about which prefix matched.
	sum := sha256.Sum256([]byte(key))
	owner, found := "", false
	for k, key := range s.cfg.Keys {
		ks := sha256.Sum256([]byte(k))
		if subtle.ConstantTimeCompare(sum[:], ks[:]) == 1 {
			owner, found = key.Name, true
		}
	}
	return owner, found
}

type ownerKey struct{}

func withOwner(ctx context.Context, owner string) context.Context {
	return context.WithValue(ctx, ownerKey{}, owner)
}

// ownerOf is the owner the request was authenticated as.
func ownerOf(r *http.Request) string {
	o, _ := r.Context().Value(ownerKey{}).(string)
	return o
}

// statusWriter remembers the status, for the log; it passes Flush through,
// for streams.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) { w.status = code; w.ResponseWriter.WriteHeader(code) }
func (w *statusWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// apiError is OpenAI's error object.
type apiError struct {
	Message string  `json:"message"`
	Type    string  `json:"type"`
	Param   *string `json:"param"`
	Code    *string `json:"code"`
}

// writeError answers with OpenAI's error shape, which its SDKs parse.
func writeError(w http.ResponseWriter, status int, typ, code, message, param string) {
	e := apiError{Message: message, Type: typ}
	if code != "" {
		e.Code = &code
	}
	if param != "" {
		e.Param = &param
	}
	writeJSON(w, status, map[string]apiError{"error": e})
}

// badRequest is a 400 naming the parameter that was wrong.
func badRequest(w http.ResponseWriter, param, format string, a ...any) {
	writeError(w, http.StatusBadRequest, "invalid_request_error", "", fmt.Sprintf(format, a...), param)
}

// notFound is the 404 of an object that does not exist, or is another key's.
func notFound(w http.ResponseWriter, kind, id string) {
	writeError(w, http.StatusNotFound, "invalid_request_error", "not_found", fmt.Sprintf("No %s found with id '%s'.", kind, id), "")
}

// serverError is a failure of terp's own (the sandbox, the disk).
func serverError(w http.ResponseWriter, err error) {
	writeError(w, http.StatusInternalServerError, "server_error", "", err.Error(), "")
}

// conversationError answers with the status that err calls for.
func conversationError(w http.ResponseWriter, err error) {
	if limit := asLimit(err); limit != nil {
		limit.answer(w)
		return
	}
	var input *conversation.InputError
	switch {
	case errors.As(err, &input):
		badRequest(w, "", "%s", err.Error())
	case errors.Is(err, conversation.ErrBusy):
		writeError(w, http.StatusConflict, "invalid_request_error", "container_busy", err.Error(), "")
	case errors.Is(err, store.ErrBusy):
		writeError(w, http.StatusConflict, "invalid_request_error", "container_busy",
			"the container is open in another terp serve process; retry in a moment", "")
	default:
		serverError(w, err)
	}
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v)
}

// maxBody bounds an answer from upstream that terp reads whole (the model
// list); a client's request body is bounded by Caps.Request.
const maxBody = 8 << 20

// decode reads a JSON request body into v, refusing what is not JSON or is
// too large (Handler bounds every body), with a message that says so.
// Handler keeps the body for a forward (replayable).
func decode(w http.ResponseWriter, r *http.Request, v any) bool {
	b, err := io.ReadAll(r.Body)
	if err == nil {
		err = json.Unmarshal(b, v)
	}
	if err != nil {
		if limit := asLimit(err); limit != nil {
			limit.answer(w)
		} else {
			badRequest(w, "", "the request body is not the JSON this endpoint takes: %v", err)
		}
		return false
	}
	return true
}

// list is OpenAI's list object.
type list[T any] struct {
	Object  string  `json:"object"`
	Data    []T     `json:"data"`
	HasMore bool    `json:"has_more"`
	FirstID *string `json:"first_id"`
	LastID  *string `json:"last_id"`
}

func newList[T any](data []T, id func(T) string) list[T] {
	l := list[T]{Object: "list", Data: data}
	if l.Data == nil {
		l.Data = []T{}
	}
	if len(data) > 0 {
		first, last := id(data[0]), id(data[len(data)-1])
		l.FirstID, l.LastID = &first, &last
	}
	return l
}

// deleted is what a DELETE answers.
type deleted struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Deleted bool   `json:"deleted"`
}
