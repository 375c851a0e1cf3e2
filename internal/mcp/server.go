// Package mcp serves terp's sandboxes to MCP clients (editors, desktop
// assistants, agent frameworks) on the official Go SDK: a persistent
// Python kernel per client session, charts returned as images, and files
// in and out. It is a front-end on the conversation service, like terp
// serve: each client session is one conversation, opened at its first call
// and closed (its sandbox paused) when the session ends; no model is
// involved, the client writes the code. Over HTTP a client may name its
// session itself with an x-session-id header, as vLLM's tool server client
// does; such a conversation outlives the connection, so a reconnect with
// the same id finds its state.
package mcp

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/terpdev/terp/internal/agent"
	"github.com/terpdev/terp/internal/config"
	"github.com/terpdev/terp/internal/conversation"
	"github.com/terpdev/terp/internal/sandbox"
)

// Config is what a Server is built from.
type Config struct {
	// Conversations opens a conversation per client session; it needs no
	// model.
	Conversations *conversation.Service
	// Settings are the configuration each conversation starts from.
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
}

// DefaultMaxEmbed is the largest file a result carries itself: base64 in
// JSON makes it a third larger again, and clients hold results in memory.
const DefaultMaxEmbed = 4 << 20

// Server is terp's MCP server. One Server serves any number of client
// sessions, each with its own sandbox, never shared.
type Server struct {
	cfg Config
	sdk *sdk.Server

	mu       sync.Mutex
	sessions map[*sdk.ServerSession]*session
	// named are the sandboxes of clients that name their session with
	// an x-session-id header, by sessionKey; they stay until the server
	// stops, pausing when idle like any other.
	named  map[string]*session
	closed bool
}

// SessionHeader is the HTTP header by which a client names its session
// (vLLM's tool server client sends it with every request), so that a
// reconnect finds the same sandbox.
const SessionHeader = "X-Session-Id"

// maxSessionID bounds a client's session id: it is a map key and a log
// field, not a place to store data.
const maxSessionID = 256

// session is the sandbox of one client session, opened at its first use.
type session struct {
	once sync.Once
	conv *conversation.Conversation
	err  error
}

// legacyVersions are the protocol versions served: those with the
// initialize handshake, whose sessions are what keeps a client's sandbox
// its own. Clients of the sessionless 2026-07-28 protocol fall back to
// them (as the Go SDK's does) until terp mints handles of its own.
var legacyVersions = []string{"2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"}

// New returns the server for cfg.
func New(cfg Config) *Server {
	if cfg.MaxEmbed <= 0 {
		cfg.MaxEmbed = DefaultMaxEmbed
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	s := &Server{cfg: cfg, sessions: map[*sdk.ServerSession]*session{}, named: map[string]*session{}}
	name := cfg.Name
	if name == "" {
		name = "terp"
	}
	s.sdk = sdk.NewServer(&sdk.Implementation{Name: name, Title: "terp: sandboxed Python", Version: cfg.Version}, &sdk.ServerOptions{
		Instructions:              instructions(cfg.Settings),
		Capabilities:              &sdk.ServerCapabilities{},
		SupportedProtocolVersions: legacyVersions,
	})
	s.addTools()
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
// disconnects or ctx ends.
func (s *Server) Run(ctx context.Context, t sdk.Transport) error {
	return s.sdk.Run(ctx, t)
}

// Handler serves Streamable HTTP at every path but /sse, and the legacy
// SSE transport (2024-11-05) at /sse, which vLLM's tool server client uses.
// It checks no key: the caller wraps it.
func (s *Server) Handler() http.Handler {
	get := func(*http.Request) *sdk.Server { return s.sdk }
	mux := http.NewServeMux()
	mux.Handle("/sse", sseSessionID(sdk.NewSSEHandler(get, nil)))
	mux.Handle("/", sdk.NewStreamableHTTPHandler(get, &sdk.StreamableHTTPOptions{
		Logger: s.cfg.Log,
		// A client that vanished without closing its session lets its
		// sandbox go after a day; the idle pause has long paused it.
		SessionTimeout: 24 * time.Hour,
	}))
	return mux
}

// sseKey carries the x-session-id of an SSE connection's GET from the
// request to the session's tool calls: the SDK hands SSE calls no HTTP
// header, but their contexts descend from the GET's.
type sseKey struct{}

// sseSessionID puts the x-session-id header of an SSE connection's GET
// in its context, for sessionID.
func sseSessionID(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if id := r.Header.Get(SessionHeader); r.Method == http.MethodGet && id != "" {
			r = r.WithContext(context.WithValue(r.Context(), sseKey{}, id))
		}
		h.ServeHTTP(w, r)
	})
}

// sessionKey is the key of the sandbox a call names with x-session-id
// (from its own HTTP request over Streamable HTTP, from the connection's
// GET over SSE), scoped by the bearer token's user when an authenticator
// tells one, or "" when the call names none and its transport session is
// the key.
func sessionKey(ctx context.Context, extra *sdk.RequestExtra) (string, error) {
	var id, user string
	if extra != nil {
		id = extra.Header.Get(SessionHeader)
		if extra.TokenInfo != nil {
			user = extra.TokenInfo.UserID
		}
	}
	if id == "" {
		id, _ = ctx.Value(sseKey{}).(string)
	}
	id = strings.TrimSpace(id)
	if id == "" {
		return "", nil
	}
	if len(id) > maxSessionID {
		return "", fmt.Errorf("the %s header is over %d bytes", SessionHeader, maxSessionID)
	}
	return user + "\x00" + id, nil
}

// conversation is the sandbox of a call: the one its x-session-id names,
// or else its session's, opened at first use. A session's conversation is
// closed when the session ends; a named one when the server stops.
func (s *Server) conversation(ctx context.Context, ss *sdk.ServerSession, extra *sdk.RequestExtra) (*conversation.Conversation, error) {
	key, err := sessionKey(ctx, extra)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil, errors.New("the server is stopping")
	}
	var sess *session
	if key != "" {
		sess = s.named[key]
		if sess == nil {
			sess = &session{}
			s.named[key] = sess
		}
	} else {
		sess = s.sessions[ss]
		if sess == nil {
			sess = &session{}
			s.sessions[ss] = sess
		}
	}
	s.mu.Unlock()
	sess.once.Do(func() {
		sess.conv, sess.err = s.cfg.Conversations.Open(context.WithoutCancel(ctx), s.cfg.Settings, conversation.Options{Origin: "mcp", KeepFiles: true})
		if sess.err != nil {
			s.mu.Lock()
			if key != "" {
				delete(s.named, key)
			} else {
				delete(s.sessions, ss)
			}
			s.mu.Unlock()
			return
		}
		if key != "" {
			s.cfg.Log.Info("opened a sandbox", "session_id", key[strings.IndexByte(key, 0)+1:], "conversation", sess.conv.ID)
			return
		}
		s.cfg.Log.Info("opened a sandbox", "session", ss.ID(), "conversation", sess.conv.ID)
		go func() {
			_ = ss.Wait()
			s.drop(ss)
		}()
	})
	return sess.conv, sess.err
}

// drop closes the conversation of a session that ended.
func (s *Server) drop(ss *sdk.ServerSession) {
	s.mu.Lock()
	sess := s.sessions[ss]
	delete(s.sessions, ss)
	s.mu.Unlock()
	if sess == nil || sess.conv == nil {
		return
	}
	for _, w := range sess.conv.Close(context.Background()) {
		s.cfg.Log.Warn(w, "conversation", sess.conv.ID)
	}
	s.cfg.Log.Info("closed a sandbox", "session", ss.ID(), "conversation", sess.conv.ID)
}

// Close closes every conversation, a session's or a named one, pausing its sandbox, and
// refuses new ones.
func (s *Server) Close(ctx context.Context) {
	s.mu.Lock()
	s.closed = true
	var all []*conversation.Conversation
	for ss, sess := range s.sessions {
		if sess.conv != nil {
			all = append(all, sess.conv)
		}
		delete(s.sessions, ss)
	}
	for key, sess := range s.named {
		if sess.conv != nil {
			all = append(all, sess.conv)
		}
		delete(s.named, key)
	}
	s.mu.Unlock()
	var wg sync.WaitGroup
	for _, c := range all {
		wg.Go(func() {
			for _, w := range c.Close(ctx) {
				s.cfg.Log.Warn(w, "conversation", c.ID)
			}
		})
	}
	wg.Wait()
}

// workURI is the resource URI of a file in /work.
func workURI(rel string) string { return uriPrefix + rel }

const uriPrefix = "terp://work/"

// sandboxPath is the path in the sandbox of a file relative to /work.
func sandboxPath(rel string) string { return sandbox.WorkDir + "/" + rel }
