// Package openaiapi is OpenAI's API on terp serve's host: the Responses API
// with the code_interpreter tool, containers, files, chat completions and
// the model list. An app written for OpenAI's hosted code interpreter works
// against it by changing only its base URL and key.
//
// A container is one terp conversation: its sandbox holds the files, its
// history the code and outputs. Every object (file, container, response)
// belongs to the key that made it; another key is told it does not exist.
// The host (package serve) keeps the keys, limits, containers, replicas and
// the turn runner; this package speaks OpenAI's words over them.
package openaiapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/terpdev/terp/internal/conversation"
	"github.com/terpdev/terp/internal/llm"
	"github.com/terpdev/terp/internal/serve"
	"github.com/terpdev/terp/internal/store"
)

// Options are what OpenAI's API adds to the host's settings.
type Options struct {
	// AliasSuffix makes a chat model named MODEL+AliasSuffix run the
	// code interpreter on MODEL, for clients that cannot add the tool; ""
	// means DefaultAliasSuffix.
	AliasSuffix string
	// Steps is where chat completions show the steps (code and output),
	// one of StepsModes, unless a request's terp_steps says; "" means the
	// first.
	Steps string
}

// api is OpenAI's API on one host.
type api struct {
	*serve.Server
	opts Options
}

// Register serves OpenAI's API on host.
func Register(host *serve.Server, opts Options) {
	s := &api{Server: host, opts: opts}
	host.Register(s.protocol())
}

// protocol is OpenAI's routes, keys sent as Authorization: Bearer, and its
// error object for what the host refuses.
func (s *api) protocol() serve.Protocol {
	return serve.Protocol{Name: "openai", Refuse: writeFailure, Routes: []serve.Route{
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
func answerRefusal(w http.ResponseWriter, r *serve.Refusal) {
	if r.RetryAfter > 0 {
		secs := int64(math.Ceil(r.RetryAfter.Seconds()))
		w.Header().Set("Retry-After", strconv.FormatInt(secs, 10))
		ms := (r.RetryAfter + time.Millisecond - 1) / time.Millisecond
		w.Header().Set("Retry-After-Ms", strconv.FormatInt(int64(ms), 10))
	}
	if r.Final {
		w.Header().Set("X-Should-Retry", "false")
	}
	f := failure(w, r)
	writeError(w, f.status, f.typ, f.code, f.message, "")
}

// badRequest is a 400 naming the parameter that was wrong.
func badRequest(w http.ResponseWriter, param, format string, a ...any) {
	writeError(w, http.StatusBadRequest, "invalid_request_error", "", fmt.Sprintf(format, a...), param)
}

// notFound is the 404 of an object that does not exist, or is another key's.
func notFound(w http.ResponseWriter, kind, id string) { writeFailure(w, notFoundError(kind, id)) }

func notFoundError(kind, id string) error { return &serve.NotFoundError{Kind: kind, ID: id} }

// serverError is a failure of terp's own (the sandbox, the disk): a 500
// that names an error id, the error itself only in the log.
func serverError(w http.ResponseWriter, err error) {
	writeError(w, http.StatusInternalServerError, "server_error", "", serve.Internal(w, err), "")
}

// writeFailure answers a request that err ended, before anything else was
// sent, with the status failure gives it; a refusal with its Retry-After.
func writeFailure(w http.ResponseWriter, err error) {
	if refusal := serve.AsRefusal(err); refusal != nil {
		answerRefusal(w, refusal)
		return
	}
	f := failure(w, err)
	if f.retry > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(int(f.retry.Seconds())))
	}
	writeError(w, f.status, f.typ, f.code, f.message, f.param)
}

// failed is an error as OpenAI's clients are told it.
type failed struct {
	status                    int
	typ, code, message, param string
	// retry is the Retry-After of a failure that passes by itself.
	retry time.Duration
}

// failure classifies an error that ended a request: the one classification
// of every answer, whole or streamed, turn or not. What is the client's
// doing is a 4xx, the model server's a 4xx or 502 by what it said, and
// anything else terp's own failure, a 500, whose cause only the log has
// (serve.Internal), for w's request.
func failure(w http.ResponseWriter, err error) failed {
	var perr *paramError
	var input *conversation.InputError
	var upstream *llm.Error
	var missing *serve.NotFoundError
	var unauthorized *serve.UnauthorizedError
	var stopped *serve.StoppedError
	var unavailable *serve.UnavailableError
	switch {
	case errors.As(err, &stopped):
		return failed{status: http.StatusServiceUnavailable, typ: "server_error", code: "server_stopping", message: err.Error(), retry: 5 * time.Second}
	case errors.As(err, &unavailable):
		return failed{status: http.StatusServiceUnavailable, typ: "server_error", code: "replica_unavailable", message: err.Error(), retry: time.Second}
	case errors.As(err, &unauthorized):
		return failed{status: http.StatusUnauthorized, typ: "invalid_request_error", code: "invalid_api_key", message: err.Error()}
	case errors.As(err, &missing):
		return failed{status: http.StatusNotFound, typ: "invalid_request_error", code: "not_found", message: missing.Error()}
	case serve.AsRefusal(err) != nil:
		// OpenAI's rate limits name what ran out in the error's type.
		r := serve.AsRefusal(err)
		f := failed{status: r.Status, typ: r.Kind, code: "rate_limit_exceeded", message: r.Message}
		switch r.Kind {
		case serve.RefusedSize:
			f.typ, f.code = "invalid_request_error", "request_too_large"
		case serve.RefusedTimeout:
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
	return failed{status: http.StatusInternalServerError, typ: "server_error", message: serve.Internal(w, err)}
}

func writeJSON(w http.ResponseWriter, status int, v any) { serve.WriteJSON(w, status, v) }

// decode reads a JSON request body into v, refusing what is not JSON or is
// too large (Handler bounds every body), with a message that says so.
// Handler keeps the body for a forward (replayable).
func decode(w http.ResponseWriter, r *http.Request, v any) bool {
	b, err := io.ReadAll(r.Body)
	if err == nil {
		err = json.Unmarshal(b, v)
	}
	if err != nil {
		if refusal := serve.AsRefusal(err); refusal != nil {
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

// tokenMeter reads the usage an answer passed through from upstream
// reports, for Limits.TokensPerDay: a completion's usage, or in a stream
// the chunk that carries it (sent with stream_options.include_usage). An
// answer that reports none counts nothing.
type tokenMeter struct {
	stream bool
	// buf is the whole answer, or the stream's line being read; past
	// serve.MaxUpstreamBody it is dropped, unread.
	buf      []byte
	overflow bool
	used     llm.Usage
}

func newTokenMeter(contentType string) *tokenMeter {
	return &tokenMeter{stream: strings.HasPrefix(contentType, "text/event-stream")}
}

func (m *tokenMeter) Write(p []byte) (int, error) {
	if !m.stream {
		m.keep(p)
		return len(p), nil
	}
	for rest := p; len(rest) > 0; {
		line, more, found := bytes.Cut(rest, []byte("\n"))
		m.keep(line)
		if !found {
			break
		}
		m.line()
		rest = more
	}
	return len(p), nil
}

func (m *tokenMeter) keep(p []byte) {
	if m.overflow || len(m.buf)+len(p) > serve.MaxUpstreamBody {
		m.buf, m.overflow = nil, true
		return
	}
	m.buf = append(m.buf, p...)
}

// line reads a stream's line that ended: a data line with the usage.
func (m *tokenMeter) line() {
	data, ok := bytes.CutPrefix(bytes.TrimSpace(m.buf), []byte("data:"))
	if ok && !m.overflow && bytes.Contains(data, []byte(`"usage"`)) {
		m.read(data)
	}
	m.buf, m.overflow = m.buf[:0], false
}

func (m *tokenMeter) read(b []byte) {
	var chunk struct {
		Usage *llm.Usage `json:"usage"`
	}
	if json.Unmarshal(b, &chunk) == nil && chunk.Usage != nil {
		m.used = *chunk.Usage
	}
}

// tokens are the prompt and completion tokens the answer reported.
func (m *tokenMeter) tokens() int64 {
	if !m.stream && !m.overflow {
		m.read(m.buf)
	}
	return int64(m.used.PromptTokens + m.used.CompletionTokens)
}
