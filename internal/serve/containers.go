package serve

import (
	"context"
	"fmt"
	"io"
	"mime"
	"net/http"
	"path"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/terpdev/terp/internal/conversation"
	"github.com/terpdev/terp/internal/egress"
	"github.com/terpdev/terp/internal/sandbox"
)

// defaultExpiry is how long a container lives after its last use unless
// its creator says otherwise: OpenAI's 20 minutes.
const defaultExpiry = 20

// container is one terp conversation as the API sees it: a sandbox with
// files that responses run code in.
type container struct {
	ID        string
	Owner     string
	Name      string
	CreatedAt time.Time
	Minutes   int
	Memory    string
	Network   networkPolicy
	conv      *conversation.Conversation

	mu         sync.Mutex
	lastActive time.Time
	busy       int // responses running in it, which hold off its expiry
	// ids and paths name the files of /work for the API: a file keeps its
	// id for the container's life. user marks the ones a client uploaded.
	ids   map[string]string // path -> id
	paths map[string]string // id -> path
	user  map[string]bool
	// last is the id of the response that ran last here, whose history
	// the conversation holds.
	last string
}

// networkPolicy is a container's egress, as the API writes it.
type networkPolicy struct {
	Type           string   `json:"type"`
	AllowedDomains []string `json:"allowed_domains,omitempty"`
}

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

func (c *container) object() containerObject {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := c.Network
	return containerObject{ID: c.ID, Object: "container", CreatedAt: c.CreatedAt.Unix(), Status: "running",
		ExpiresAfter: expiresAfter{Anchor: "last_active_at", Minutes: c.Minutes}, LastActiveAt: c.lastActive.Unix(),
		Name: c.Name, MemoryLimit: c.Memory, Network: &n}
}

// touch marks the container used now, which puts off its expiry.
func (c *container) touch() {
	c.mu.Lock()
	c.lastActive = time.Now()
	c.mu.Unlock()
}

func (c *container) expired(now time.Time) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.busy == 0 && now.Sub(c.lastActive) > time.Duration(c.Minutes)*time.Minute
}

// use marks a response running in c until the returned func is called.
func (c *container) use() (done func()) {
	c.mu.Lock()
	c.busy++
	c.lastActive = time.Now()
	c.mu.Unlock()
	return func() {
		c.mu.Lock()
		c.busy--
		c.lastActive = time.Now()
		c.mu.Unlock()
	}
}

// fileID is the id of the file at p (relative to /work), made on first sight.
func (c *container) fileID(p string) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if id, ok := c.ids[p]; ok {
		return id
	}
	id := newID("cfile_")
	c.ids[p], c.paths[id] = id, p
	return id
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

// newContainer opens a conversation for owner as opts say, with the files
// named uploaded. A mistake in opts is answered as a 400 by the caller, with
// the parameter the error names.
func (s *Server) newContainer(ctx context.Context, owner string, opts containerOptions) (*container, *paramError) {
	cfg := *s.cfg.Settings
	c := &container{ID: newID("cntr_"), Owner: owner, Name: opts.Name, CreatedAt: time.Now(), Minutes: defaultExpiry,
		Memory: "1g", Network: networkPolicy{Type: "disabled"},
		ids: map[string]string{}, paths: map[string]string{}, user: map[string]bool{}}
	if opts.ExpiresAfter != nil {
		if opts.ExpiresAfter.Anchor != "" && opts.ExpiresAfter.Anchor != "last_active_at" {
			return nil, badParam("expires_after.anchor", "the only anchor is last_active_at")
		}
		if m := opts.ExpiresAfter.Minutes; m < 1 || m > 20*24*60 {
			return nil, badParam("expires_after.minutes", "give between 1 and 28800 minutes")
		}
		c.Minutes = opts.ExpiresAfter.Minutes
	}
	if opts.MemoryLimit != "" {
		n, ok := memoryLimits[strings.ToLower(opts.MemoryLimit)]
		if !ok {
			return nil, badParam("memory_limit", "memory_limit is one of 1g, 4g, 16g, 64g")
		}
		c.Memory, cfg.MemoryLimit = strings.ToLower(opts.MemoryLimit), n
	} else {
		c.Memory = memoryName(cfg.MemoryLimit)
	}
	if opts.Network != nil {
		switch opts.Network.Type {
		case "disabled", "":
			cfg.Network, cfg.NetworkAllow = string(sandbox.NetworkNone), nil
		case "allowlist":
			if len(opts.Network.AllowedDomains) == 0 {
				return nil, badParam("network_policy.allowed_domains", "an allowlist names at least one domain")
			}
			for _, d := range opts.Network.AllowedDomains {
				if err := egress.ValidPattern(d); err != nil {
					return nil, badParam("network_policy.allowed_domains", err.Error())
				}
			}
			cfg.Network, cfg.NetworkAllow = string(sandbox.NetworkAllowlist), slices.Clone(opts.Network.AllowedDomains)
			c.Network = networkPolicy{Type: "allowlist", AllowedDomains: cfg.NetworkAllow}
		default:
			return nil, badParam("network_policy.type", "network_policy.type is disabled or allowlist")
		}
	} else {
		// A container has no network unless asked, whatever the server's
		// own default.
		cfg.Network, cfg.NetworkAllow = string(sandbox.NetworkNone), nil
	}
	s.mu.Lock()
	live := 0
	for _, other := range s.containers {
		if other.Owner == owner {
			live++
		}
	}
	s.mu.Unlock()
	if live >= s.cfg.MaxContainers {
		return nil, &paramError{status: http.StatusTooManyRequests, param: "container",
			message: fmt.Sprintf("this key has %d live containers, the most it may have; delete some (DELETE /v1/containers/ID) or let them expire", live)}
	}
	var files []fileObject
	for _, id := range opts.FileIDs {
		f, ok := s.files.get(owner, id)
		if !ok {
			return nil, badParam("file_ids", fmt.Sprintf("no file found with id '%s'", id))
		}
		files = append(files, f)
	}
	conv, err := s.cfg.Conversations.Open(ctx, &cfg, conversation.Options{Origin: "serve", KeepFiles: true})
	if err != nil {
		return nil, &paramError{err: err}
	}
	c.conv = conv
	c.touch()
	for _, f := range files {
		if err := s.putFile(ctx, c, f); err != nil {
			c.conv.Close(ctx)
			return nil, &paramError{err: err}
		}
	}
	s.mu.Lock()
	s.containers[c.ID] = c
	s.mu.Unlock()
	return c, nil
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
	// status is 400 unless set.
	status int
}

func badParam(param, message string) *paramError { return &paramError{param: param, message: message} }

func (e *paramError) answer(w http.ResponseWriter) {
	if e.err != nil {
		conversationError(w, e.err)
		return
	}
	if e.status != 0 {
		writeError(w, e.status, "invalid_request_error", "", e.message, e.param)
		return
	}
	badRequest(w, e.param, "%s", e.message)
}

// putFile uploads the stored file f into c's /work.
func (s *Server) putFile(ctx context.Context, c *container, f fileObject) error {
	fh, err := s.files.open(f)
	if err != nil {
		return err
	}
	defer fh.Close()
	dest, err := c.conv.Put(ctx, f.Filename, fh)
	if err != nil {
		return err
	}
	rel := strings.TrimPrefix(dest, sandbox.WorkDir+"/")
	c.fileID(rel)
	c.mu.Lock()
	c.user[rel] = true
	c.mu.Unlock()
	return nil
}

// container is owner's container id, or nil.
func (s *Server) container(owner, id string) *container {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.containers[id]
	if c == nil || c.Owner != owner {
		return nil
	}
	return c
}

func (s *Server) createContainer(w http.ResponseWriter, r *http.Request) {
	var opts containerOptions
	if !decode(w, r, &opts) {
		return
	}
	c, perr := s.newContainer(r.Context(), ownerOf(r), opts)
	if perr != nil {
		perr.answer(w)
		return
	}
	writeJSON(w, http.StatusOK, c.object())
}

func (s *Server) listContainers(w http.ResponseWriter, r *http.Request) {
	owner := ownerOf(r)
	s.mu.Lock()
	var out []containerObject
	for _, c := range s.containers {
		if c.Owner == owner {
			out = append(out, c.object())
		}
	}
	s.mu.Unlock()
	slices.SortFunc(out, func(a, b containerObject) int {
		if a.CreatedAt != b.CreatedAt {
			return int(b.CreatedAt - a.CreatedAt)
		}
		return strings.Compare(a.ID, b.ID)
	})
	writeJSON(w, http.StatusOK, newList(out, func(c containerObject) string { return c.ID }))
}

func (s *Server) getContainer(w http.ResponseWriter, r *http.Request) {
	c := s.container(ownerOf(r), r.PathValue("id"))
	if c == nil {
		notFound(w, "container", r.PathValue("id"))
		return
	}
	writeJSON(w, http.StatusOK, c.object())
}

func (s *Server) deleteContainer(w http.ResponseWriter, r *http.Request) {
	c := s.container(ownerOf(r), r.PathValue("id"))
	if c == nil {
		notFound(w, "container", r.PathValue("id"))
		return
	}
	if err := s.removeContainer(r.Context(), c); err != nil {
		serverError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, deleted{ID: c.ID, Object: "container.deleted", Deleted: true})
}

// removeContainer ends c for good: its sandbox and its stored conversation.
func (s *Server) removeContainer(ctx context.Context, c *container) error {
	s.mu.Lock()
	delete(s.containers, c.ID)
	s.mu.Unlock()
	for _, w := range c.conv.Close(ctx) {
		s.cfg.Log.Warn("closing container", "container", c.ID, "warning", w)
	}
	if !c.conv.Kept() {
		return nil
	}
	rec, err := s.cfg.Conversations.Store().Load(c.conv.ID)
	if err != nil {
		return err
	}
	return s.cfg.Conversations.Remove(ctx, s.cfg.Settings, rec)
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
			s.mu.Lock()
			var old []*container
			for _, c := range s.containers {
				if c.expired(now) {
					old = append(old, c)
				}
			}
			s.mu.Unlock()
			for _, c := range old {
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				if err := s.removeContainer(ctx, c); err != nil {
					s.cfg.Log.Warn("expiring container", "container", c.ID, "error", err)
				}
				cancel()
			}
		}
	}
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

func (c *container) fileObject(fi sandbox.FileInfo) containerFile {
	id := c.fileID(fi.Path)
	c.mu.Lock()
	source := "assistant"
	if c.user[fi.Path] {
		source = "user"
	}
	c.mu.Unlock()
	return containerFile{ID: id, Object: "container.file", Bytes: fi.Size, ContainerID: c.ID,
		CreatedAt: fi.ModTime.Unix(), Path: path.Join(sandbox.WorkDir, fi.Path), Source: source}
}

// files lists c's /work for the API.
func (c *container) files(ctx context.Context) ([]containerFile, error) {
	infos, err := c.conv.Files(ctx)
	out := make([]containerFile, 0, len(infos))
	for _, fi := range infos {
		out = append(out, c.fileObject(fi))
	}
	return out, err
}

// lookupFile is c's file id, as it is now in /work.
func (c *container) lookupFile(ctx context.Context, id string) (containerFile, bool, error) {
	c.mu.Lock()
	p, ok := c.paths[id]
	c.mu.Unlock()
	if !ok {
		return containerFile{}, false, nil
	}
	all, err := c.files(ctx)
	if err != nil {
		return containerFile{}, false, err
	}
	for _, f := range all {
		if f.Path == path.Join(sandbox.WorkDir, p) {
			return f, true, nil
		}
	}
	return containerFile{}, false, nil
}

// withContainer runs fn on the request's container, answering 404 for one
// that is not the key's.
func (s *Server) withContainer(w http.ResponseWriter, r *http.Request, fn func(*container)) {
	c := s.container(ownerOf(r), r.PathValue("id"))
	if c == nil {
		notFound(w, "container", r.PathValue("id"))
		return
	}
	c.touch()
	fn(c)
}

func (s *Server) createContainerFile(w http.ResponseWriter, r *http.Request) {
	s.withContainer(w, r, func(c *container) {
		var err error
		if strings.HasPrefix(r.Header.Get("Content-Type"), "multipart/") {
			name, body, _, ok := readUpload(w, r)
			if !ok {
				return
			}
			defer body.Close()
			var dest string
			if dest, err = c.conv.Put(r.Context(), name, body); err == nil {
				rel := strings.TrimPrefix(dest, sandbox.WorkDir+"/")
				c.mu.Lock()
				c.user[rel] = true
				c.mu.Unlock()
				c.fileID(rel)
				s.answerFile(w, r, c, rel)
			}
		} else {
			var req struct {
				FileID string `json:"file_id"`
			}
			if !decode(w, r, &req) {
				return
			}
			f, ok := s.files.get(ownerOf(r), req.FileID)
			if !ok {
				badRequest(w, "file_id", "no file found with id '%s'; upload it with POST /v1/files, or send the file itself as multipart/form-data", req.FileID)
				return
			}
			if err = s.putFile(r.Context(), c, f); err == nil {
				s.answerFile(w, r, c, f.Filename)
			}
		}
		if err != nil {
			conversationError(w, err)
		}
	})
}

// answerFile answers with the container file at rel.
func (s *Server) answerFile(w http.ResponseWriter, r *http.Request, c *container, rel string) {
	f, ok, err := c.lookupFile(r.Context(), c.fileID(rel))
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
	s.withContainer(w, r, func(c *container) {
		files, err := c.files(r.Context())
		if err != nil && len(files) == 0 {
			conversationError(w, err)
			return
		}
		writeJSON(w, http.StatusOK, newList(files, func(f containerFile) string { return f.ID }))
	})
}

// withContainerFile runs fn on the request's container file, answering 404
// for one that is not there.
func (s *Server) withContainerFile(w http.ResponseWriter, r *http.Request, fn func(*container, containerFile)) {
	s.withContainer(w, r, func(c *container) {
		f, ok, err := c.lookupFile(r.Context(), r.PathValue("fid"))
		switch {
		case err != nil:
			conversationError(w, err)
		case !ok:
			notFound(w, "container file", r.PathValue("fid"))
		default:
			fn(c, f)
		}
	})
}

func (s *Server) getContainerFile(w http.ResponseWriter, r *http.Request) {
	s.withContainerFile(w, r, func(_ *container, f containerFile) { writeJSON(w, http.StatusOK, f) })
}

func (s *Server) getContainerFileContent(w http.ResponseWriter, r *http.Request) {
	s.withContainerFile(w, r, func(c *container, f containerFile) {
		rc, err := c.conv.ReadFile(r.Context(), f.Path)
		if err != nil {
			conversationError(w, err)
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
	s.withContainerFile(w, r, func(c *container, f containerFile) {
		if err := c.conv.RemoveFile(r.Context(), f.Path); err != nil {
			conversationError(w, err)
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
