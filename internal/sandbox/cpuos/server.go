package cpuos

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/terpdev/terp/internal/sandbox"
)

// Server implements the contract in contract.go on top of another backend
// (normally local). It is a cpuos-compatible server for development, for
// tests of the client, and for hosting sandboxes on another machine:
// `terp sandbox serve` runs it. Every request must carry the bearer token.
type Server struct {
	backend sandbox.Backend
	token   string

	mu        sync.Mutex
	sandboxes map[string]*served
}

// served is a live sandbox and the processes started in it.
type served struct {
	sbx   sandbox.Sandbox
	life  context.Context // ends when the sandbox is paused or closed
	stop  context.CancelFunc
	mu    sync.Mutex
	procs map[string]*servedProc
	next  int
}

type servedProc struct {
	p sandbox.Process
}

// NewServer returns a server that runs sandboxes on backend and accepts
// requests bearing token. token must not be empty.
func NewServer(backend sandbox.Backend, token string) (*Server, error) {
	if token == "" {
		return nil, errors.New("cpuos server: a bearer token is required")
	}
	return &Server{backend: backend, token: token, sandboxes: map[string]*served{}}, nil
}

// Handler returns the HTTP handler serving the contract.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST "+pathSandboxes, s.create)
	mux.HandleFunc("DELETE "+pathSandbox, s.kill)
	mux.HandleFunc("POST "+pathConnect, s.connect)
	mux.HandleFunc("POST "+pathPause, s.withSandbox(s.pause))
	mux.HandleFunc("GET "+pathFiles, s.withSandbox(s.readFile))
	mux.HandleFunc("POST "+pathFiles, s.withSandbox(s.writeFile))
	mux.HandleFunc("GET "+pathList, s.withSandbox(s.list))
	mux.HandleFunc("POST "+pathExec, s.withSandbox(s.exec))
	mux.HandleFunc("POST "+pathProcesses, s.withSandbox(s.start))
	mux.HandleFunc("POST "+pathStdin, s.withProc(s.stdin))
	mux.HandleFunc("DELETE "+pathStdin, s.withProc(s.closeStdin))
	mux.HandleFunc("GET "+pathStdout, s.withProc(func(w http.ResponseWriter, r *http.Request, p *servedProc) { stream(w, r, p.p.Stdout()) }))
	mux.HandleFunc("GET "+pathStderr, s.withProc(func(w http.ResponseWriter, r *http.Request, p *servedProc) { stream(w, r, p.p.Stderr()) }))
	mux.HandleFunc("POST "+pathSignal, s.withProc(s.signal))
	mux.HandleFunc("GET "+pathWait, s.withProc(s.wait))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		if !ok || subtle.ConstantTimeCompare([]byte(got), []byte(s.token)) != 1 {
			writeError(w, http.StatusUnauthorized, "", "missing or wrong bearer token")
			return
		}
		mux.ServeHTTP(w, r)
	})
}

// Close closes every live sandbox.
func (s *Server) Close(ctx context.Context) error {
	s.mu.Lock()
	all := s.sandboxes
	s.sandboxes = map[string]*served{}
	s.mu.Unlock()
	var errs []error
	for _, sv := range all {
		sv.stop()
		errs = append(errs, sv.sbx.Close(ctx))
	}
	return errors.Join(errs...)
}

func writeError(w http.ResponseWriter, status int, code, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(errorBody{Code: code, Message: msg})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// fail reports err with the status its kind calls for.
func fail(w http.ResponseWriter, err error) {
	switch {
	case errors.Is(err, sandbox.ErrExpired):
		writeError(w, http.StatusNotFound, codeSandboxNotFound, err.Error())
	case errors.Is(err, fs.ErrNotExist):
		writeError(w, http.StatusNotFound, codeFileNotFound, err.Error())
	default:
		writeError(w, http.StatusInternalServerError, "", err.Error())
	}
}

func (s *Server) add(sbx sandbox.Sandbox) string {
	life, stop := context.WithCancel(context.Background())
	id := string(sbx.ID())
	s.mu.Lock()
	s.sandboxes[id] = &served{sbx: sbx, life: life, stop: stop, procs: map[string]*servedProc{}}
	s.mu.Unlock()
	return id
}

func (s *Server) remove(id string) *served {
	s.mu.Lock()
	defer s.mu.Unlock()
	sv := s.sandboxes[id]
	delete(s.sandboxes, id)
	return sv
}

func (s *Server) withSandbox(h func(http.ResponseWriter, *http.Request, *served)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		sv := s.sandboxes[r.PathValue("id")]
		s.mu.Unlock()
		if sv == nil {
			writeError(w, http.StatusNotFound, codeSandboxNotFound, "no sandbox "+r.PathValue("id")+": it expired, was paused or was killed")
			return
		}
		h(w, r, sv)
	}
}

func (s *Server) withProc(h func(http.ResponseWriter, *http.Request, *servedProc)) http.HandlerFunc {
	return s.withSandbox(func(w http.ResponseWriter, r *http.Request, sv *served) {
		sv.mu.Lock()
		p := sv.procs[r.PathValue("pid")]
		sv.mu.Unlock()
		if p == nil {
			writeError(w, http.StatusNotFound, "", "no process "+r.PathValue("pid"))
			return
		}
		h(w, r, p)
	})
}

func (s *Server) create(w http.ResponseWriter, r *http.Request) {
	var req createRequest
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		writeError(w, http.StatusBadRequest, "", "bad request: "+err.Error())
		return
	}
	sbx, err := s.backend.Create(r.Context(), sandbox.Options{
		Timeout: time.Duration(req.Timeout) * time.Second,
		Network: req.Network.policy(),
		Limits:  sandbox.Limits{MemoryBytes: req.MemoryBytes, Processes: req.Processes, FileSizeBytes: req.FileSizeBytes},
	})
	if err != nil {
		fail(w, err)
		return
	}
	writeJSON(w, http.StatusCreated, sandboxResponse{SandboxID: s.add(sbx), TemplateID: req.TemplateID})
}

func (s *Server) connect(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	s.mu.Lock()
	sv := s.sandboxes[id]
	s.mu.Unlock()
	if sv != nil { // already running
		writeJSON(w, http.StatusOK, sandboxResponse{SandboxID: id})
		return
	}
	sbx, err := s.backend.Resume(r.Context(), sandbox.SessionID(id))
	if err != nil {
		fail(w, err)
		return
	}
	writeJSON(w, http.StatusOK, sandboxResponse{SandboxID: s.add(sbx)})
}

// kill closes a live sandbox, or removes a paused one.
func (s *Server) kill(w http.ResponseWriter, r *http.Request) {
	var sbx sandbox.Sandbox
	if sv := s.remove(r.PathValue("id")); sv != nil {
		sv.stop()
		sbx = sv.sbx
	} else {
		var err error
		if sbx, err = s.backend.Resume(r.Context(), sandbox.SessionID(r.PathValue("id"))); err != nil {
			fail(w, err)
			return
		}
	}
	if err := sbx.Close(r.Context()); err != nil {
		fail(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (s *Server) pause(w http.ResponseWriter, r *http.Request, sv *served) {
	s.remove(r.PathValue("id"))
	sv.stop()
	id, err := sv.sbx.Pause(r.Context())
	if err != nil {
		fail(w, err)
		return
	}
	writeJSON(w, http.StatusOK, pauseResponse{SessionID: string(id)})
}

func (s *Server) readFile(w http.ResponseWriter, r *http.Request, sv *served) {
	rc, err := sv.sbx.ReadFile(r.Context(), r.URL.Query().Get(queryPath))
	if err != nil {
		fail(w, err)
		return
	}
	defer rc.Close()
	w.Header().Set("Content-Type", "application/octet-stream")
	_, _ = io.Copy(w, rc)
}

func (s *Server) writeFile(w http.ResponseWriter, r *http.Request, sv *served) {
	if err := sv.sbx.WriteFile(r.Context(), r.URL.Query().Get(queryPath), r.Body); err != nil {
		fail(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (s *Server) list(w http.ResponseWriter, r *http.Request, sv *served) {
	files, err := sv.sbx.List(r.Context(), r.URL.Query().Get(queryPath))
	if err != nil {
		fail(w, err)
		return
	}
	out := listResponse{Files: make([]fileEntry, len(files))}
	for i, f := range files {
		out.Files[i] = fileEntry{Path: f.Path, Size: f.Size, Mode: uint32(f.Mode), ModTime: f.ModTime}
	}
	writeJSON(w, http.StatusOK, out)
}

func envList(m map[string]string) []string {
	var env []string
	for k, v := range m {
		env = append(env, k+"="+v)
	}
	return env
}

func (s *Server) exec(w http.ResponseWriter, r *http.Request, sv *served) {
	var req execRequest
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		writeError(w, http.StatusBadRequest, "", "bad request: "+err.Error())
		return
	}
	opt := sandbox.ExecOptions{
		Dir: req.Cwd, Env: envList(req.Env), Timeout: time.Duration(req.TimeoutMs) * time.Millisecond,
		MaxStdout: req.MaxStdout, MaxStderr: req.MaxStderr,
	}
	if req.Stdin != nil {
		opt.Stdin = strings.NewReader(string(req.Stdin))
	}
	res, err := sv.sbx.Exec(r.Context(), req.Cmd, opt)
	if err != nil {
		fail(w, err)
		return
	}
	writeJSON(w, http.StatusOK, execResponse{
		ExitCode: res.ExitCode, Stdout: res.Stdout, Stderr: res.Stderr,
		StdoutBytes: res.StdoutBytes, StderrBytes: res.StderrBytes,
		TimedOut: res.TimedOut, DurationMs: res.Duration.Milliseconds(),
	})
}

func (s *Server) start(w http.ResponseWriter, r *http.Request, sv *served) {
	var req processRequest
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		writeError(w, http.StatusBadRequest, "", "bad request: "+err.Error())
		return
	}
	// The process lives as long as the sandbox, not as this request.
	p, err := sv.sbx.Start(sv.life, req.Cmd, sandbox.ExecOptions{Dir: req.Cwd, Env: envList(req.Env)})
	if err != nil {
		fail(w, err)
		return
	}
	sv.mu.Lock()
	sv.next++
	pid := strconv.Itoa(sv.next)
	sv.procs[pid] = &servedProc{p: p}
	sv.mu.Unlock()
	writeJSON(w, http.StatusCreated, processResponse{PID: pid})
}

func (s *Server) stdin(w http.ResponseWriter, r *http.Request, p *servedProc) {
	if _, err := io.Copy(p.p.Stdin(), r.Body); err != nil {
		writeError(w, http.StatusGone, "", "stdin: "+err.Error())
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (s *Server) closeStdin(w http.ResponseWriter, r *http.Request, p *servedProc) {
	_ = p.p.Stdin().Close()
	w.WriteHeader(http.StatusNoContent)
}

// stream copies a process's output to the response, flushing every read so
// the client sees output as it is written.
func stream(w http.ResponseWriter, r *http.Request, out io.Reader) {
	w.Header().Set("Content-Type", "application/octet-stream")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	_ = rc.Flush()
	buf := make([]byte, 32<<10)
	for {
		n, err := out.Read(buf)
		if n > 0 {
			if _, werr := w.Write(buf[:n]); werr != nil {
				return
			}
			if rc.Flush() != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

func (s *Server) signal(w http.ResponseWriter, r *http.Request, p *servedProc) {
	var req signalRequest
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		writeError(w, http.StatusBadRequest, "", "bad request: "+err.Error())
		return
	}
	if err := p.p.Signal(sandbox.Signal(req.Signal)); err != nil {
		writeError(w, http.StatusBadRequest, "", err.Error())
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (s *Server) wait(w http.ResponseWriter, r *http.Request, p *servedProc) {
	code, err := p.p.Wait()
	resp := waitResponse{ExitCode: code}
	if err != nil {
		resp.Error = err.Error()
	}
	writeJSON(w, http.StatusOK, resp)
}

// policy is the egress policy a create request asks for.
func (n *networkSpec) policy() sandbox.Network {
	if n == nil {
		return sandbox.Network{}
	}
	return sandbox.Network{Mode: sandbox.NetworkMode(n.Mode), Allow: n.Allow}
}
