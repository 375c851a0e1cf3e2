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
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/terpdev/terp/internal/config"
	"github.com/terpdev/terp/internal/conversation"
	"github.com/terpdev/terp/internal/llm"
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
	cfg   Config
	state state.State
	mux   *http.ServeMux
	// routeOf is every registered route by its pattern.
	routeOf map[string]*route
	metrics *Metrics
	ready   []*readyState
	lim     *limiter
	keys    *Keyring

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
		p, ok := s.keys.Lookup(rt.proto.Credential(r))
		if !ok {
			rt.proto.Refuse(w, &UnauthorizedError{Where: rt.proto.KeyIn})
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

// RegisterOpenAI serves OpenAI's API on the host: the Responses API with
// the code_interpreter tool, containers, files, chat completions and the
// model list.
func (s *Server) RegisterOpenAI() { s.Register(s.openAI()) }

func (s *Server) openAI() Protocol {
	return Protocol{Name: "openai", Routes: []Route{
		{Pattern: "GET /v1/models", Handler: s.listModels},
		{Pattern: "POST /v1/files", Handler: s.createFile, Upload: true},
		{Pattern: "GET /v1/files", Handler: s.listFiles},
		{Pattern: "GET /v1/files/{id}", Handler: s.getFile},
		{Pattern: "GET /v1/files/{id}/content", Handler: s.getFileContent},
		{Pattern: "DELETE /v1/files/{id}", Handler: s.deleteFile},
		{Pattern: "POST /v1/containers", Handler: s.createContainer},
		{Pattern: "GET /v1/containers", Handler: s.listContainers},
		{Pattern: "GET /v1/containers/{id}", Handler: s.getContainer},
		{Pattern: "DELETE /v1/containers/{id}", Handler: s.deleteContainer},
		{Pattern: "POST /v1/containers/{id}/files", Handler: s.createContainerFile, Upload: true},
		{Pattern: "GET /v1/containers/{id}/files", Handler: s.listContainerFiles},
		{Pattern: "GET /v1/containers/{id}/files/{fid}", Handler: s.getContainerFile},
		{Pattern: "GET /v1/containers/{id}/files/{fid}/content", Handler: s.getContainerFileContent},
		{Pattern: "DELETE /v1/containers/{id}/files/{fid}", Handler: s.deleteContainerFile},
		{Pattern: "POST /v1/responses", Handler: s.createResponse},
		{Pattern: "GET /v1/responses/{id}", Handler: s.getResponse},
		{Pattern: "DELETE /v1/responses/{id}", Handler: s.deleteResponse},
		{Pattern: "POST /v1/chat/completions", Handler: s.chatCompletions},
		{Pattern: "/", Handler: func(w http.ResponseWriter, r *http.Request) {
			writeError(w, http.StatusNotFound, "invalid_request_error", "unknown_url",
				fmt.Sprintf("terp serve has no %s %s; see docs/serve.md for what it serves", r.Method, r.URL.Path), "")
		}},
	}}
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
		s.change(ctx, c, func(r *state.Container) { r.Replica = "" })
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

// answerRefusal answers a refusal as OpenAI answers its own: a 429's type
// names what ran out and its code is rate_limit_exceeded, which the SDKs
// retry after Retry-After (in seconds, rounded up, and in Retry-After-Ms)
// unless X-Should-Retry says not to; a body over its size or too slow is an
// invalid request, with a code that says which.
func answerRefusal(w http.ResponseWriter, r *Refusal) {
	if r.RetryAfter > 0 {
		secs := int64(math.Ceil(r.RetryAfter.Seconds()))
		w.Header().Set("Retry-After", strconv.FormatInt(secs, 10))
		ms := (r.RetryAfter + time.Millisecond - 1) / time.Millisecond
		w.Header().Set("Retry-After-Ms", strconv.FormatInt(int64(ms), 10))
	}
	if r.Final {
		w.Header().Set("X-Should-Retry", "false")
	}
	f := failure(r)
	writeError(w, f.status, f.typ, f.code, f.message, "")
}

// badRequest is a 400 naming the parameter that was wrong.
func badRequest(w http.ResponseWriter, param, format string, a ...any) {
	writeError(w, http.StatusBadRequest, "invalid_request_error", "", fmt.Sprintf(format, a...), param)
}

// notFound is the 404 of an object that does not exist, or is another key's.
func notFound(w http.ResponseWriter, kind, id string) { writeFailure(w, notFoundError(kind, id)) }

// missingError is an object that does not exist, or is another key's.
type missingError struct{ kind, id string }

func notFoundError(kind, id string) error { return &missingError{kind: kind, id: id} }

func (e *missingError) Error() string { return fmt.Sprintf("No %s found with id '%s'.", e.kind, e.id) }

// serverError is a failure of terp's own (the sandbox, the disk).
func serverError(w http.ResponseWriter, err error) {
	writeError(w, http.StatusInternalServerError, "server_error", "", err.Error(), "")
}

// writeFailure answers a request that err ended, before anything else was
// sent, with the status failure gives it; a refusal with its Retry-After.
func writeFailure(w http.ResponseWriter, err error) {
	if refusal := AsRefusal(err); refusal != nil {
		answerRefusal(w, refusal)
		return
	}
	f := failure(err)
	writeError(w, f.status, f.typ, f.code, f.message, f.param)
}

// failed is an error as OpenAI's clients are told it.
type failed struct {
	status                    int
	typ, code, message, param string
}

// failure classifies an error that ended a request: the one classification
// of every answer, whole or streamed, turn or not. What is the client's
// doing is a 4xx, the model server's a 4xx or 502 by what it said, and
// anything else terp's own failure, a 500.
func failure(err error) failed {
	var perr *paramError
	var input *conversation.InputError
	var upstream *llm.Error
	var missing *missingError
	var unauthorized *UnauthorizedError
	switch {
	case errors.As(err, &unauthorized):
		return failed{status: http.StatusUnauthorized, typ: "invalid_request_error", code: "invalid_api_key", message: err.Error()}
	case errors.As(err, &missing):
		return failed{status: http.StatusNotFound, typ: "invalid_request_error", code: "not_found", message: missing.Error()}
	case AsRefusal(err) != nil:
		// OpenAI's rate limits name what ran out in the error's type.
		r := AsRefusal(err)
		f := failed{status: r.Status, typ: r.Kind, code: "rate_limit_exceeded", message: r.Message}
		switch r.Kind {
		case RefusedSize:
			f.typ, f.code = "invalid_request_error", "request_too_large"
		case RefusedTimeout:
			f.typ, f.code = "invalid_request_error", "request_timeout"
		}
		return f
	case errors.As(err, &perr) && perr.err == nil:
		return failed{status: http.StatusBadRequest, typ: "invalid_request_error", message: perr.message, param: perr.param}
	case errors.As(err, &input):
		return failed{status: http.StatusBadRequest, typ: "invalid_request_error", message: err.Error()}
	case errors.Is(err, conversation.ErrBusy):
		return failed{status: http.StatusConflict, typ: "invalid_request_error", code: "container_busy", message: err.Error()}
	case errors.Is(err, store.ErrBusy):
		return failed{status: http.StatusConflict, typ: "invalid_request_error", code: "container_busy",
			message: "the container is open in another terp serve process; retry in a moment"}
	case errors.As(err, &upstream):
		f := failed{message: err.Error()}
		switch upstream.Kind {
		case llm.KindContextLength:
			f.status, f.typ, f.code = http.StatusBadRequest, "invalid_request_error", "context_length_exceeded"
		case llm.KindRateLimited:
			f.status, f.typ, f.code = http.StatusTooManyRequests, "rate_limit_error", "rate_limit_exceeded"
		case llm.KindModelNotFound:
			f.status, f.typ, f.code = http.StatusNotFound, "invalid_request_error", "model_not_found"
		default:
			f.status, f.typ, f.code = http.StatusBadGateway, "upstream_error", "upstream_"+strings.ReplaceAll(upstream.Kind.String(), " ", "_")
		}
		return f
	}
	return failed{status: http.StatusInternalServerError, typ: "server_error", message: err.Error()}
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
		if refusal := AsRefusal(err); refusal != nil {
			answerRefusal(w, refusal)
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
