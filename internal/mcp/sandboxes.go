package mcp

import (
	"context"
	"crypto/rand"
	"encoding/base32"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/terpdev/terp/internal/conversation"
)

// Which sandbox a call uses, first that applies:
//
//  1. the one its "sandbox" argument names: a handle terp minted and gave
//     in an earlier result;
//  2. the one its x-session-id header names (vLLM's tool server sends it);
//  3. over sessionless HTTP (protocol 2026-07-28, which has no sessions), a
//     new one with a new handle, which the result gives: python and
//     upload_file make one, the other tools need the handle;
//  4. its MCP session's (stdio, or a Streamable HTTP or SSE session).
//
// Handles and ids are scoped by the user the bearer token names, when an
// authenticator tells one. The sandboxes of 1 to 3 are kept until they have
// been idle for ExpireAfter; those of 4 until their session ends.

// session is one sandbox, opened at its first use.
type session struct {
	once sync.Once
	conv *conversation.Conversation
	err  error

	// Guarded by Server.mu: the calls using the sandbox now, and the timer
	// that expires it once there are none (named sandboxes only).
	calls  int
	expiry *time.Timer
}

// box is the sandbox a call got, for the length of the call.
type box struct {
	conv *conversation.Conversation
	// handle is the handle that names it ("" when the session does), and
	// minted tells that this call made it.
	handle string
	minted bool
	done   func()
}

// handlePrefix starts every handle terp mints.
const handlePrefix = "sbx_"

// newHandle returns a handle no one can guess: 128 random bits.
func newHandle() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b) // never fails (crypto/rand)
	return handlePrefix + strings.ToLower(base32.StdEncoding.WithPadding(base32.NoPadding).EncodeToString(b))
}

// errNoSandbox is a sessionless call that names no sandbox and may not make
// one.
var errNoSandbox = errors.New(`this call names no sandbox: pass "sandbox" with the handle a python or ` +
	`upload_file result gave (this client speaks MCP without sessions, so nothing else ties its calls together)`)

// statelessKey marks the context of a sessionless HTTP request.
type statelessKey struct{}

// sseKey carries the x-session-id of an SSE connection's GET from the
// request to the session's tool calls: the SDK hands SSE calls no HTTP
// header, but their contexts descend from the GET's.
type sseKey struct{}

// sseSessionID puts the x-session-id header of an SSE connection's GET
// in its context, for ref.
func sseSessionID(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if id := r.Header.Get(SessionHeader); r.Method == http.MethodGet && id != "" {
			r = r.WithContext(context.WithValue(r.Context(), sseKey{}, id))
		}
		h.ServeHTTP(w, r)
	})
}

// ref is the key in Server.named of the sandbox a call names, the handle it
// names (or is to be minted: mint), or "" for its session's sandbox.
func ref(ctx context.Context, extra *sdk.RequestExtra, handle string) (key, name string, mint bool, err error) {
	var id, user string
	if extra != nil {
		id = extra.Header.Get(SessionHeader)
		if extra.TokenInfo != nil {
			user = extra.TokenInfo.UserID
		}
	}
	if handle = strings.TrimSpace(handle); handle != "" {
		if !strings.HasPrefix(handle, handlePrefix) || len(handle) > maxSessionID {
			return "", "", false, fmt.Errorf("%q is not a sandbox handle: give the handle (%s...) an earlier result gave, "+
				`or leave "sandbox" out`, handle, handlePrefix)
		}
		return user + "\x00" + handle, handle, false, nil
	}
	if id == "" {
		id, _ = ctx.Value(sseKey{}).(string)
	}
	if id = strings.TrimSpace(id); id != "" {
		if len(id) > maxSessionID {
			return "", "", false, fmt.Errorf("the %s header is over %d bytes", SessionHeader, maxSessionID)
		}
		return user + "\x00id:" + id, "", false, nil
	}
	if stateless, _ := ctx.Value(statelessKey{}).(bool); stateless {
		name = newHandle()
		return user + "\x00" + name, name, true, nil
	}
	return "", "", false, nil
}

// use opens (at first use) the sandbox of a call, given its "sandbox"
// argument; may says the call may make one. The caller calls done when
// the call is over.
func (s *Server) use(ctx context.Context, ss *sdk.ServerSession, extra *sdk.RequestExtra, handle string, may bool) (*box, error) {
	key, name, mint, err := ref(ctx, extra, handle)
	if err != nil {
		return nil, err
	}
	if mint && !may {
		return nil, errNoSandbox
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil, errors.New("the server is stopping")
	}
	var sess *session
	switch {
	case key == "":
		sess = s.sessions[ss]
		if sess == nil {
			sess = &session{}
			s.sessions[ss] = sess
		}
	case mint:
		sess = &session{}
		s.named[key] = sess
	default:
		sess = s.named[key]
		if sess == nil && name != "" {
			s.mu.Unlock()
			return nil, fmt.Errorf("there is no sandbox %s here: it expired after %s without calls, or terp mcp "+
				`restarted since. Leave "sandbox" out to get a new one (its variables and files are not those of the old)`,
				name, s.cfg.ExpireAfter)
		}
		if sess == nil {
			sess = &session{}
			s.named[key] = sess
		}
	}
	sess.calls++
	if sess.expiry != nil {
		sess.expiry.Stop()
		sess.expiry = nil
	}
	s.busy.Add(1)
	s.mu.Unlock()

	sess.once.Do(func() { s.open(ctx, ss, key, sess) })
	s.busy.Done()
	done := func() { s.release(key, sess) }
	if sess.err != nil {
		done()
		return nil, sess.err
	}
	return &box{conv: sess.conv, handle: name, minted: mint, done: done}, nil
}

// open opens the conversation of sess, the sandbox key names (or, for "",
// ss's), and for a session's sandbox closes it when the session ends.
func (s *Server) open(ctx context.Context, ss *sdk.ServerSession, key string, sess *session) {
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
		name := key[strings.IndexByte(key, 0)+1:]
		if id, ok := strings.CutPrefix(name, "id:"); ok {
			s.cfg.Log.Info("opened a sandbox", "session_id", id, "conversation", sess.conv.ID)
		} else {
			// Not the handle: with the token, it is the key to the sandbox.
			s.cfg.Log.Info("opened a sandbox", "named_by", "handle", "conversation", sess.conv.ID)
		}
		return
	}
	s.cfg.Log.Info("opened a sandbox", "session", ss.ID(), "conversation", sess.conv.ID)
	go func() {
		_ = ss.Wait()
		s.drop(ss)
	}()
}

// release ends a call's use of sess; the last call of a named sandbox sets
// it to expire after ExpireAfter.
func (s *Server) release(key string, sess *session) {
	s.mu.Lock()
	defer s.mu.Unlock()
	sess.calls--
	if key == "" || sess.calls > 0 || s.closed || s.named[key] != sess {
		return
	}
	sess.expiry = time.AfterFunc(s.cfg.ExpireAfter, func() { s.expire(key, sess) })
}

// expire closes a named sandbox that has had no call for ExpireAfter.
func (s *Server) expire(key string, sess *session) {
	s.mu.Lock()
	if s.closed || sess.calls > 0 || s.named[key] != sess {
		s.mu.Unlock()
		return
	}
	delete(s.named, key)
	s.busy.Add(1)
	s.mu.Unlock()
	s.let(sess, "expired a sandbox", "idle", s.cfg.ExpireAfter)
}

// drop closes the conversation of a session that ended. Once the server
// is closed, Close does.
func (s *Server) drop(ss *sdk.ServerSession) {
	s.mu.Lock()
	sess := s.sessions[ss]
	if s.closed || sess == nil {
		s.mu.Unlock()
		return
	}
	delete(s.sessions, ss)
	s.busy.Add(1)
	s.mu.Unlock()
	s.let(sess, "closed a sandbox", "session", ss.ID())
}

// let closes the conversation of sess, which the caller took out of its
// map under mu, adding to busy, and logs msg with attrs.
func (s *Server) let(sess *session, msg string, attrs ...any) {
	defer s.busy.Done()
	if sess.conv == nil {
		return
	}
	for _, w := range sess.conv.Close(context.Background()) {
		s.cfg.Log.Warn(w, "conversation", sess.conv.ID)
	}
	s.cfg.Log.Info(msg, append(attrs, "conversation", sess.conv.ID)...)
}

// Close closes every conversation, a session's or a named one, pausing its
// sandbox, and refuses new ones. It waits for the opens, drops and
// expiries under way first, so that none is left half done.
func (s *Server) Close(ctx context.Context) {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	s.busy.Wait()
	s.mu.Lock()
	var all []*conversation.Conversation
	for ss, sess := range s.sessions {
		if sess.conv != nil {
			all = append(all, sess.conv)
		}
		delete(s.sessions, ss)
	}
	for key, sess := range s.named {
		if sess.expiry != nil {
			sess.expiry.Stop()
		}
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
