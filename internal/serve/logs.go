package serve

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/http"
	"time"

	"github.com/terpdev/terp/internal/agent"
	"github.com/terpdev/terp/internal/conversation"
)

// RequestIDHeader carries a request's id: the client's own when it sends a
// sane one (a proxy's, say), else one terp makes. The answer always carries
// it, and so does every log line about the request, so that a user's
// complaint leads to its lines.
const RequestIDHeader = "X-Request-Id"

// maxLoggedBody bounds the part of a request body that Config.LogDebug
// logs.
const maxLoggedBody = 64 << 10

// requestInfo is what the log and the metrics learn about a request while
// it is served.
type requestInfo struct {
	id string
	// owner is the key's name, once the key was checked.
	owner string
}

type requestInfoKey struct{}

// infoOf is the request's info; nil outside a request.
func infoOf(ctx context.Context) *requestInfo {
	info, _ := ctx.Value(requestInfoKey{}).(*requestInfo)
	return info
}

// noteOwner records whose key the request carries, for its log line.
func noteOwner(r *http.Request, owner string) {
	if info := infoOf(r.Context()); info != nil {
		info.owner = owner
	}
}

// requestID is the client's id when it is sane (1 to 128 letters, digits
// and ".-_:", nothing that could break a log line), else a new one.
func requestID(given string) string {
	if len(given) == 0 || len(given) > 128 {
		return NewID("req_")
	}
	for _, r := range given {
		ok := r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '-' || r == '_' || r == ':'
		if !ok {
			return NewID("req_")
		}
	}
	return given
}

// requestLog adds the request id of the context a line is logged with, so
// that every line about a request carries it without each call saying so.
type requestLog struct{ slog.Handler }

func (h requestLog) Handle(ctx context.Context, rec slog.Record) error {
	if info := infoOf(ctx); info != nil {
		rec.AddAttrs(slog.String("request_id", info.id))
	}
	return h.Handler.Handle(ctx, rec)
}

func (h requestLog) WithAttrs(attrs []slog.Attr) slog.Handler {
	return requestLog{h.Handler.WithAttrs(attrs)}
}

func (h requestLog) WithGroup(name string) slog.Handler { return requestLog{h.Handler.WithGroup(name)} }

// observe gives each request its id, and when it has been answered counts
// it and logs one line: method, route, status, duration and the key's name.
// What the client sent (its key, prompts, code, data) is logged only with
// Config.LogDebug, at debug level.
func (s *Server) observe(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		info := &requestInfo{id: requestID(r.Header.Get(RequestIDHeader))}
		w.Header().Set(RequestIDHeader, info.id)
		// The route is the pattern that serves the request, never its
		// path: ids in paths would make a series per object.
		rt, route := s.lookupRoute(r)
		if route == "" {
			route = "unmatched"
		}
		ctx := context.WithValue(r.Context(), requestInfoKey{}, info)
		req := r.WithContext(ctx)
		// A request forwarded to another replica carries its id there.
		req.Header = r.Header.Clone()
		req.Header.Set(RequestIDHeader, info.id)
		var body *bodyCopy
		if s.cfg.LogDebug && r.Body != nil {
			body = &bodyCopy{ReadCloser: r.Body}
			req.Body = body
		}
		sw := &statusWriter{ResponseWriter: w, status: http.StatusOK, ctx: ctx, log: s.cfg.Log}
		next.ServeHTTP(sw, req)
		d := time.Since(start)
		s.metrics.request(route, sw.status, d)
		level := slog.LevelInfo
		switch {
		case sw.status >= 500:
			level = slog.LevelWarn
		case rt != nil && rt.Public:
			level = slog.LevelDebug // a probe every few seconds is no news
		}
		s.cfg.Log.LogAttrs(ctx, level, "request", slog.String("method", r.Method), slog.String("route", route),
			slog.Int("status", sw.status), slog.Duration("duration", d), slog.String("key_name", info.owner))
		if body != nil {
			s.cfg.Log.LogAttrs(ctx, slog.LevelDebug, "request content", slog.String("uri", r.URL.RequestURI()),
				slog.String("authorization", r.Header.Get("Authorization")), slog.String("body", body.buf.String()))
		}
	})
}

// bodyCopy keeps the start of what is read of a request body, for the
// debug log.
type bodyCopy struct {
	io.ReadCloser
	buf bytes.Buffer
}

func (b *bodyCopy) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if room := maxLoggedBody - b.buf.Len(); room > 0 {
		b.buf.Write(p[:min(n, room)])
	}
	return n, err
}

// observeTurn wraps a turn's send function so that each run of code is
// counted and logged as it ends: its container, result, exit code and
// duration; its code and output only with Config.LogDebug.
func (s *Server) observeTurn(ctx context.Context, c *Container, send func(agent.Event)) func(agent.Event) {
	return func(e agent.Event) {
		switch e := e.(type) {
		case agent.ToolCall:
			if s.cfg.LogDebug && e.Name == agent.ToolName {
				s.cfg.Log.DebugContext(ctx, "code", "container", c.ID, "code", e.Code)
			}
		case agent.ToolOutput:
			s.observeRun(ctx, c, e)
		}
		send(e)
	}
}

// observeRun counts and logs one run of code, a model's or a client's, as
// it ends: its container, result, exit code and duration; its output only
// with Config.LogDebug.
func (s *Server) observeRun(ctx context.Context, c *Container, e agent.ToolOutput) {
	s.metrics.run(e)
	attrs := []slog.Attr{slog.String("container", c.ID), slog.String("result", runResult(e)),
		slog.Int("exit_code", e.ExitCode), slog.Duration("duration", e.Duration)}
	if s.cfg.LogDebug {
		attrs = append(attrs, slog.String("stdout", e.Stdout), slog.String("stderr", e.Stderr), slog.String("error", e.Error))
	}
	s.cfg.Log.LogAttrs(ctx, slog.LevelInfo, "code run", attrs...)
}

// turnDone counts the tokens a finished turn used under the key's name,
// and logs a failure of terp's own that ended it.
func (s *Server) turnDone(ctx context.Context, owner string, turn conversation.Turn, err error) {
	s.metrics.turn(owner, turn.Result.Usage, err)
	if serverFailure(err) {
		s.cfg.Log.WarnContext(ctx, "turn failed", "error", err)
	}
}

// WithRequestID is ctx with id as its request's, for the log lines of work
// that runs in a context other than its request's: the calls of an MCP
// session run in the context of the request that opened the session, but
// each comes in a request of its own, whose id Handler sets in its
// RequestIDHeader. "" leaves ctx as it is.
func WithRequestID(ctx context.Context, id string) context.Context {
	if id == "" {
		return ctx
	}
	info := &requestInfo{id: id}
	if old := infoOf(ctx); old != nil {
		info.owner = old.owner
	}
	return context.WithValue(ctx, requestInfoKey{}, info)
}
