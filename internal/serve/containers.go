package serve

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"mime"
	"net/http"
	"path"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/terpdev/terp/internal/config"
	"github.com/terpdev/terp/internal/conversation"
	"github.com/terpdev/terp/internal/egress"
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

// networkPolicy is a container's egress, as the API writes it.
type networkPolicy = state.Network

// containerObject is OpenAI's container object.
type containerObject struct {
	ID           string         `json:"id"`
	Object       string         `json:"object"`
	CreatedAt    int64          `json:"created_at"`
	Status       string         `json:"status"`
	ExpiresAfter expiresAfter   `json:"expires_after"`
	LastActiveAt int64          `json:"last_active_at"`
	Name         string         `json:"name"`
	MemoryLimit  string         `json:"memory_limit"`
	Network      *networkPolicy `json:"network_policy,omitempty"`
}

type expiresAfter struct {
	Anchor  string `json:"anchor"`
	Minutes int    `json:"minutes"`
}

// containerObjectOf is the API's view of a container's record.
func containerObjectOf(rec state.Container) containerObject {
	n := rec.Network
	return containerObject{ID: rec.ID, Object: "container", CreatedAt: rec.CreatedAt.Unix(), Status: "running",
		ExpiresAfter: expiresAfter{Anchor: "last_active_at", Minutes: rec.Minutes}, LastActiveAt: rec.LastActive.Unix(),
		Name: rec.Name, MemoryLimit: rec.Memory, Network: &n}
}

func (c *Container) object() containerObject { return containerObjectOf(c.Record()) }

// Record is a copy of c's Record as it is now.
func (c *Container) Record() state.Container {
	c.mu.Lock()
	defer c.mu.Unlock()
	rec := c.rec
	rec.Files = maps.Clone(rec.Files)
	rec.User = slices.Clone(rec.User)
	return rec
}

// change applies fn to c's record and saves it.
func (s *Server) change(ctx context.Context, c *Container, fn func(*state.Container)) {
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
func (s *Server) fileID(ctx context.Context, c *Container, p string) string {
	c.mu.Lock()
	id, ok := c.rec.Files[p]
	if !ok {
		id = newID("cfile_")
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
	s.fileID(ctx, c, rel)
	s.change(ctx, c, func(r *state.Container) {
		if !slices.Contains(r.User, rel) {
			r.User = append(r.User, rel)
		}
	})
}

// pathOf is the path (relative to /work) of c's file id.
func (c *Container) pathOf(id string) (string, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for p, fid := range c.rec.Files {
		if fid == id {
			return p, true
		}
	}
	return "", false
}

// containerOptions is what a client may ask of a new container.
type containerOptions struct {
	Name         string         `json:"name"`
	FileIDs      []string       `json:"file_ids"`
	ExpiresAfter *expiresAfter  `json:"expires_after"`
	MemoryLimit  string         `json:"memory_limit"`
	Network      *networkPolicy `json:"network_policy"`
}

// memoryLimits are the sizes OpenAI offers, as terp's limits.
var memoryLimits = map[string]int64{"1g": 1 << 30, "4g": 4 << 30, "16g": 16 << 30, "64g": 64 << 30}

// newContainer is CreateContainer for OpenAI's container options: a
// mistake in opts is answered as a 400 by the caller, with the parameter
// the error names.
func (s *Server) newContainer(ctx context.Context, owner string, opts containerOptions) (*Lease, *paramError) {
	spec := ContainerSpec{Name: opts.Name}
	if opts.ExpiresAfter != nil {
		if opts.ExpiresAfter.Anchor != "" && opts.ExpiresAfter.Anchor != "last_active_at" {
			return nil, badParam("expires_after.anchor", "the only anchor is last_active_at")
		}
		if m := opts.ExpiresAfter.Minutes; m < 1 || m > 20*24*60 {
			return nil, badParam("expires_after.minutes", "give between 1 and 28800 minutes")
		}
		spec.Minutes = opts.ExpiresAfter.Minutes
	}
	if opts.MemoryLimit != "" {
		if _, ok := memoryLimits[strings.ToLower(opts.MemoryLimit)]; !ok {
			return nil, badParam("memory_limit", "memory_limit is one of 1g, 4g, 16g, 64g")
		}
		spec.Memory = strings.ToLower(opts.MemoryLimit)
	}
	if opts.Network != nil {
		switch opts.Network.Type {
		case "disabled", "":
		case "allowlist":
			if len(opts.Network.AllowedDomains) == 0 {
				return nil, badParam("network_policy.allowed_domains", "an allowlist names at least one domain")
			}
			for _, d := range opts.Network.AllowedDomains {
				if err := egress.ValidPattern(d); err != nil {
					return nil, badParam("network_policy.allowed_domains", err.Error())
				}
			}
			spec.Network = networkPolicy{Type: "allowlist", AllowedDomains: slices.Clone(opts.Network.AllowedDomains)}
		default:
			return nil, badParam("network_policy.type", "network_policy.type is disabled or allowlist")
		}
	}
	for _, id := range opts.FileIDs {
		f, perr := s.storedFile(ctx, owner, id, "file_ids", fmt.Sprintf("no file found with id '%s'", id))
		if perr != nil {
			return nil, perr
		}
		spec.Files = append(spec.Files, f)
	}
	l, err := s.CreateContainer(ctx, owner, spec)
	if err != nil {
		return nil, &paramError{err: err}
	}
	return l, nil
}

// ContainerSpec is what a new container is made with; its zero value is a
// container with the server's settings, no network, and OpenAI's 20
// minutes of expiry.
type ContainerSpec struct {
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
	// Origin is the front-end its conversation is stored as from; ""
	// means "serve".
	Origin string
	// KeepConversation keeps the conversation stored, its sandbox paused,
	// when the container is removed or expires, for a front-end whose
	// users go on with their conversations in terp sessions (terp mcp).
	KeepConversation bool
}

// CreateContainer makes a container for owner, as spec says, held to
// owner's and the server's container limits (a *Refusal), and returns it
// leased.
func (s *Server) CreateContainer(ctx context.Context, owner string, spec ContainerSpec) (*Lease, error) {
	now := time.Now()
	rec := state.Container{ID: newID("cntr_"), Owner: owner, Name: spec.Name, CreatedAt: now, LastActive: now, Minutes: spec.Minutes,
		Memory: spec.Memory, Network: spec.Network, Replica: s.cfg.Replica, KeepConversation: spec.KeepConversation}
	if rec.Minutes == 0 {
		rec.Minutes = defaultExpiry
	}
	if rec.Memory == "" {
		rec.Memory = memoryName(s.cfg.Settings.MemoryLimit)
	}
	if rec.Network.Type == "" {
		rec.Network.Type = "disabled"
	}
	made, err := s.reserveContainer(ctx, owner, rec.ID)
	if err != nil {
		return nil, err
	}
	defer made(nil)
	origin := cmp.Or(spec.Origin, "serve")
	conv, err := s.cfg.Conversations.Open(ctx, s.containerConfig(rec), conversation.Options{Origin: origin, KeepFiles: true})
	if err != nil {
		s.metrics.containerFailed("create", err)
		return nil, err
	}
	rec.Conversation = conv.ID
	c := &Container{ID: rec.ID, Owner: owner, conv: conv, rec: rec}
	for _, f := range spec.Files {
		if err := s.putFile(ctx, c, f); err != nil {
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

// containerConfig is the settings a container's conversation runs with: the
// server's, with the container's memory limit and network policy. A
// container has no network unless its creator asked, whatever the server's
// own default.
func (s *Server) containerConfig(rec state.Container) *config.Config {
	cfg := *s.cfg.Settings
	if n, ok := memoryLimits[rec.Memory]; ok && n != memoryLimits[memoryName(cfg.MemoryLimit)] {
		cfg.MemoryLimit = n
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

// memoryName is a limit as OpenAI names it, the nearest that is not less.
func memoryName(n int64) string {
	for _, name := range []string{"1g", "4g", "16g", "64g"} {
		if n <= memoryLimits[name] {
			return name
		}
	}
	return "64g"
}

// paramError is a refused request: a parameter that was wrong, or err, a
// failure of terp's.
type paramError struct {
	param, message string
	err            error
}

func badParam(param, message string) *paramError { return &paramError{param: param, message: message} }

// Error is the refusal, or terp's failure.
func (e *paramError) Error() string {
	if e.err != nil {
		return e.err.Error()
	}
	return e.message
}

func (e *paramError) Unwrap() error { return e.err }

func (e *paramError) answer(w http.ResponseWriter) { writeFailure(w, e) }

// putFile uploads the stored file f into c's /work.
func (s *Server) putFile(ctx context.Context, c *Container, f state.File) error {
	fh, err := s.state.OpenFile(ctx, f)
	if err != nil {
		return err
	}
	defer fh.Close()
	return s.put(ctx, c, f.Filename, fh)
}

// put writes r to c's /work/name as the client's upload.
func (s *Server) put(ctx context.Context, c *Container, name string, r io.Reader) error {
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
		conv, err = s.cfg.Conversations.Open(ctx, s.containerConfig(rec), conversation.Options{Origin: "serve", KeepFiles: true})
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

// record is owner's container record: the live one's, else the stored one,
// without opening it.
func (s *Server) record(ctx context.Context, owner, id string) (state.Container, error) {
	s.mu.Lock()
	c := s.containers[id]
	s.mu.Unlock()
	if c != nil && c.Owner == owner {
		return c.Record(), nil
	}
	return s.state.Container(ctx, owner, id)
}

func (s *Server) createContainer(w http.ResponseWriter, r *http.Request) {
	var opts containerOptions
	if !decode(w, r, &opts) {
		return
	}
	l, perr := s.newContainer(r.Context(), Owner(r), opts)
	if perr != nil {
		perr.answer(w)
		return
	}
	l.Release(r.Context())
	writeJSON(w, http.StatusOK, l.c.object())
}

func (s *Server) listContainers(w http.ResponseWriter, r *http.Request) {
	owner := Owner(r)
	recs, err := s.state.Containers(r.Context(), owner)
	if err != nil {
		serverError(w, err)
		return
	}
	out := make([]containerObject, 0, len(recs))
	for _, rec := range recs {
		if live, err := s.record(r.Context(), owner, rec.ID); err == nil {
			rec = live
		}
		out = append(out, containerObjectOf(rec))
	}
	writeJSON(w, http.StatusOK, newList(out, func(c containerObject) string { return c.ID }))
}

func (s *Server) getContainer(w http.ResponseWriter, r *http.Request) {
	rec, err := s.record(r.Context(), Owner(r), r.PathValue("id"))
	if err != nil {
		stateError(w, err, "container", r.PathValue("id"))
		return
	}
	writeJSON(w, http.StatusOK, containerObjectOf(rec))
}

func (s *Server) deleteContainer(w http.ResponseWriter, r *http.Request) {
	rec, err := s.record(r.Context(), Owner(r), r.PathValue("id"))
	if err != nil {
		stateError(w, err, "container", r.PathValue("id"))
		return
	}
	if s.live(rec.ID) == nil && s.elsewhere(r.Context(), rec) {
		s.forward(w, r, rec)
		return
	}
	if err := s.removeContainer(r.Context(), rec); err != nil {
		writeFailure(w, err)
		return
	}
	writeJSON(w, http.StatusOK, deleted{ID: rec.ID, Object: "container.deleted", Deleted: true})
}

// RemoveContainer ends owner's container id for good, with its sandbox and
// stored conversation (one made with KeepConversation is closed and kept);
// one that is not owner's, or gone already, is a *missingError.
func (s *Server) RemoveContainer(ctx context.Context, owner, id string) error {
	rec, err := s.record(ctx, owner, id)
	if errors.Is(err, state.ErrNotFound) {
		return notFoundError("container", id)
	}
	if err != nil {
		return err
	}
	return s.removeContainer(ctx, rec)
}

// removeContainer ends the container of rec for good: its sandbox, its
// stored conversation (unless rec keeps it) and its record. One open in another replica is left
// alone (an error wrapping store.ErrBusy).
func (s *Server) removeContainer(ctx context.Context, rec state.Container) error {
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
	return err
}

func (s *Server) expireLoop() {
	defer s.done.Done()
	t := time.NewTicker(s.cfg.ExpiryTick)
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			return
		case now := <-t.C:
			s.expire(now)
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

// containerFile is OpenAI's container file object.
type containerFile struct {
	ID          string `json:"id"`
	Object      string `json:"object"`
	Bytes       int64  `json:"bytes"`
	ContainerID string `json:"container_id"`
	CreatedAt   int64  `json:"created_at"`
	Path        string `json:"path"`
	Source      string `json:"source"`
}

func (s *Server) fileObject(ctx context.Context, c *Container, fi sandbox.FileInfo) containerFile {
	id := s.fileID(ctx, c, fi.Path)
	c.mu.Lock()
	source := "assistant"
	if slices.Contains(c.rec.User, fi.Path) {
		source = "user"
	}
	c.mu.Unlock()
	return containerFile{ID: id, Object: "container.file", Bytes: fi.Size, ContainerID: c.ID,
		CreatedAt: fi.ModTime.Unix(), Path: path.Join(sandbox.DataDir, fi.Path), Source: source}
}

// files lists c's /work for the API.
func (s *Server) files(ctx context.Context, c *Container) ([]containerFile, error) {
	infos, err := c.conv.Files(ctx)
	out := make([]containerFile, 0, len(infos))
	for _, fi := range infos {
		out = append(out, s.fileObject(ctx, c, fi))
	}
	return out, err
}

// lookupFile is c's file id, as it is now in /work.
func (s *Server) lookupFile(ctx context.Context, c *Container, id string) (containerFile, bool, error) {
	p, ok := c.pathOf(id)
	if !ok {
		return containerFile{}, false, nil
	}
	all, err := s.files(ctx, c)
	if err != nil {
		return containerFile{}, false, err
	}
	for _, f := range all {
		if f.Path == path.Join(sandbox.DataDir, p) {
			return f, true, nil
		}
	}
	return containerFile{}, false, nil
}

// withContainer runs fn on the request's container, leased, answering 404
// for one that is not the key's.
func (s *Server) withContainer(w http.ResponseWriter, r *http.Request, fn func(*Container)) {
	l, err := s.Acquire(r.Context(), Owner(r), r.PathValue("id"))
	switch {
	case s.forwarded(w, r, err):
		return
	case err != nil:
		writeFailure(w, err)
		return
	case l == nil:
		notFound(w, "container", r.PathValue("id"))
		return
	}
	defer l.Release(r.Context())
	fn(l.c)
}

func (s *Server) createContainerFile(w http.ResponseWriter, r *http.Request) {
	s.withContainer(w, r, func(c *Container) {
		var err error
		if strings.HasPrefix(r.Header.Get("Content-Type"), "multipart/") {
			name, body, _, ok := s.readUpload(w, r)
			if !ok {
				return
			}
			if err = s.put(r.Context(), c, name, body); err == nil {
				s.answerFile(w, r, c, name)
			}
		} else {
			var req struct {
				FileID string `json:"file_id"`
			}
			if !decode(w, r, &req) {
				return
			}
			f, perr := s.storedFile(r.Context(), Owner(r), req.FileID, "file_id",
				fmt.Sprintf("no file found with id '%s'; upload it with POST /v1/files, or send the file itself as multipart/form-data", req.FileID))
			if perr != nil {
				perr.answer(w)
				return
			}
			if err = s.putFile(r.Context(), c, f); err == nil {
				s.answerFile(w, r, c, f.Filename)
			}
		}
		if err != nil {
			writeFailure(w, err)
		}
	})
}

// answerFile answers with the container file at rel.
func (s *Server) answerFile(w http.ResponseWriter, r *http.Request, c *Container, rel string) {
	f, ok, err := s.lookupFile(r.Context(), c, s.fileID(r.Context(), c, rel))
	switch {
	case err != nil:
		serverError(w, err)
	case !ok:
		serverError(w, fmt.Errorf("/work/%s is not in the container after its upload", rel))
	default:
		writeJSON(w, http.StatusOK, f)
	}
}

func (s *Server) listContainerFiles(w http.ResponseWriter, r *http.Request) {
	s.withContainer(w, r, func(c *Container) {
		files, err := s.files(r.Context(), c)
		if err != nil && len(files) == 0 {
			writeFailure(w, err)
			return
		}
		writeJSON(w, http.StatusOK, newList(files, func(f containerFile) string { return f.ID }))
	})
}

// withContainerFile runs fn on the request's container file, answering 404
// for one that is not there.
func (s *Server) withContainerFile(w http.ResponseWriter, r *http.Request, fn func(*Container, containerFile)) {
	s.withContainer(w, r, func(c *Container) {
		f, ok, err := s.lookupFile(r.Context(), c, r.PathValue("fid"))
		switch {
		case err != nil:
			writeFailure(w, err)
		case !ok:
			notFound(w, "container file", r.PathValue("fid"))
		default:
			fn(c, f)
		}
	})
}

func (s *Server) getContainerFile(w http.ResponseWriter, r *http.Request) {
	s.withContainerFile(w, r, func(_ *Container, f containerFile) { writeJSON(w, http.StatusOK, f) })
}

func (s *Server) getContainerFileContent(w http.ResponseWriter, r *http.Request) {
	s.withContainerFile(w, r, func(c *Container, f containerFile) {
		rc, err := c.conv.ReadFile(r.Context(), f.Path)
		if err != nil {
			writeFailure(w, err)
			return
		}
		defer rc.Close()
		w.Header().Set("Content-Type", contentType(f.Path))
		w.Header().Set("Content-Length", fmt.Sprint(f.Bytes))
		w.WriteHeader(http.StatusOK)
		_, _ = io.Copy(w, rc)
	})
}

func (s *Server) deleteContainerFile(w http.ResponseWriter, r *http.Request) {
	s.withContainerFile(w, r, func(c *Container, f containerFile) {
		if err := c.conv.RemoveFile(r.Context(), f.Path); err != nil {
			writeFailure(w, err)
			return
		}
		writeJSON(w, http.StatusOK, deleted{ID: f.ID, Object: "container.file.deleted", Deleted: true})
	})
}

// contentType is what a container file is served as, by its extension.
func contentType(p string) string {
	if t := mime.TypeByExtension(path.Ext(p)); t != "" {
		return t
	}
	return "application/octet-stream"
}
