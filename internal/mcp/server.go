// Package mcp serves terp's sandboxes to MCP clients (editors, desktop
// assistants, agent frameworks) on the official Go SDK: a persistent
// Python kernel per client session, charts returned as images, and files
// in and out. No model is involved, the client writes the code.
//
// It is a protocol on terp serve's host (serve.Server), as OpenAI's API
// is: each sandbox is a host container (one conversation, origin mcp),
// made at its first call, leased for each call, and removed when its
// session ends or, when a handle or an x-session-id names it (a stdio
// session's has a handle), once unused for ExpireAfter, across restarts
// (its conversation closed and kept for terp sessions); the
// python tool runs its code on the host's exec path, counted and logged
// as any run. Over HTTP (Protocol) the host checks each request's key,
// bounds its body, logs and counts it, and the principal the key names
// owns the sandboxes of its calls; over stdio the host serves no HTTP and
// every sandbox is the principal "local"'s. Over HTTP a client may name
// its sandbox itself with an x-session-id header, as vLLM's tool server
// client does; such a sandbox outlives the connection, so a reconnect with
// the same id finds its state.
package mcp

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/terpdev/terp/internal/agent"
	"github.com/terpdev/terp/internal/config"
	"github.com/terpdev/terp/internal/sandbox"
	"github.com/terpdev/terp/internal/serve"
)

// Config is what a Server is built from.
type Config struct {
	// Host holds the sandboxes, as its containers, and runs their code;
	// over HTTP it serves Protocol. Its conversation service needs no
	// model. The caller closes it after the Server.
	Host *serve.Server
	// Settings are the configuration each sandbox starts from: the Host's
	// own, whose network each container keeps (see spec).
	Settings *config.Config
	// Name is the server's name in initialize (serverInfo.name); "" means
	// "terp". vLLM's --tool-server registers a server's tools under this
	// name, and gpt-oss's built-in python tool is looked up as "python".
	Name string
	// Version is terp's, told to clients.
	Version string
	// Log receives what the server says of its sessions; nil logs nothing.
	Log *slog.Logger
	// MaxEmbed bounds a file sent inside a result (download_file's
	// embedded resource, a chart's image); a larger one comes as a link to
	// read with resources/read. Zero means DefaultMaxEmbed.
	MaxEmbed int64
	// ExpireAfter is how long a sandbox a call names (by x-session-id or
	// handle) is kept without calls, and an idle HTTP session lasts; then
	// its container is removed. Zero means DefaultExpireAfter.
	ExpireAfter time.Duration
}

// DefaultMaxRequest is the largest HTTP request body terp mcp's host takes
// by default (its Caps.Request): an upload_file of about 48 MiB as base64.
const DefaultMaxRequest = 64 << 20

// DefaultExpireAfter is how long an unused sandbox is kept by default.
const DefaultExpireAfter = 24 * time.Hour

// DefaultMaxEmbed is the largest file a result carries itself: base64 in
// JSON makes it a third larger again, and clients hold results in memory.
const DefaultMaxEmbed = 4 << 20

// Server is terp's MCP server. One Server serves any number of client
// sessions, each with its own sandbox, never shared.
type Server struct {
	cfg Config
	sdk *sdk.Server

	mu       sync.Mutex
	sessions map[*sdk.ServerSession]*container
	// named are the sandboxes a call names itself, with an x-session-id
	// header or a handle the server minted, by their key (see ref); each
	// stays until it has been idle for ExpireAfter, pausing when idle like
	// any other.
	named map[string]*container
	// stdio are the handles of stdio sessions' sandboxes (see stdioRef).
	stdio  map[*sdk.ServerSession]string
	closed bool
	// busy counts what makes or removes a container outside mu (an open,
	// a session's drop, an expiry): Close waits for it, so that nothing is
	// made after it nor left half removed when it returns. Added to under
	// mu while not closed.
	busy sync.WaitGroup
}

// SessionHeader is the HTTP header by which a client names its session
// (vLLM's tool server client sends it with every request), so that a
// reconnect finds the same sandbox.
const SessionHeader = "X-Session-Id"

// maxSessionID bounds a client's session id: it is a map key and a log
// field, not a place to store data.
const maxSessionID = 256

// sessionless is the first protocol version without sessions (SEP-2567):
// over HTTP its clients keep a sandbox by the handle terp mints.
const sessionless = "2026-07-28"

// New returns the server for cfg.
func New(cfg Config) *Server {
	if cfg.MaxEmbed <= 0 {
		cfg.MaxEmbed = DefaultMaxEmbed
	}
	if cfg.ExpireAfter <= 0 {
		cfg.ExpireAfter = DefaultExpireAfter
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	s := &Server{cfg: cfg, sessions: map[*sdk.ServerSession]*container{}, named: map[string]*container{},
		stdio: map[*sdk.ServerSession]string{}}
	name := cfg.Name
	if name == "" {
		name = "terp"
	}
	s.sdk = sdk.NewServer(&sdk.Implementation{Name: name, Title: "terp: sandboxed Python", Version: cfg.Version}, &sdk.ServerOptions{
		Instructions: instructions(cfg.Settings),
		Capabilities: &sdk.ServerCapabilities{},
	})
	s.addTools()
	s.restore()
	return s
}

// instructions describe the sandbox to the client's model: where files
// are, what is installed, what the code may reach, how long things last.
func instructions(cfg *config.Config) string {
	var b strings.Builder
	b.WriteString("terp runs Python 3 for you in an isolated sandbox (bubblewrap, Docker or a remote " +
		"sandbox, as the server is configured) with a persistent kernel, like a notebook: variables, " +
		"imports and functions survive between calls of the python tool (run_python is the same tool " +
		"under another name) until reset. The working directory is /work; files you upload with " +
		"upload_file land there, and files the code saves there can be fetched with download_file " +
		"or read as resources (terp://work/PATH). numpy, pandas and matplotlib are installed; a " +
		"matplotlib figure left open or shown with plt.show() is saved as a PNG in /work and comes " +
		"back as an image, as does any PNG, JPEG, GIF or SVG the code saves. ")
	b.WriteString(agent.NetworkSentence(cfg.NetworkPolicy()))
	fmt.Fprintf(&b, " Each call may run for %s; a call that runs longer is stopped, and its output so far is returned.", cfg.Timeout)
	if cfg.IdlePause > 0 {
		fmt.Fprintf(&b, " After %s without calls the sandbox is paused: files are kept, variables are lost.", cfg.IdlePause)
	}
	b.WriteString(" Each client session has its own sandbox, never shared with another.")
	return b.String()
}

// Run serves one client on t (stdio: the process's one session) until it
// disconnects or ctx ends. Its sandbox is the principal "local"'s.
func (s *Server) Run(ctx context.Context, t sdk.Transport) error {
	return s.sdk.Run(withOwner(context.WithValue(ctx, stdioKey{}, true), localOwner), t)
}

// Protocol is MCP over HTTP, for the Host to serve (serve.Server.Register):
// Streamable HTTP at every path but /sse, and the legacy SSE transport
// (2024-11-05) at /sse, which vLLM's tool server client uses. A Streamable
// HTTP request of the sessionless protocol (its Mcp-Protocol-Version header
// says 2026-07-28 or later) is served without a session, the SDK's
// stateless way; the others with one. The host checks every request's
// bearer token first, and bounds its body (Caps.Request); the principal
// it names owns the sandboxes of the request's calls, and of the session
// it opens.
func (s *Server) Protocol() serve.Protocol {
	get := func(*http.Request) *sdk.Server { return s.sdk }
	// The host bounds the bodies: the SDK is told the same bound, so that
	// both refuse alike (hostBody).
	limit := s.cfg.Host.Caps().Request
	sessions := sdk.NewStreamableHTTPHandler(get, &sdk.StreamableHTTPOptions{
		Logger: s.cfg.Log,
		// A client that vanished without closing its session lets its
		// sandbox go when it expires; the idle pause has long paused it.
		SessionTimeout:      s.cfg.ExpireAfter,
		MaxRequestBodyBytes: limit,
	})
	stateless := sdk.NewStreamableHTTPHandler(get, &sdk.StreamableHTTPOptions{Logger: s.cfg.Log, Stateless: true,
		MaxRequestBodyBytes: limit})
	sse := sseSessionID(sdk.NewSSEHandler(get, &sdk.SSEOptions{MaxRequestBodyBytes: limit}))
	streamable := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if v := r.Header.Get("Mcp-Protocol-Version"); v >= sessionless {
			stateless.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), statelessKey{}, true)))
			return
		}
		sessions.ServeHTTP(w, r)
	})
	return serve.Protocol{Name: "mcp", Routes: []serve.Route{
		{Pattern: "/", Handler: s.behindHost(streamable, limit)},
		{Pattern: "/sse", Handler: s.behindHost(sse, limit)},
	}, KeyIn: "Authorization: Bearer with the server's TERP_MCP_TOKEN", Refuse: refuse}
}

// behindHost passes a request the host let through to h, with its
// principal for the calls it carries, and its body's bound said as the SDK
// understands it.
func (s *Server) behindHost(h http.Handler, limit int64) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		r = r.WithContext(withOwner(r.Context(), serve.Owner(r)))
		if r.Body != nil && r.Body != http.NoBody {
			r.Body = hostBody{ReadCloser: r.Body, limit: limit}
		}
		h.ServeHTTP(w, r)
	}
}

// hostBody is a request body the host bounds. Past its bound its error is
// the host's refusal, which the SDK's handlers would answer as a bad
// request; as the *http.MaxBytesError they look for, they answer 413, as
// the host does a body it knows is too large before reading it.
type hostBody struct {
	io.ReadCloser
	limit int64
}

func (b hostBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if r := serve.AsRefusal(err); r != nil && r.Kind == serve.RefusedSize {
		err = &http.MaxBytesError{Limit: b.limit}
	}
	return n, err
}

// refuse answers a request the host turned away as terp mcp always has:
// in plain text, with the challenge of a bearer token for a missing or
// wrong one.
func refuse(w http.ResponseWriter, err error) {
	var unauthorized *serve.UnauthorizedError
	if errors.As(err, &unauthorized) {
		w.Header().Set("WWW-Authenticate", `Bearer realm="terp mcp"`)
		http.Error(w, "send "+unauthorized.Where, http.StatusUnauthorized)
		return
	}
	status := http.StatusInternalServerError
	if r := serve.AsRefusal(err); r != nil {
		status = r.Status
		if r.RetryAfter > 0 {
			w.Header().Set("Retry-After", strconv.Itoa(int(math.Ceil(r.RetryAfter.Seconds()))))
		}
	}
	http.Error(w, err.Error(), status)
}

// workURI is the resource URI of the file rel in /work, of the sandbox
// handle names or, for "", of the caller's session.
func workURI(rel, handle string) string {
	uri := uriPrefix + escapePath(rel)
	if handle != "" {
		uri += "?sandbox=" + url.QueryEscape(handle)
	}
	return uri
}

const uriPrefix = "terp://work/"

// sandboxPath is the path in the sandbox of a file relative to /work.
func sandboxPath(rel string) string { return sandbox.WorkDir + "/" + rel }
