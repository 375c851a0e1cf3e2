package serve

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/terpdev/terp/internal/config"
	"github.com/terpdev/terp/internal/conversation"
	"github.com/terpdev/terp/internal/kernel"
	"github.com/terpdev/terp/internal/sandbox"
	"github.com/terpdev/terp/internal/serve/state"
	"github.com/terpdev/terp/internal/store"
)

// defaultExpiry is how long a container lives after its last use unless
// its creator says otherwise: OpenAI's 20 minutes.
const defaultExpiry = 20

// Container is a Container that is live in this server: its record, and
// the open conversation whose sandbox holds the files. A Container whose
// conversation is paused (the server restarted, or it went unused) is only
// its record in the state, and is opened again on first use.
type Container struct {
	ID    string
	Owner string
	conv  *conversation.Conversation

	mu  sync.Mutex
	rec state.Container
	// busy counts its leases: the requests working in it, which hold off
	// its expiry.
	busy int
	// savedActive is rec.LastActive as last saved: a use is saved only
	// once a minute, for expiry counts in minutes.
	savedActive time.Time
	// saveMu orders the record's saves against its removal: removed is
	// set once the container is deleted or expired, so that a request
	// still finishing in it does not save its record back.
	saveMu  sync.Mutex
	removed bool
}

// Record is a copy of c's record as it is now.
func (c *Container) Record() state.Container {
	c.mu.Lock()
	defer c.mu.Unlock()
	rec := c.rec
	rec.Files = maps.Clone(rec.Files)
	rec.User = slices.Clone(rec.User)
	return rec
}

// change applies fn to c's record and saves it.
func (s *Server) Change(ctx context.Context, c *Container, fn func(*state.Container)) {
	c.mu.Lock()
	fn(&c.rec)
	c.mu.Unlock()
	s.saveContainer(ctx, c)
}

// saveContainer writes c's record. A failure is logged, not returned: the
// container works on, and the next change saves it all.
func (s *Server) saveContainer(ctx context.Context, c *Container) {
	c.saveMu.Lock()
	defer c.saveMu.Unlock()
	if c.removed {
		return
	}
	rec := c.Record()
	if err := s.state.SaveContainer(context.WithoutCancel(ctx), rec); err != nil {
		s.cfg.Log.Warn("saving container", "container", c.ID, "error", err)
		return
	}
	c.mu.Lock()
	c.savedActive = rec.LastActive
	c.mu.Unlock()
}

// touch marks the container used now, which puts off its expiry.
func (s *Server) touch(ctx context.Context, c *Container) {
	c.mu.Lock()
	c.rec.LastActive = time.Now()
	stale := c.rec.LastActive.Sub(c.savedActive) > time.Minute
	c.mu.Unlock()
	if stale {
		s.saveContainer(ctx, c)
	}
}

// Container is the leased container.
func (l *Lease) Container() *Container { return l.c }

// Conversation is the container's conversation: its sandbox, kernel and
// history.
func (c *Container) Conversation() *conversation.Conversation { return c.conv }

// FromClient reports whether the client put the file at p (relative to
// /work) there, rather than the code.
func (c *Container) FromClient(p string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Contains(c.rec.User, p)
}

// Lease holds a container busy for a request that works in it (a turn, a
// file's upload or download): expiry never removes a leased container.
// The Lease is taken in the same step that finds the container (acquire,
// open, newContainer), so no expiry can come between the two.
type Lease struct {
	s    *Server
	c    *Container
	once sync.Once
}

// hold counts one more lease of c. The caller holds s.mu, which expiry
// takes to check that a container is idle and remove it.
func (s *Server) hold(c *Container) *Lease {
	c.mu.Lock()
	c.busy++
	c.mu.Unlock()
	return &Lease{s: s, c: c}
}

// Release gives the lease back and marks the container used now, which
// puts off its expiry. It may be called more than once.
func (l *Lease) Release(ctx context.Context) {
	l.once.Do(func() {
		c := l.c
		c.mu.Lock()
		c.busy--
		c.mu.Unlock()
		l.s.touch(ctx, c)
	})
}

// fileID is the id of the file at p (relative to /work), made on first
// sight and kept for the container's life.
func (s *Server) FileID(ctx context.Context, c *Container, p string) string {
	c.mu.Lock()
	id, ok := c.rec.Files[p]
	if !ok {
		id = NewID("cfile_")
		if c.rec.Files == nil {
			c.rec.Files = map[string]string{}
		}
		c.rec.Files[p] = id
	}
	c.mu.Unlock()
	if !ok {
		s.saveContainer(ctx, c)
	}
	return id
}

// uploaded records that the client put the file at rel, relative to /work.
func (s *Server) uploaded(ctx context.Context, c *Container, rel string) {
	s.FileID(ctx, c, rel)
	s.Change(ctx, c, func(r *state.Container) {
		if !slices.Contains(r.User, rel) {
			r.User = append(r.User, rel)
		}
	})
}

// pathOf is the path (relative to /work) of c's file id.
func (c *Container) PathOf(id string) (string, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for p, fid := range c.rec.Files {
		if fid == id {
			return p, true
		}
	}
	return "", false
}

// removeTimeout bounds a container's removal: closing its sandbox, removing
// its stored conversation and its record.
const removeTimeout = 2 * time.Minute

// MemoryLimits are the memory limits a container may have, by the names
// OpenAI gives them, which its record keeps.
var MemoryLimits = map[string]int64{"1g": 1 << 30, "4g": 4 << 30, "16g": 16 << 30, "64g": 64 << 30}

// ContainerSpec is what a new container is made with; its zero value is a
// container with the server's settings, no network, and OpenAI's 20
// minutes of expiry.
type ContainerSpec struct {
	// ID is the id to give it, for a protocol whose clients expect ids of
	// their own form (Jupyter's UUIDs); "" makes a "cntr_" one.
	ID   string
	Name string
	// Minutes is how long the container lives after its last use; 0
	// means 20.
	Minutes int
	// Memory is the sandbox's memory limit as OpenAI names it ("1g",
	// "4g", "16g", "64g"); "" means the server's.
	Memory string
	// Network is the sandbox's egress; the zero value has none. Type
	// "full", which OpenAI's API cannot ask for, is the host's network.
	Network state.Network
	// Files are stored files put in /work before it is handed over.
	Files []state.File
	// Origin is the protocol that makes it, whose listing shows it and
	// whose name its conversation is stored with; "" is OpenAI's API,
	// stored as "serve".
	Origin string
	// ValueApart keeps a cell's trailing value out of its output, for a
	// protocol that shows it apart (Jupyter's execute_result).
	ValueApart bool
	// Fresh runs every exec as a new Python program (terp's script mode),
	// for a protocol whose clients are told that nothing but files
	// carries over (LibreChat's code API), whatever the server's exec
	// mode.
	Fresh bool
	// KeepConversation keeps the conversation stored, its sandbox paused,
	// when the container is removed or expires, for a front-end whose
	// users go on with their conversations in terp sessions (terp mcp).
	KeepConversation bool
	// Ref is what the protocol's clients name the container by, where
	// that is not its id, kept in its record so that a restarted server
	// finds the container again by it (terp mcp: a digest of a handle or
	// an x-session-id, never the secret itself).
	Ref string
}

// CreateContainer makes a container for owner, as spec says, held to
// owner's and the server's container limits (a *Refusal), and returns it
// leased.
func (s *Server) CreateContainer(ctx context.Context, owner string, spec ContainerSpec) (*Lease, error) {
	rec := s.containerRecord(owner, spec)
	made, err := s.reserveContainer(ctx, owner, rec.ID)
	if err != nil {
		return nil, err
	}
	defer made(nil)
	conv, err := s.cfg.Conversations.Open(ctx, s.containerConfig(rec), conversationOptions(rec))
	if err != nil {
		s.metrics.containerFailed("create", err)
		return nil, err
	}
	rec.Conversation = conv.ID
	c := &Container{ID: rec.ID, Owner: owner, conv: conv, rec: rec}
	for _, f := range spec.Files {
		if err := s.PutFile(ctx, c, f); err != nil {
			c.conv.Close(ctx)
			return nil, err
		}
	}
	made(func() { s.saveContainer(ctx, c) })
	s.mu.Lock()
	defer s.mu.Unlock()
	s.containers[c.ID] = c
	return s.hold(c), nil
}

// containerRecord is the record of a container made for owner as spec
// says, now.
func (s *Server) containerRecord(owner string, spec ContainerSpec) state.Container {
	now := time.Now()
	rec := state.Container{ID: cmp.Or(spec.ID, NewID("cntr_")), Owner: owner, Name: spec.Name, CreatedAt: now, LastActive: now,
		Minutes: spec.Minutes, Memory: spec.Memory, Network: spec.Network, Replica: s.cfg.Replica,
		KeepConversation: spec.KeepConversation, Origin: spec.Origin, ValueApart: spec.ValueApart, Fresh: spec.Fresh,
		Ref: spec.Ref}
	if rec.Minutes == 0 {
		rec.Minutes = defaultExpiry
	}
	if rec.Memory == "" {
		rec.Memory = memoryName(s.cfg.Settings.MemoryLimit)
	}
	if rec.Network.Type == "" {
		rec.Network.Type = "disabled"
	}
	return rec
}

// KeepWarm has the conversation service keep sandboxes ready for
// containers made as spec says (see conversation.Service.KeepWarm): a
// front-end names the containers most of its clients make, so that even
// the first one after the start is warm.
func (s *Server) KeepWarm(spec ContainerSpec) error {
	rec := s.containerRecord("", spec)
	return s.cfg.Conversations.KeepWarm(s.containerConfig(rec), conversationOptions(rec))
}

// conversationOptions are what a container's conversation is opened with.
func conversationOptions(rec state.Container) conversation.Options {
	return conversation.Options{Origin: cmp.Or(rec.Origin, "serve"), KeepFiles: true, ValueApart: rec.ValueApart}
}

// containerConfig is the settings a container's conversation runs with: the
// server's, with the container's memory limit, exec mode and network policy. A
// container has no network unless its creator asked, whatever the server's
// own default.
func (s *Server) containerConfig(rec state.Container) *config.Config {
	cfg := *s.cfg.Settings
	if n, ok := MemoryLimits[rec.Memory]; ok && n != MemoryLimits[memoryName(cfg.MemoryLimit)] {
		cfg.MemoryLimit = n
	}
	if rec.Fresh {
		cfg.ExecMode = string(kernel.ModeScript)
	}
	cfg.Network, cfg.NetworkAllow = string(sandbox.NetworkNone), nil
	switch rec.Network.Type {
	case "allowlist":
		cfg.Network, cfg.NetworkAllow = string(sandbox.NetworkAllowlist), slices.Clone(rec.Network.AllowedDomains)
	case "full":
		cfg.Network = string(sandbox.NetworkFull)
	}
	return &cfg
}

// SettingsNetwork is the egress the server's own settings give, for the
// containers of a protocol whose clients cannot ask for one (terp mcp,
// Jupyter): the operator's choice, where OpenAI's clients make theirs.
func (s *Server) SettingsNetwork() state.Network {
	switch n := s.cfg.Settings.NetworkPolicy(); n.Mode {
	case sandbox.NetworkAllowlist:
		return state.Network{Type: "allowlist", AllowedDomains: slices.Clone(n.Allow)}
	case sandbox.NetworkFull:
		return state.Network{Type: "full"}
	}
	return state.Network{}
}

// memoryName is a limit as OpenAI names it, the nearest that is not less.
func memoryName(n int64) string {
	for _, name := range []string{"1g", "4g", "16g", "64g"} {
		if n <= MemoryLimits[name] {
			return name
		}
	}
	return "64g"
}

// paramError is a refused request: a parameter that was wrong, or err, a
// failure of terp's.
// Error is the refusal, or terp's failure.
// putFile uploads the stored file f into c's /work.
func (s *Server) PutFile(ctx context.Context, c *Container, f state.File) error {
	fh, err := s.state.OpenFile(ctx, f)
	if err != nil {
		return err
	}
	defer fh.Close()
	return s.Put(ctx, c, f.Filename, fh)
}

// put writes r to c's /work/name as the client's upload.
func (s *Server) Put(ctx context.Context, c *Container, name string, r io.Reader) error {
	dest, err := c.conv.Put(ctx, name, r)
	if err != nil {
		return err
	}
	s.uploaded(ctx, c, strings.TrimPrefix(dest, sandbox.WorkDir+"/"))
	return nil
}

// Acquire leases owner's container id, opened in this server if it was
// paused (by a restart, or another replica); nil when the key has none. One
// open in another replica is an *elsewhereError, for the request to be
// forwarded there.
func (s *Server) Acquire(ctx context.Context, owner, id string) (*Lease, error) {
	if l, found := s.acquireLive(owner, id); found {
		return l, nil
	}
	rec, err := s.state.Container(ctx, owner, id)
	if errors.Is(err, state.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if s.elsewhere(ctx, rec) {
		return nil, &elsewhereError{rec: rec}
	}
	return s.open(ctx, rec)
}

// acquireLive leases owner's container id if it is live in this server;
// found is false when it is not (a live container of another key is found,
// and not leased).
func (s *Server) acquireLive(owner, id string) (l *Lease, found bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.containers[id]
	if c == nil {
		return nil, false
	}
	if c.Owner != owner {
		return nil, true
	}
	return s.hold(c), true
}

// open makes the container of rec live, and leases it: its conversation
// resumed, with its sandbox (the model is told that Python restarted). A
// container whose conversation was discarded, for it held nothing, gets a
// new one. One that expiry removed meanwhile is not found (nil).
func (s *Server) open(ctx context.Context, rec state.Container) (*Lease, error) {
	s.opening.Lock()
	defer s.opening.Unlock()
	if l, found := s.acquireLive(rec.Owner, rec.ID); found {
		return l, nil
	}
	// Expiry removes a paused container under s.opening; read its record
	// again now that no removal can be under way.
	rec, err := s.state.Container(ctx, rec.Owner, rec.ID)
	if errors.Is(err, state.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var conv *conversation.Conversation
	if rec.Conversation != "" {
		conv, err = s.cfg.Conversations.Resume(ctx, s.containerConfig(rec), rec.Conversation)
	}
	if rec.Conversation == "" || errors.Is(err, store.ErrNotFound) {
		conv, err = s.cfg.Conversations.Open(ctx, s.containerConfig(rec), conversationOptions(rec))
		if err == nil {
			rec.Conversation = conv.ID
		}
	}
	if err != nil {
		s.metrics.containerFailed("open", err)
		return nil, fmt.Errorf("open container %s: %w", rec.ID, err)
	}
	for _, w := range conv.Warnings() {
		s.cfg.Log.Info("opening container", "container", rec.ID, "note", w)
	}
	rec.Replica = s.cfg.Replica
	c := &Container{ID: rec.ID, Owner: rec.Owner, conv: conv, rec: rec}
	s.saveContainer(ctx, c)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.containers[c.ID] = c
	return s.hold(c), nil
}

// live is the container id if it is open in this server.
func (s *Server) live(id string) *Container {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.containers[id]
}

// ContainerRecord is owner's container record: the live one's, else the
// stored one, without opening it.
func (s *Server) ContainerRecord(ctx context.Context, owner, id string) (state.Container, error) {
	s.mu.Lock()
	c := s.containers[id]
	s.mu.Unlock()
	if c != nil && c.Owner == owner {
		return c.Record(), nil
	}
	return s.state.Container(ctx, owner, id)
}

// RemoveContainer ends owner's container id for good, with its sandbox and
// stored conversation (one made with KeepConversation is closed and kept);
// one that is not owner's, or gone already, is a *NotFoundError, and one
// open in another replica an error that Forwarded takes, for the request
// to be forwarded there.
func (s *Server) RemoveContainer(ctx context.Context, owner, id string) error {
	rec, err := s.ContainerRecord(ctx, owner, id)
	if errors.Is(err, state.ErrNotFound) {
		return &NotFoundError{Kind: "container", ID: id}
	}
	if err != nil {
		return err
	}
	if s.live(rec.ID) == nil && s.elsewhere(ctx, rec) {
		return &elsewhereError{rec: rec}
	}
	return s.removeContainer(ctx, rec)
}

// removeContainer ends the container of rec for good: its sandbox, its
// stored conversation (unless rec keeps it) and its record. One open in another replica is left
// alone (an error wrapping store.ErrBusy).
func (s *Server) removeContainer(ctx context.Context, rec state.Container) error {
	// Begun, a removal ends whatever its client does: one cut short by a
	// client that gave up would leave a record without a sandbox.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), removeTimeout)
	defer cancel()
	s.opening.Lock()
	defer s.opening.Unlock()
	s.mu.Lock()
	c := s.containers[rec.ID]
	delete(s.containers, rec.ID)
	s.mu.Unlock()
	return s.remove(ctx, rec, c)
}

// remove ends the container of rec, taken out of the live ones already
// (c, nil if it was paused). The caller holds s.opening, so that no request
// opens the container again from its record while it is being removed.
func (s *Server) remove(ctx context.Context, rec state.Container, c *Container) error {
	kept := true
	if c != nil {
		c.saveMu.Lock()
		c.removed = true
		c.saveMu.Unlock()
		for _, w := range c.conv.Close(ctx) {
			s.cfg.Log.WarnContext(ctx, "closing container", "container", c.ID, "warning", w)
		}
		kept = c.conv.Kept()
	}
	if kept && !rec.KeepConversation && rec.Conversation != "" {
		conv, err := s.cfg.Conversations.Store().Load(rec.Conversation)
		switch {
		case err == nil:
			if err := s.cfg.Conversations.Remove(ctx, s.cfg.Settings, conv); err != nil {
				return err
			}
		case !errors.Is(err, store.ErrNotFound):
			return err
		}
	}
	err := s.state.DeleteContainer(ctx, rec.Owner, rec.ID)
	if errors.Is(err, state.ErrNotFound) {
		return nil // removed by another replica meanwhile
	}
	if err == nil && len(rec.Replies) > 0 {
		// A chat client may go on from one of its answers for as long as
		// it shows their links: it is told the container is gone.
		now := time.Now()
		if err := s.state.AddGone(ctx, rec.Owner, rec.Replies, now, now.Add(-s.linkLifetime())); err != nil {
			s.cfg.Log.WarnContext(ctx, "remembering a removed container's answers", "container", rec.ID, "error", err)
		}
	}
	return err
}

// linkPruneEvery is how often the expire loop looks for links past their
// lifetime: every stored file is listed to find them.
const linkPruneEvery = 10 * time.Minute

func (s *Server) expireLoop() {
	defer s.done.Done()
	var pruned time.Time
	t := time.NewTicker(s.cfg.ExpiryTick)
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			return
		case now := <-t.C:
			s.expire(now)
			if now.Sub(pruned) >= linkPruneEvery {
				s.pruneLinks(now)
				pruned = now
			}
		}
	}
}

// expire removes the containers unused for longer than their expiry, live
// or paused, but none that is leased, here or in another replica (whose
// conversation lock keeps it).
func (s *Server) expire(now time.Time) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	recs, err := s.state.Containers(ctx, "")
	if err != nil {
		s.cfg.Log.Warn("listing containers to expire", "error", err)
		return
	}
	for _, rec := range recs {
		if !rec.Expired(now) && s.live(rec.ID) == nil {
			continue // a live one's record may be newer than the stored
		}
		if err := s.expireOne(ctx, rec, now); err != nil && !errors.Is(err, store.ErrBusy) {
			s.cfg.Log.Warn("expiring container", "container", rec.ID, "error", err)
		}
	}
}

// expireOne removes the container of rec if it is past its expiry and not
// leased. The check and the removal from the live containers are one step
// under s.mu, which a lease is taken under; the whole removal is under
// s.opening, so that a request that did not find the container live cannot
// open it again from its record meanwhile.
func (s *Server) expireOne(ctx context.Context, rec state.Container, now time.Time) error {
	s.opening.Lock()
	defer s.opening.Unlock()
	s.mu.Lock()
	c := s.containers[rec.ID]
	if c != nil {
		c.mu.Lock()
		leased := c.busy > 0
		c.mu.Unlock()
		if rec = c.Record(); leased || !rec.Expired(now) {
			s.mu.Unlock()
			return nil
		}
		delete(s.containers, rec.ID)
	}
	s.mu.Unlock()
	return s.remove(ctx, rec, c)
}

// IsOpen reports whether the container id is open in this process, rather
// than paused or open in another replica.
func (s *Server) IsOpen(id string) bool { return s.live(id) != nil }

// Leased reports whether a request holds a lease on the container id in
// this process.
func (s *Server) Leased(id string) bool {
	c := s.live(id)
	if c == nil {
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.busy > 0
}
