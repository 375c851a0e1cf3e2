// Package jupyter is the Jupyter Server API on terp serve's host, at the
// server's root: kernelspecs, kernels and their websocket channels,
// sessions, and a little of contents. Open WebUI's "jupyter" code
// interpreter, JupyterLab and VS Code's remote kernels, and a Jupyter
// Server started with --gateway-url run code through it in terp's
// sandboxes instead of on the machine the server runs on.
//
// A kernel is a container of the host (its id a UUID, as Jupyter's clients
// expect) whose conversation keeps a cell's value apart from its output, as
// Jupyter's execute_result does; its code runs through the host's exec
// path, so the key's container cap, the run cap, the per-run timeout, the
// egress policy, metrics and logs hold as for every protocol. A key sees
// only its own kernels. See docs/jupyter.md.
package jupyter

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/terpdev/terp/internal/conversation"
	"github.com/terpdev/terp/internal/serve"
	"github.com/terpdev/terp/internal/serve/state"
)

// origin names the kernels' containers, for the host's records and this
// package's listings.
const origin = "jupyter"

// specName is the one kernelspec terp offers.
const specName = "python3"

// api is the Jupyter Server API on one host.
type api struct {
	host    *serve.Server
	started time.Time
	// version is terp's, for kernel_info_reply.
	terpVersion string

	mu sync.Mutex
	// kernels are the kernels live in this process, by id: their
	// connections, and the execution that runs.
	kernels map[string]*hub
	// sessions are the sessions made in this process, by id.
	sessions map[string]*sessionModel
}

// Register serves the Jupyter Server API on host; version is terp's, which
// kernel_info_reply names.
func Register(host *serve.Server, version string) { host.Register(newAPI(host, version).protocol()) }

func newAPI(host *serve.Server, version string) *api {
	return &api{host: host, started: time.Now(), terpVersion: version, kernels: map[string]*hub{}, sessions: map[string]*sessionModel{}}
}

func (a *api) protocol() serve.Protocol {
	return serve.Protocol{Name: "jupyter", Credential: token, KeyIn: "the token parameter (?token=KEY) or Authorization: token KEY",
		Refuse: refuse, Routes: []serve.Route{
			{Pattern: "GET /login", Handler: a.loginForm, Public: true},
			{Pattern: "POST /login", Handler: a.login, Public: true},
			{Pattern: "GET /api", Handler: a.apiVersion, Public: true},
			{Pattern: "GET /api/{$}", Handler: a.apiVersion, Public: true},
			{Pattern: "GET /api/status", Handler: a.status},
			{Pattern: "GET /api/kernelspecs", Handler: a.kernelspecs},
			{Pattern: "GET /api/kernelspecs/{name}", Handler: a.kernelspec},
			{Pattern: "GET /api/kernels", Handler: a.listKernels},
			{Pattern: "POST /api/kernels", Handler: a.startKernel},
			{Pattern: "GET /api/kernels/{id}", Handler: a.getKernel},
			{Pattern: "DELETE /api/kernels/{id}", Handler: a.deleteKernel},
			{Pattern: "POST /api/kernels/{id}/interrupt", Handler: a.interruptKernel},
			{Pattern: "POST /api/kernels/{id}/restart", Handler: a.restartKernel},
			{Pattern: "GET /api/kernels/{id}/channels", Handler: a.channels},
			{Pattern: "GET /api/sessions", Handler: a.listSessions},
			{Pattern: "POST /api/sessions", Handler: a.createSession},
			{Pattern: "GET /api/sessions/{id}", Handler: a.getSession},
			{Pattern: "PATCH /api/sessions/{id}", Handler: a.patchSession},
			{Pattern: "DELETE /api/sessions/{id}", Handler: a.deleteSession},
			{Pattern: "GET /api/contents", Handler: a.getContents},
			{Pattern: "GET /api/contents/{path...}", Handler: a.getContents},
			{Pattern: "PUT /api/contents/{path...}", Handler: a.putContents},
		}}
}

// token is a request's key, where Jupyter's clients send their token: the
// token parameter (Open WebUI, on every call and on the websocket's URL),
// or an Authorization header with the token scheme (jupyter_server's
// gateway client) or Bearer; else the login cookie of password mode.
func token(r *http.Request) string {
	if t := r.URL.Query().Get("token"); t != "" {
		return t
	}
	scheme, key, _ := strings.Cut(r.Header.Get("Authorization"), " ")
	if strings.EqualFold(scheme, "token") || strings.EqualFold(scheme, "bearer") {
		return strings.TrimSpace(key)
	}
	return fromCookie(r)
}

// refuse answers an error as Jupyter Server does: its status, and a JSON
// body with the message.
func refuse(w http.ResponseWriter, err error) {
	if r := serve.AsRefusal(err); r != nil && r.RetryAfter > 0 {
		w.Header().Set("Retry-After", fmt.Sprint(int(r.RetryAfter.Seconds()+0.999)))
	}
	status, msg := statusOf(err), err.Error()
	if status == http.StatusInternalServerError {
		msg = serve.Internal(w, err)
	}
	serve.WriteJSON(w, status, map[string]any{"message": msg, "reason": nil})
}

// statusOf is the HTTP status of err: the client's mistakes are 400s, the
// rest as the host says.
func statusOf(err error) int {
	var bad *badRequest
	var input *conversation.InputError
	if errors.As(err, &bad) || errors.As(err, &input) {
		return http.StatusBadRequest
	}
	return serve.StatusOf(err)
}

func (a *api) apiVersion(w http.ResponseWriter, _ *http.Request) {
	serve.WriteJSON(w, http.StatusOK, map[string]string{"version": "2.14.2"})
}

func (a *api) status(w http.ResponseWriter, r *http.Request) {
	recs, err := a.kernelRecords(r.Context(), serve.Owner(r))
	if err != nil {
		refuse(w, err)
		return
	}
	a.mu.Lock()
	conns := 0
	for _, k := range a.kernels {
		conns += k.connections()
	}
	a.mu.Unlock()
	serve.WriteJSON(w, http.StatusOK, map[string]any{"started": a.started.UTC().Format(time.RFC3339), "last_activity": now(),
		"kernels": len(recs), "connections": conns})
}

// spec is the one kernelspec, as GET /api/kernelspecs lists it.
func spec() map[string]any {
	return map[string]any{"name": specName, "resources": map[string]string{}, "spec": map[string]any{
		"argv":         []string{"terp-sandbox", "python3"},
		"display_name": "Python 3 (terp sandbox)",
		"language":     "python",
		// Interrupts come through the API (POST .../interrupt, or an
		// interrupt_request), as with a kernel whose signals cannot
		// reach it.
		"interrupt_mode": "message",
		"env":            map[string]string{},
		"metadata":       map[string]any{"debugger": false},
	}}
}

func (a *api) kernelspecs(w http.ResponseWriter, _ *http.Request) {
	serve.WriteJSON(w, http.StatusOK, map[string]any{"default": specName, "kernelspecs": map[string]any{specName: spec()}})
}

func (a *api) kernelspec(w http.ResponseWriter, r *http.Request) {
	if r.PathValue("name") != specName {
		refuse(w, &serve.NotFoundError{Kind: "kernel spec", ID: r.PathValue("name")})
		return
	}
	serve.WriteJSON(w, http.StatusOK, spec())
}

// kernelModel is a kernel as the API shows it.
type kernelModel struct {
	ID             string `json:"id"`
	Name           string `json:"name"`
	LastActivity   string `json:"last_activity"`
	ExecutionState string `json:"execution_state"`
	Connections    int    `json:"connections"`
}

// model is the API's view of the kernel of rec.
func (a *api) model(rec state.Container) kernelModel {
	m := kernelModel{ID: rec.ID, Name: specName, LastActivity: rec.LastActive.UTC().Format("2006-01-02T15:04:05.000000Z"), ExecutionState: "idle"}
	if k := a.live(rec.ID); k != nil {
		m.ExecutionState, m.Connections = k.executionState(), k.connections()
	}
	return m
}

// kernelRecords are owner's kernels.
func (a *api) kernelRecords(ctx context.Context, owner string) ([]state.Container, error) {
	recs, err := a.host.State().Containers(ctx, owner)
	if err != nil {
		return nil, err
	}
	out := recs[:0]
	for _, rec := range recs {
		if rec.Origin == origin {
			out = append(out, rec)
		}
	}
	return out, nil
}

func (a *api) listKernels(w http.ResponseWriter, r *http.Request) {
	recs, err := a.kernelRecords(r.Context(), serve.Owner(r))
	if err != nil {
		refuse(w, err)
		return
	}
	out := make([]kernelModel, 0, len(recs))
	for _, rec := range recs {
		if live, err := a.host.ContainerRecord(r.Context(), rec.Owner, rec.ID); err == nil {
			rec = live
		}
		out = append(out, a.model(rec))
	}
	serve.WriteJSON(w, http.StatusOK, out)
}

// startRequest is what POST /api/kernels may say: the spec (only python3),
// and more that terp does not use (env, path).
type startRequest struct {
	Name string `json:"name"`
}

func (a *api) startKernel(w http.ResponseWriter, r *http.Request) {
	var req startRequest
	if err := decode(r, &req); err != nil {
		refuse(w, err)
		return
	}
	rec, err := a.newKernel(r.Context(), serve.Owner(r), req.Name)
	if err != nil {
		refuse(w, err)
		return
	}
	w.Header().Set("Location", "/api/kernels/"+rec.ID)
	serve.WriteJSON(w, http.StatusCreated, a.model(rec))
}

// newKernel makes a kernel of spec name ("" is python3) for owner.
func (a *api) newKernel(ctx context.Context, owner, name string) (state.Container, error) {
	if name != "" && name != specName {
		return state.Container{}, &badRequest{fmt.Sprintf("no kernel spec %q: terp's kernels are %s", name, specName)}
	}
	// Jupyter's clients do not say how long a kernel lives: it lives as
	// long as an OpenAI container left alone, and while a client is
	// connected (a connection holds a lease).
	l, err := a.host.CreateContainer(ctx, owner, serve.ContainerSpec{ID: newUUID(), Name: specName, Origin: origin, ValueApart: true,
		Network: a.host.SettingsNetwork()})
	if err != nil {
		return state.Container{}, err
	}
	defer l.Release(ctx)
	return l.Container().Record(), nil
}

// badRequest is a request Jupyter Server would refuse with 400.
type badRequest struct{ message string }

func (e *badRequest) Error() string { return e.message }

// decode reads a JSON body into v; an empty body leaves v as it is (Open
// WebUI starts a kernel with none).
func decode(r *http.Request, v any) error {
	if r.Body == nil || r.ContentLength == 0 {
		return nil
	}
	if err := json.NewDecoder(r.Body).Decode(v); err != nil && !errors.Is(err, io.EOF) {
		if refusal := serve.AsRefusal(err); refusal != nil {
			return refusal
		}
		return &badRequest{fmt.Sprintf("the request body is not the JSON this endpoint takes: %v", err)}
	}
	return nil
}

// withKernel runs fn on the request's kernel, leased; another key's, or one
// that is not there, is a 404, and one open in another replica is
// forwarded there.
func (a *api) withKernel(w http.ResponseWriter, r *http.Request, fn func(*serve.Lease)) {
	id := r.PathValue("id")
	var l *serve.Lease
	var err error
	if isUUID(id) {
		l, err = a.host.Acquire(r.Context(), serve.Owner(r), id)
	}
	switch {
	case a.host.Forwarded(w, r, err):
		return
	case err != nil:
		refuse(w, err)
		return
	case l == nil || l.Container().Record().Origin != origin:
		if l != nil {
			l.Release(r.Context())
		}
		refuse(w, &serve.NotFoundError{Kind: "kernel", ID: id})
		return
	}
	defer l.Release(context.WithoutCancel(r.Context()))
	fn(l)
}

func (a *api) getKernel(w http.ResponseWriter, r *http.Request) {
	a.withKernel(w, r, func(l *serve.Lease) { serve.WriteJSON(w, http.StatusOK, a.model(l.Container().Record())) })
}

func (a *api) deleteKernel(w http.ResponseWriter, r *http.Request) {
	a.withKernel(w, r, func(l *serve.Lease) {
		id := l.Container().ID
		k := a.live(id)
		if k != nil {
			k.interrupt()
		}
		l.Release(r.Context())
		if err := a.host.RemoveContainer(r.Context(), serve.Owner(r), id); err != nil {
			refuse(w, err)
			return
		}
		a.forget(id)
		// Answered before the websockets close, as Jupyter Server does: a
		// client that asked takes the kernel for gone, not for a lost
		// connection to reconnect.
		w.WriteHeader(http.StatusNoContent)
		_ = http.NewResponseController(w).Flush()
		if k != nil {
			k.shutdown()
		}
	})
}

func (a *api) interruptKernel(w http.ResponseWriter, r *http.Request) {
	a.withKernel(w, r, func(l *serve.Lease) {
		if k := a.live(l.Container().ID); k != nil {
			k.interrupt()
		}
		w.WriteHeader(http.StatusNoContent)
	})
}

func (a *api) restartKernel(w http.ResponseWriter, r *http.Request) {
	a.withKernel(w, r, func(l *serve.Lease) {
		k := a.kernel(l.Container())
		err := k.restart(r.Context(), l)
		k.endIfIdle() // made for the restart, if no client is connected
		if err != nil {
			refuse(w, err)
			return
		}
		serve.WriteJSON(w, http.StatusOK, a.model(l.Container().Record()))
	})
}

// live is the kernel id if it has connections or runs code in this
// process.
func (a *api) live(id string) *hub {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.kernels[id]
}

// kernel is the live kernel of c, made on first use.
func (a *api) kernel(c *serve.Container) *hub {
	a.mu.Lock()
	defer a.mu.Unlock()
	k := a.kernels[c.ID]
	if k == nil {
		k = newHub(a, c.ID, c.Owner)
		a.kernels[c.ID] = k
	}
	return k
}

// forget drops the live kernel id and the sessions on it.
func (a *api) forget(id string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	delete(a.kernels, id)
	for sid, s := range a.sessions {
		if s.Kernel.ID == id {
			delete(a.sessions, sid)
		}
	}
}
