package jupyter

import (
	"encoding/json"
	"net/http"
	"strings"

	"github.com/terpdev/terp/internal/serve"
)

// sessionModel is a session: a notebook (or console) tied to a kernel, as
// JupyterLab and VS Code make one before they connect. Sessions live in
// the process that made them; their kernels are containers like any other.
type sessionModel struct {
	ID       string      `json:"id"`
	Path     string      `json:"path"`
	Name     string      `json:"name"`
	Type     string      `json:"type"`
	Kernel   kernelModel `json:"kernel"`
	Notebook struct {
		Path string `json:"path"`
		Name string `json:"name"`
	} `json:"notebook"`

	owner string
}

// sessionRequest is what POST and PATCH /api/sessions say.
type sessionRequest struct {
	Path   *string `json:"path"`
	Name   *string `json:"name"`
	Type   *string `json:"type"`
	Kernel *struct {
		ID   string `json:"id"`
		Name string `json:"name"`
	} `json:"kernel"`
}

func (a *api) listSessions(w http.ResponseWriter, r *http.Request) {
	owner := serve.Owner(r)
	a.mu.Lock()
	out := []sessionModel{}
	for _, s := range a.sessions {
		if s.owner == owner {
			out = append(out, *s)
		}
	}
	a.mu.Unlock()
	for i := range out {
		out[i].Kernel = a.kernelModelOf(r, out[i].Kernel.ID)
	}
	serve.WriteJSON(w, http.StatusOK, out)
}

// kernelModelOf is the kernel id as it is now.
func (a *api) kernelModelOf(r *http.Request, id string) kernelModel {
	rec, err := a.host.ContainerRecord(r.Context(), serve.Owner(r), id)
	if err != nil {
		return kernelModel{ID: id, Name: specName, ExecutionState: "dead"}
	}
	return a.model(rec)
}

func (a *api) createSession(w http.ResponseWriter, r *http.Request) {
	var req sessionRequest
	if err := decode(r, &req); err != nil {
		refuse(w, err)
		return
	}
	s := &sessionModel{ID: newUUID(), Type: "notebook", owner: serve.Owner(r)}
	s.apply(req)
	if !a.bindKernel(w, r, s, req) {
		return
	}
	a.mu.Lock()
	a.sessions[s.ID] = s
	a.mu.Unlock()
	serve.WriteJSON(w, http.StatusCreated, s)
}

// bindKernel gives s the kernel req names, or a new one, answering the
// request when it cannot.
func (a *api) bindKernel(w http.ResponseWriter, r *http.Request, s *sessionModel, req sessionRequest) bool {
	if req.Kernel != nil && req.Kernel.ID != "" {
		rec, err := a.host.ContainerRecord(r.Context(), s.owner, req.Kernel.ID)
		if err != nil || rec.Origin != origin {
			refuse(w, &serve.NotFoundError{Kind: "kernel", ID: req.Kernel.ID})
			return false
		}
		s.Kernel = a.model(rec)
		return true
	}
	name := ""
	if req.Kernel != nil {
		name = req.Kernel.Name
	}
	rec, err := a.newKernel(r.Context(), s.owner, name)
	if err != nil {
		refuse(w, err)
		return false
	}
	s.Kernel = a.model(rec)
	return true
}

func (s *sessionModel) apply(req sessionRequest) {
	if req.Path != nil {
		s.Path = *req.Path
	}
	if req.Name != nil {
		s.Name = *req.Name
	}
	if req.Type != nil {
		s.Type = *req.Type
	}
	s.Notebook.Path, s.Notebook.Name = s.Path, s.Name
}

// session is the request's session, or nil after answering 404.
func (a *api) session(w http.ResponseWriter, r *http.Request) *sessionModel {
	a.mu.Lock()
	s := a.sessions[r.PathValue("id")]
	a.mu.Unlock()
	if s == nil || s.owner != serve.Owner(r) {
		refuse(w, &serve.NotFoundError{Kind: "session", ID: r.PathValue("id")})
		return nil
	}
	return s
}

func (a *api) getSession(w http.ResponseWriter, r *http.Request) {
	if s := a.session(w, r); s != nil {
		out := *s
		out.Kernel = a.kernelModelOf(r, s.Kernel.ID)
		serve.WriteJSON(w, http.StatusOK, out)
	}
}

func (a *api) patchSession(w http.ResponseWriter, r *http.Request) {
	s := a.session(w, r)
	if s == nil {
		return
	}
	var req sessionRequest
	if err := decode(r, &req); err != nil {
		refuse(w, err)
		return
	}
	a.mu.Lock()
	next := *s
	a.mu.Unlock()
	next.apply(req)
	if req.Kernel != nil && (req.Kernel.ID == "" || req.Kernel.ID != s.Kernel.ID) {
		if !a.bindKernel(w, r, &next, req) {
			return
		}
	}
	a.mu.Lock()
	*s = next
	a.mu.Unlock()
	serve.WriteJSON(w, http.StatusOK, next)
}

// deleteSession ends the session and shuts its kernel down, as Jupyter
// Server does.
func (a *api) deleteSession(w http.ResponseWriter, r *http.Request) {
	s := a.session(w, r)
	if s == nil {
		return
	}
	a.mu.Lock()
	delete(a.sessions, s.ID)
	a.mu.Unlock()
	k := a.live(s.Kernel.ID)
	if k != nil {
		k.interrupt()
	}
	if err := a.host.RemoveContainer(r.Context(), s.owner, s.Kernel.ID); err != nil && serve.StatusOf(err) != http.StatusNotFound {
		refuse(w, err)
		return
	}
	a.forget(s.Kernel.ID)
	w.WriteHeader(http.StatusNoContent)
	_ = http.NewResponseController(w).Flush()
	if k != nil {
		k.shutdown()
	}
}

// decodeContent reads m's content into v.
func decodeContent(m message, v any) error { return json.Unmarshal(m.Content, v) }

// truncate cuts s to n bytes, for a websocket close reason.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n]
}

// splitComma splits a header's comma-separated list.
func splitComma(h string) []string {
	var out []string
	for _, p := range strings.Split(h, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}
