package mcp

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base32"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"net/http"
	"strings"
	"sync"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/terpdev/terp/internal/conversation"
	"github.com/terpdev/terp/internal/serve"
)

// Which sandbox a call uses, first that applies:
//
//  1. the one its "sandbox" argument names: a handle terp minted and gave
//     in an earlier result;
//  2. the one its x-session-id header names (vLLM's tool server sends it);
//  3. over sessionless HTTP (protocol 2026-07-28, which has no sessions), a
//     new one with a new handle, which the result gives: python and
//     upload_file make one, the other tools need the handle;
//  4. its MCP session's (a Streamable HTTP or SSE session);
//  5. over stdio, the one a handle minted for the session names (see
//     stdioRef), which outlives the session as 1 does.
//
// Handles and ids are scoped by the principal the host's key ring took the
// request for (see ownerOf). The sandboxes of 1 to 3 and 5 are kept until
// they have been idle for ExpireAfter, across restarts of terp mcp; those
// of 4 until their session ends.
//
// The sandboxes of 1 to 3 and 5 are named sandboxes: Server.named has them
// by a digest of their owner and name (handle or id), and their container's
// record keeps the same digest (ContainerSpec.Ref), never the handle. Close
// leaves them paused on the host, their records kept; the next terp mcp on
// the same data directory finds them by the digest (restore), and a call
// naming one resumes it from its record: files kept, Python restarted.
//
// Every sandbox is a container of the host (serve.Server): made with
// CreateContainer at its first call, leased for the length of each call
// (Acquire), so that no expiry removes it mid-call, and removed with
// RemoveContainer when it ends, its conversation closed and kept
// (ContainerSpec.KeepConversation) for terp sessions.
//
// Expiry stays here, one timer per named sandbox: --expire-after is a
// duration (a test waits one second) where a container record's expiry
// counts whole minutes and is looked for every 30 s, and when a handle
// expires the server must forget it and say so (the log, the error of a
// later call), which the host's expiry would do unseen. A restored sandbox's
// timer counts from its record's LastActive. The record's Minutes
// (ExpireAfter rounded up) are a backstop, for the records of a session's
// sandbox that a killed terp mcp left. A session's sandbox lasts as long as
// its session, however idle (an stdio client may sit for days): the session
// holds a lease on it throughout, which the host's expiry never passes.

// container is one sandbox: a host container, made at its first use.
type container struct {
	once sync.Once
	// owner and id name it on the host, once made, and conversation is
	// its conversation's id; err is why it could not be made.
	owner, id, conversation string
	err                     error
	// hold is a session's sandbox's lease for the length of the session.
	hold *serve.Lease
	// restored is a named sandbox an earlier terp mcp kept, found again
	// at start (restore); its first call resumes it.
	restored bool

	// Guarded by Server.mu: the calls using the sandbox now, and the timer
	// that expires it once there are none (named sandboxes only).
	calls  int
	expiry *time.Timer
}

// box is the sandbox a call got, for the length of the call.
type box struct {
	// lease holds the container for the call; conv is its conversation.
	lease *serve.Lease
	conv  *conversation.Conversation
	// handle is the handle that names it ("" when the session does),
	// minted tells that this call made it, and session that the handle is
	// a stdio session's (see stdioRef).
	handle          string
	minted, session bool
	done            func()
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

// errStopping is a call after Close.
var errStopping = errors.New("the server is stopping")

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

// ownerKey carries the principal of an HTTP request, as the host's key
// ring found it, to the calls of the session it opens (their contexts
// descend from its).
type ownerKey struct{}

// localOwner owns the sandboxes of a call no key ring looked at (stdio),
// as it owns those of a host without keys.
const localOwner = "local"

func withOwner(ctx context.Context, owner string) context.Context {
	return context.WithValue(ctx, ownerKey{}, owner)
}

// ownerOf is the principal a call is made for: it owns the call's sandbox
// on the host, and scopes the handles and ids that name one.
func ownerOf(ctx context.Context) string {
	if o, _ := ctx.Value(ownerKey{}).(string); o != "" {
		return o
	}
	return localOwner
}

// sandboxRef is which sandbox a call names.
type sandboxRef struct {
	// key is its key in Server.named (see refKey); "" names the call's
	// session's sandbox.
	key string
	// handle is the handle that names it, or is to be minted (mint);
	// sessionID the x-session-id that names it.
	handle, sessionID string
	mint              bool
	// session says the handle is the one a stdio session's calls use
	// when they name none (see stdioRef).
	session bool
}

// refKey is the key of owner's sandbox that a handle or an x-session-id
// (kind) names: a digest, so that the map of them that container records
// keep on disk (ContainerSpec.Ref) gives no handle away, and names no
// sandbox of another owner's.
func refKey(owner, kind, name string) string {
	sum := sha256.Sum256([]byte("terp mcp sandbox\x00" + owner + "\x00" + kind + "\x00" + name))
	return hex.EncodeToString(sum[:])
}

// ref is the sandbox a call of owner's names, with its handle argument.
func ref(ctx context.Context, owner string, extra *sdk.RequestExtra, handle string) (sandboxRef, error) {
	var id string
	if extra != nil {
		id = extra.Header.Get(SessionHeader)
	}
	if handle = strings.TrimSpace(handle); handle != "" {
		if !strings.HasPrefix(handle, handlePrefix) || len(handle) > maxSessionID {
			return sandboxRef{}, fmt.Errorf("%q is not a sandbox handle: give the handle (%s...) an earlier result gave, "+
				`or leave "sandbox" out`, handle, handlePrefix)
		}
		return sandboxRef{key: refKey(owner, "handle", handle), handle: handle}, nil
	}
	if id == "" {
		id, _ = ctx.Value(sseKey{}).(string)
	}
	if id = strings.TrimSpace(id); id != "" {
		if len(id) > maxSessionID {
			return sandboxRef{}, fmt.Errorf("the %s header is over %d bytes", SessionHeader, maxSessionID)
		}
		return sandboxRef{key: refKey(owner, "id", id), sessionID: id}, nil
	}
	if stateless, _ := ctx.Value(statelessKey{}).(bool); stateless {
		handle = newHandle()
		return sandboxRef{key: refKey(owner, "handle", handle), handle: handle, mint: true}, nil
	}
	return sandboxRef{}, nil
}

// use opens (at first use) the sandbox of a call, given its "sandbox"
// argument, and leases it for the call; may says the call may make one.
// The caller calls done when the call is over.
func (s *Server) use(ctx context.Context, ss *sdk.ServerSession, extra *sdk.RequestExtra, handle string, may bool) (*box, error) {
	owner := ownerOf(ctx)
	r, err := ref(ctx, owner, extra, handle)
	if err != nil {
		return nil, err
	}
	if r.key == "" && isStdio(ctx) {
		r = s.stdioRef(ss, owner)
	}
	key, name, mint := r.key, r.handle, r.mint
	if mint && !may {
		return nil, errNoSandbox
	}
	made := mint
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil, errStopping
	}
	var c *container
	switch {
	case key == "":
		c = s.sessions[ss]
		if c == nil {
			c = &container{}
			s.sessions[ss] = c
		}
	case mint:
		c = &container{}
		s.named[key] = c
	default:
		c = s.named[key]
		if c == nil && name != "" && !r.session {
			s.mu.Unlock()
			return nil, s.expiredError(name)
		}
		if c == nil {
			c = &container{}
			s.named[key] = c
			made = r.session
		}
	}
	c.calls++
	if c.expiry != nil {
		c.expiry.Stop()
		c.expiry = nil
	}
	s.busy.Add(1)
	s.mu.Unlock()

	c.once.Do(func() { s.open(ctx, ss, r, owner, c) })
	s.busy.Done()
	if c.err != nil {
		s.release(key, c)
		return nil, c.err
	}
	l, err := s.cfg.Host.Acquire(ctx, c.owner, c.id)
	if err == nil && l == nil {
		// The host no longer has it: Close removed it, or the host's
		// backstop expiry did (see above).
		s.forget(key, c)
		s.release(key, c)
		s.mu.Lock()
		closed := s.closed
		s.mu.Unlock()
		switch {
		case closed:
			return nil, errStopping
		case r.session:
			return s.use(ctx, ss, extra, handle, may) // the session goes on in a new one
		case name != "":
			return nil, s.expiredError(name)
		case key != "":
			return s.use(ctx, ss, extra, handle, may) // an id starts a new one
		}
		return nil, errors.New("this session's sandbox is gone; start a new session")
	}
	if err != nil {
		s.release(key, c)
		return nil, err
	}
	s.mu.Lock()
	restored := c.restored
	c.restored = false
	s.mu.Unlock()
	if restored {
		s.cfg.Log.Info("resumed a sandbox kept across a restart", "container", c.id, "conversation", c.conversation)
	}
	done := func() {
		l.Release(context.WithoutCancel(ctx))
		s.release(key, c)
	}
	return &box{lease: l, conv: l.Container().Conversation(), handle: name, minted: made, session: r.session, done: done}, nil
}

// stdioKey marks the context of a stdio session's calls.
type stdioKey struct{}

func isStdio(ctx context.Context) bool {
	stdio, _ := ctx.Value(stdioKey{}).(bool)
	return stdio
}

// stdioRef names the sandbox of a stdio session's call that names none: a
// named sandbox, by a handle minted for the session at its first call and
// told to the client, rather than one that ends with the session. A stdio
// client restarts terp mcp whenever it restarts itself, so its session is
// no longer than the client's run; with the handle, a call after the
// restart (of a conversation the client's model goes on with) finds the
// files again. If the sandbox expires while the session goes on, the
// session's next call makes a new one under the same handle.
func (s *Server) stdioRef(ss *sdk.ServerSession, owner string) sandboxRef {
	s.mu.Lock()
	defer s.mu.Unlock()
	h, ok := s.stdio[ss]
	if !ok {
		h = newHandle()
		s.stdio[ss] = h
	}
	return sandboxRef{key: refKey(owner, "handle", h), handle: h, session: true}
}

// expiredError is a call naming the handle of a sandbox that is not here:
// it expired, or it never was (a handle made up, or another owner's, which
// is told alike, so that no owner learns of another's sandboxes).
func (s *Server) expiredError(name string) error {
	return fmt.Errorf("there is no sandbox %s here: it expired after %s without calls, or this handle is not one "+
		`this server gave you. Leave "sandbox" out to get a new one (its variables and files are not those of the old)`,
		name, s.cfg.ExpireAfter)
}

// spec is what every sandbox is made as on the host: with the settings'
// network (terp mcp's operator chooses it, where a terp serve container's
// client does), stored as an mcp conversation that outlives the sandbox,
// and, as a backstop, expiring on the host ExpireAfter after its last use.
func (s *Server) spec() serve.ContainerSpec {
	return serve.ContainerSpec{Origin: origin, KeepConversation: true, Minutes: minutes(s.cfg.ExpireAfter),
		Network: s.cfg.Host.SettingsNetwork()}
}

// KeepWarm has the host keep sandboxes ready, made as spec makes them, for
// the next sessions (serve.Server.KeepWarm).
func (s *Server) KeepWarm() error { return s.cfg.Host.KeepWarm(s.spec()) }

// origin is the protocol terp mcp's containers are made by, and their
// conversations stored as from.
const origin = "mcp"

// minutes is d in the whole minutes a container record's expiry counts,
// rounded up, at least one.
func minutes(d time.Duration) int {
	most := float64(math.MaxInt64 / int64(time.Minute))
	return int(min(max(math.Ceil(d.Minutes()), 1), most))
}

// open makes the container of c, the sandbox r names (or, for no key,
// ss's), for owner; a session's sandbox is held for the length of the
// session and removed when it ends, a named one keeps its key in its
// record.
func (s *Server) open(ctx context.Context, ss *sdk.ServerSession, r sandboxRef, owner string, c *container) {
	key := r.key
	// Not the call's context: other calls wait for this one's open.
	ctx = context.WithoutCancel(ctx)
	spec := s.spec()
	spec.Ref = key
	l, err := s.cfg.Host.CreateContainer(ctx, owner, spec)
	if err != nil {
		c.err = err
		s.forget(key, c)
		if key == "" {
			s.mu.Lock()
			if s.sessions[ss] == c {
				delete(s.sessions, ss)
			}
			s.mu.Unlock()
		}
		return
	}
	c.owner, c.id = owner, l.Container().ID
	conv := l.Container().Conversation().ID
	c.conversation = conv
	if key != "" {
		l.Release(ctx)
		if r.sessionID != "" {
			s.cfg.Log.Info("opened a sandbox", "session_id", r.sessionID, "container", c.id, "conversation", conv)
		} else {
			// Not the handle: with the key, it is the key to the sandbox.
			s.cfg.Log.Info("opened a sandbox", "named_by", "handle", "container", c.id, "conversation", conv)
		}
		return
	}
	c.hold = l
	s.cfg.Log.Info("opened a sandbox", "session", ss.ID(), "container", c.id, "conversation", conv)
	go func() {
		_ = ss.Wait()
		s.drop(ss)
	}()
}

// forget takes the named sandbox c out of the server's, if key still names
// it.
func (s *Server) forget(key string, c *container) {
	if key == "" {
		return
	}
	s.mu.Lock()
	if s.named[key] == c {
		delete(s.named, key)
	}
	s.mu.Unlock()
}

// release ends a call's use of c; the last call of a named sandbox sets it
// to expire after ExpireAfter.
func (s *Server) release(key string, c *container) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c.calls--
	if key == "" || c.calls > 0 || s.closed || s.named[key] != c {
		return
	}
	c.expiry = time.AfterFunc(s.cfg.ExpireAfter, func() { s.expire(key, c) })
}

// expire removes a named sandbox that has had no call for ExpireAfter.
func (s *Server) expire(key string, c *container) {
	s.mu.Lock()
	if s.closed || c.calls > 0 || s.named[key] != c {
		s.mu.Unlock()
		return
	}
	delete(s.named, key)
	s.busy.Add(1)
	s.mu.Unlock()
	s.let(c, "expired a sandbox", "idle", s.cfg.ExpireAfter)
}

// drop removes the sandbox of a session that ended. Once the server is
// closed, Close does.
func (s *Server) drop(ss *sdk.ServerSession) {
	s.mu.Lock()
	c := s.sessions[ss]
	if s.closed || c == nil {
		s.mu.Unlock()
		return
	}
	delete(s.sessions, ss)
	s.busy.Add(1)
	s.mu.Unlock()
	s.let(c, "closed a sandbox", "session", ss.ID())
}

// let removes the sandbox c, which the caller took out of its map under
// mu, adding to busy, and logs msg with attrs.
func (s *Server) let(c *container, msg string, attrs ...any) {
	defer s.busy.Done()
	if c.id == "" {
		return
	}
	s.remove(context.Background(), c)
	s.cfg.Log.Info(msg, append(attrs, "container", c.id, "conversation", c.conversation)...)
}

// remove removes c's container from the host: its conversation is closed
// (the sandbox paused) and kept, its record deleted. It leases the
// container first, so that the host's expiry cannot remove it meanwhile,
// and finds out so whether that expiry removed it already.
func (s *Server) remove(ctx context.Context, c *container) {
	if c.hold != nil {
		c.hold.Release(ctx)
	}
	if !s.cfg.Host.IsOpen(c.id) {
		// Kept paused by an earlier terp mcp and not called since: no
		// call can reach it now, and leasing it would resume its sandbox
		// only to close it.
		var gone *serve.NotFoundError
		if err := s.cfg.Host.RemoveContainer(ctx, c.owner, c.id); err != nil && !errors.As(err, &gone) {
			s.cfg.Log.Warn("removing a sandbox", "container", c.id, "error", err)
		}
		return
	}
	l, err := s.cfg.Host.Acquire(ctx, c.owner, c.id)
	if l == nil {
		if err != nil {
			s.cfg.Log.Warn("removing a sandbox", "container", c.id, "error", err)
		}
		return
	}
	defer l.Release(ctx)
	if err := s.cfg.Host.RemoveContainer(ctx, c.owner, c.id); err != nil {
		s.cfg.Log.Warn("removing a sandbox", "container", c.id, "error", err)
	}
}

// Close removes every session's sandbox from the host, closing its
// conversation (its sandbox paused), and leaves the named ones to the
// host's Close, which pauses them and keeps their records for the next
// terp mcp (restore); then it refuses new calls. It waits for the opens,
// drops and expiries under way first, so that none is left half done. The
// host is the caller's to close, after.
func (s *Server) Close(ctx context.Context) {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	s.busy.Wait()
	s.mu.Lock()
	var all []*container
	for ss, c := range s.sessions {
		all = append(all, c)
		delete(s.sessions, ss)
	}
	kept := 0
	for key, c := range s.named {
		if c.expiry != nil {
			c.expiry.Stop()
		}
		if c.id != "" {
			kept++
		}
		delete(s.named, key)
	}
	s.mu.Unlock()
	var wg sync.WaitGroup
	for _, c := range all {
		if c.id != "" {
			wg.Go(func() { s.remove(ctx, c) })
		}
	}
	wg.Wait()
	if kept > 0 {
		s.cfg.Log.Info("kept the sandboxes that handles and session ids name, for the next terp mcp", "sandboxes", kept)
	}
}

// restore finds the named sandboxes an earlier terp mcp on the same host
// state kept (see Close), or left when it was killed: every container
// record with a Ref. Each expires ExpireAfter after its record's last use,
// as if the server had not stopped; its first call resumes it.
func (s *Server) restore() {
	recs, err := s.cfg.Host.State().Containers(context.Background(), "")
	if err != nil {
		s.cfg.Log.Warn("finding the sandboxes an earlier terp mcp kept; their handles and session ids start new ones", "error", err)
		return
	}
	now := time.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, rec := range recs { // the newest first: one record per key is found
		if rec.Ref == "" || rec.Origin != origin || s.named[rec.Ref] != nil {
			continue
		}
		c := &container{owner: rec.Owner, id: rec.ID, conversation: rec.Conversation, restored: true}
		c.once.Do(func() {}) // made already
		key := rec.Ref
		s.named[key] = c
		c.expiry = time.AfterFunc(max(s.cfg.ExpireAfter-now.Sub(rec.LastActive), 0), func() { s.expire(key, c) })
	}
	if n := len(s.named); n > 0 {
		s.cfg.Log.Info("found the sandboxes an earlier terp mcp kept", "sandboxes", n)
	}
}
