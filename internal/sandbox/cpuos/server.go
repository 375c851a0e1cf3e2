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
	// exitGrace is how long a process that has exited keeps its entry when
	// the client has not yet collected all of it (both streams read to the
	// end and its exit status waited for): a client that died or never
	// waits must not make the server remember the process forever, and a
	// slow one still gets its exit status. Tests shorten it.
	exitGrace time.Duration

	mu        sync.Mutex
	sandboxes map[string]*served
}

// defaultExitGrace is Server.exitGrace unless a test changes it.
const defaultExitGrace = time.Minute

// served is a live sandbox and the processes started in it.
type served struct {
	sbx  sandbox.Sandbox
	life context.Context // ends when the sandbox is paused or closed
	stop context.CancelFunc
	mu   sync.Mutex
	// procs holds a process from its start until the client has collected
	// everything about it, or until exitGrace after it exited: the kernel
	// starts a new process on every restart, so entries must not outlive
	// their process.
	procs map[string]*servedProc
	next  int
}

// Indexes of a process's output streams in servedProc.claimed and drained.
const (
	streamStdout = iota
	streamStderr
)

// servedProc is one started process and what the client has collected of
// it. waited, claimed and drained are guarded by the owning served's mu.
type servedProc struct {
	p   sandbox.Process
	pid string
	// exited is closed when p has exited; code and err are then set.
	exited chan struct{}
	code   int
	err    error

	waited  bool    // a wait answer with the exit status was written
	claimed [2]bool // the stream was requested (each may be read once)
	drained [2]bool // the stream was read to its end
}

// NewServer returns a server that runs sandboxes on backend and accepts
// requests bearing token. token must not be empty.
func NewServer(backend sandbox.Backend, token string) (*Server, error) {
	if token == "" {
		return nil, errors.New("cpuos server: a bearer token is required")
	}
	return &Server{backend: backend, token: token, exitGrace: defaultExitGrace, sandboxes: map[string]*served{}}, nil
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
	mux.HandleFunc("GET "+pathStdout, s.withSandbox(func(w http.ResponseWriter, r *http.Request, sv *served) { sv.output(w, r, streamStdout) }))
	mux.HandleFunc("GET "+pathStderr, s.withSandbox(func(w http.ResponseWriter, r *http.Request, sv *served) { sv.output(w, r, streamStderr) }))
	mux.HandleFunc("POST "+pathSignal, s.withProc(s.signal))
	mux.HandleFunc("GET "+pathWait, s.withSandbox(s.wait))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		if !ok {
			got = r.Header.Get(HeaderToken)
			ok = got != ""
		}
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
		if p := sv.proc(w, r); p != nil {
			h(w, r, p)
		}
	})
}

// proc returns the process the request names, or answers 404 and returns
// nil.
func (sv *served) proc(w http.ResponseWriter, r *http.Request) *servedProc {
	pid := r.PathValue("pid")
	sv.mu.Lock()
	p := sv.procs[pid]
	issued := false
	if n, err := strconv.Atoi(pid); err == nil && n >= 1 && n <= sv.next {
		issued = true
	}
	sv.mu.Unlock()
	switch {
	case p != nil:
		return p
	case issued:
		writeError(w, http.StatusNotFound, "", "process "+pid+" has exited and its exit status was collected (or not collected in time); start a new one")
	default:
		writeError(w, http.StatusNotFound, "", "no process "+pid)
	}
	return nil
}

// processes is how many process entries the server holds, for tests.
func (s *Server) processes() int {
	s.mu.Lock()
	all := make([]*served, 0, len(s.sandboxes))
	for _, sv := range s.sandboxes {
		all = append(all, sv)
	}
	s.mu.Unlock()
	n := 0
	for _, sv := range all {
		sv.mu.Lock()
		n += len(sv.procs)
		sv.mu.Unlock()
	}
	return n
}

// settle removes p's entry once the client has collected everything: the
// exit status and both streams to their end. Any later request for it
// gets a 404 that says so.
func (sv *served) settle(p *servedProc) {
	sv.mu.Lock()
	defer sv.mu.Unlock()
	if p.waited && p.drained[streamStdout] && p.drained[streamStderr] {
		delete(sv.procs, p.pid)
	}
}

// expire removes p's entry whatever the client collected, once exitGrace
// has passed since it exited. A stream nobody asked for is read to its end
// and dropped, so its pipe is closed.
func (sv *served) expire(p *servedProc) {
	sv.mu.Lock()
	delete(sv.procs, p.pid)
	var unread []io.Reader
	for i, claimed := range p.claimed {
		if !claimed {
			p.claimed[i] = true
			unread = append(unread, p.stream(i))
		}
	}
	sv.mu.Unlock()
	for _, r := range unread {
		go func() { _, _ = io.Copy(io.Discard, r) }()
	}
}

func (p *servedProc) stream(i int) io.Reader {
	if i == streamStdout {
		return p.p.Stdout()
	}
	return p.p.Stderr()
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
		Limits:  sandbox.Limits{MemoryBytes: req.MemoryBytes, Processes: req.Processes, FileSizeBytes: req.FileSizeBytes, WorkBytes: req.WorkBytes},
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
	var cut *sandbox.TruncatedError
	if err != nil && !errors.As(err, &cut) {
		fail(w, err)
		return
	}
	out := listResponse{Files: make([]fileEntry, len(files))}
	if cut != nil {
		out.Total = cut.Total
	}
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
		TimedOut: res.TimedOut, Stopped: res.Stopped, DurationMs: res.Duration.Milliseconds(),
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
	sp := &servedProc{p: p, pid: strconv.Itoa(sv.next), exited: make(chan struct{})}
	sv.procs[sp.pid] = sp
	sv.mu.Unlock()
	grace := s.exitGrace
	go func() {
		sp.code, sp.err = p.Wait()
		close(sp.exited)
		time.AfterFunc(grace, func() { sv.expire(sp) })
	}()
	writeJSON(w, http.StatusCreated, processResponse{PID: sp.pid})
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

// output streams one of a process's outputs to the client. Each stream is
// served once: a second reader would get an arbitrary part of it.
func (sv *served) output(w http.ResponseWriter, r *http.Request, i int) {
	p := sv.proc(w, r)
	if p == nil {
		return
	}
	sv.mu.Lock()
	claimed := p.claimed[i]
	p.claimed[i] = true
	sv.mu.Unlock()
	if claimed {
		writeError(w, http.StatusConflict, "", "this output of process "+p.pid+" is already being read; each stream may be read once")
		return
	}
	stream(w, p.stream(i))
	sv.mu.Lock()
	p.drained[i] = true
	sv.mu.Unlock()
	sv.settle(p)
}

// stream copies a process's output to the response, flushing every read so
// the client sees output as it is written. It reads out to its end even
// when the client goes away, so the process never blocks on a full pipe.
func stream(w http.ResponseWriter, out io.Reader) {
	w.Header().Set("Content-Type", "application/octet-stream")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	_ = rc.Flush()
	buf := make([]byte, 32<<10)
	for {
		n, err := out.Read(buf)
		if n > 0 {
			if _, werr := w.Write(buf[:n]); werr != nil || rc.Flush() != nil {
				_, _ = io.Copy(io.Discard, out)
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

// wait answers once the process has exited. The answer counts as
// collected only when it was sent in full; a client that gave up waiting
// has not collected it.
func (s *Server) wait(w http.ResponseWriter, r *http.Request, sv *served) {
	p := sv.proc(w, r)
	if p == nil {
		return
	}
	select {
	case <-p.exited:
	case <-r.Context().Done():
		return
	}
	resp := waitResponse{ExitCode: p.code}
	if sr, ok := p.p.(sandbox.StopReporter); ok {
		resp.Stopped = sr.StopReason()
	}
	if p.err != nil {
		resp.Error = p.err.Error()
	}
	data, err := json.Marshal(resp)
	if err != nil {
		writeError(w, http.StatusInternalServerError, "", err.Error())
		return
	}
	w.Header().Set("Content-Type", "application/json")
	if _, err := w.Write(append(data, '\n')); err != nil {
		return
	}
	sv.mu.Lock()
	p.waited = true
	sv.mu.Unlock()
	sv.settle(p)
}

// policy is the egress policy a create request asks for.
func (n *networkSpec) policy() sandbox.Network {
	if n == nil {
		return sandbox.Network{}
	}
	return sandbox.Network{Mode: sandbox.NetworkMode(n.Mode), Allow: n.Allow}
}
