package openaiapi

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"path"
	"slices"
	"strings"

	"github.com/terpdev/terp/internal/egress"
	"github.com/terpdev/terp/internal/sandbox"
	"github.com/terpdev/terp/internal/serve"
	"github.com/terpdev/terp/internal/serve/state"
)

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

// containerOptions is what a client may ask of a new container.
type containerOptions struct {
	Name         string         `json:"name"`
	FileIDs      []string       `json:"file_ids"`
	ExpiresAfter *expiresAfter  `json:"expires_after"`
	MemoryLimit  string         `json:"memory_limit"`
	Network      *networkPolicy `json:"network_policy"`
}

var memoryLimits = map[string]int64{"1g": 1 << 30, "4g": 4 << 30, "16g": 16 << 30, "64g": 64 << 30}

// newContainer is CreateContainer for OpenAI's container options: a
// mistake in opts is answered as a 400 by the caller, with the parameter
// the error names.
func (s *api) newContainer(ctx context.Context, owner string, opts containerOptions) (*serve.Lease, *paramError) {
	spec := serve.ContainerSpec{Name: opts.Name}
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

type paramError struct {
	param, message string
	err            error
}

func badParam(param, message string) *paramError { return &paramError{param: param, message: message} }

func (e *paramError) Error() string {
	if e.err != nil {
		return e.err.Error()
	}
	return e.message
}

func (e *paramError) Unwrap() error { return e.err }

func (e *paramError) answer(w http.ResponseWriter) { writeFailure(w, e) }

func (s *api) createContainer(w http.ResponseWriter, r *http.Request) {
	var opts containerOptions
	if !decode(w, r, &opts) {
		return
	}
	l, perr := s.newContainer(r.Context(), serve.Owner(r), opts)
	if perr != nil {
		perr.answer(w)
		return
	}
	l.Release(r.Context())
	writeJSON(w, http.StatusOK, containerObjectOf(l.Container().Record()))
}

func (s *api) listContainers(w http.ResponseWriter, r *http.Request) {
	owner := serve.Owner(r)
	recs, err := s.State().Containers(r.Context(), owner)
	if err != nil {
		serverError(w, err)
		return
	}
	out := make([]containerObject, 0, len(recs))
	for _, rec := range recs {
		if rec.Origin != "" {
			continue // another protocol's: a Jupyter kernel
		}
		if live, err := s.ContainerRecord(r.Context(), owner, rec.ID); err == nil {
			rec = live
		}
		out = append(out, containerObjectOf(rec))
	}
	writeJSON(w, http.StatusOK, newList(out, func(c containerObject) string { return c.ID }))
}

func (s *api) getContainer(w http.ResponseWriter, r *http.Request) {
	rec, err := s.ContainerRecord(r.Context(), serve.Owner(r), r.PathValue("id"))
	if err != nil {
		stateError(w, err, "container", r.PathValue("id"))
		return
	}
	writeJSON(w, http.StatusOK, containerObjectOf(rec))
}

func (s *api) deleteContainer(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	err := s.RemoveContainer(r.Context(), serve.Owner(r), id)
	switch {
	case s.Forwarded(w, r, err):
	case err != nil:
		writeFailure(w, err)
	default:
		writeJSON(w, http.StatusOK, deleted{ID: id, Object: "container.deleted", Deleted: true})
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

func (s *api) fileObject(ctx context.Context, c *serve.Container, fi sandbox.FileInfo) containerFile {
	id := s.FileID(ctx, c, fi.Path)
	source := "assistant"
	if c.FromClient(fi.Path) {
		source = "user"
	}
	return containerFile{ID: id, Object: "container.file", Bytes: fi.Size, ContainerID: c.ID,
		CreatedAt: fi.ModTime.Unix(), Path: path.Join(sandbox.DataDir, fi.Path), Source: source}
}

// files lists c's /work for the API.
func (s *api) files(ctx context.Context, c *serve.Container) ([]containerFile, error) {
	infos, err := c.Conversation().Files(ctx)
	out := make([]containerFile, 0, len(infos))
	for _, fi := range infos {
		out = append(out, s.fileObject(ctx, c, fi))
	}
	return out, err
}

// lookupFile is c's file id, as it is now in /work.
func (s *api) lookupFile(ctx context.Context, c *serve.Container, id string) (containerFile, bool, error) {
	p, ok := c.PathOf(id)
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
func (s *api) withContainer(w http.ResponseWriter, r *http.Request, fn func(*serve.Container)) {
	l, err := s.Acquire(r.Context(), serve.Owner(r), r.PathValue("id"))
	switch {
	case s.Forwarded(w, r, err):
		return
	case err != nil:
		writeFailure(w, err)
		return
	case l == nil:
		notFound(w, "container", r.PathValue("id"))
		return
	}
	defer l.Release(r.Context())
	fn(l.Container())
}

func (s *api) createContainerFile(w http.ResponseWriter, r *http.Request) {
	s.withContainer(w, r, func(c *serve.Container) {
		var err error
		if strings.HasPrefix(r.Header.Get("Content-Type"), "multipart/") {
			name, body, _, ok := s.readUpload(w, r)
			if !ok {
				return
			}
			if err = s.Put(r.Context(), c, name, body); err == nil {
				s.answerFile(w, r, c, name)
			}
		} else {
			var req struct {
				FileID string `json:"file_id"`
			}
			if !decode(w, r, &req) {
				return
			}
			f, perr := s.storedFile(r.Context(), serve.Owner(r), req.FileID, "file_id",
				fmt.Sprintf("no file found with id '%s'; upload it with POST /v1/files, or send the file itself as multipart/form-data", req.FileID))
			if perr != nil {
				perr.answer(w)
				return
			}
			if err = s.PutFile(r.Context(), c, f); err == nil {
				s.answerFile(w, r, c, f.Filename)
			}
		}
		if err != nil {
			writeFailure(w, err)
		}
	})
}

// answerFile answers with the container file at rel.
func (s *api) answerFile(w http.ResponseWriter, r *http.Request, c *serve.Container, rel string) {
	f, ok, err := s.lookupFile(r.Context(), c, s.FileID(r.Context(), c, rel))
	switch {
	case err != nil:
		serverError(w, err)
	case !ok:
		serverError(w, fmt.Errorf("/work/%s is not in the container after its upload", rel))
	default:
		writeJSON(w, http.StatusOK, f)
	}
}

func (s *api) listContainerFiles(w http.ResponseWriter, r *http.Request) {
	s.withContainer(w, r, func(c *serve.Container) {
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
func (s *api) withContainerFile(w http.ResponseWriter, r *http.Request, fn func(*serve.Container, containerFile)) {
	s.withContainer(w, r, func(c *serve.Container) {
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

func (s *api) getContainerFile(w http.ResponseWriter, r *http.Request) {
	s.withContainerFile(w, r, func(_ *serve.Container, f containerFile) { writeJSON(w, http.StatusOK, f) })
}

func (s *api) getContainerFileContent(w http.ResponseWriter, r *http.Request) {
	s.withContainerFile(w, r, func(c *serve.Container, f containerFile) {
		rc, err := c.Conversation().ReadFile(r.Context(), f.Path)
		if err != nil {
			writeFailure(w, err)
			return
		}
		defer rc.Close()
		serve.FileHeaders(w.Header(), path.Base(f.Path))
		serve.ServeContent(w, r, rc, f.Bytes)
	})
}

func (s *api) deleteContainerFile(w http.ResponseWriter, r *http.Request) {
	s.withContainerFile(w, r, func(c *serve.Container, f containerFile) {
		if err := c.Conversation().RemoveFile(r.Context(), f.Path); err != nil {
			writeFailure(w, err)
			return
		}
		writeJSON(w, http.StatusOK, deleted{ID: f.ID, Object: "container.file.deleted", Deleted: true})
	})
}

// linker returns the links of a turn's files (serve.Link) for r's answer,
// each file's made once however often it is named: "" for a file that
// could not be linked (one over --max-upload), which is named without.
func (s *api) linker(ctx context.Context, r *http.Request, c *serve.Container) func(p string) string {
	base, made := s.BaseURL(r), map[string]string{}
	return func(p string) string {
		if url, ok := made[p]; ok {
			return url
		}
		url, err := s.Link(ctx, base, c, p)
		if err != nil && !errors.Is(err, serve.ErrLinkTooLarge) {
			s.Log().Warn("linking a file", "container", c.ID, "file", p, "error", err)
		}
		made[p] = url
		return url
	}
}
