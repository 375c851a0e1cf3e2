package cpuos

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/terpdev/terp/internal/sandbox"
)

// DefaultTemplate is the seed's template: CPython with numpy, pandas and
// matplotlib.
const DefaultTemplate = "python"

// Config configures the client.
type Config struct {
	// BaseURL is the API's root, e.g. http://127.0.0.1:8377.
	BaseURL string
	// APIKey is sent as a bearer token; APIKeyEnv names the variable it came
	// from, for error messages.
	APIKey    string
	APIKeyEnv string
	// Template is the sandbox template; DefaultTemplate when empty.
	Template string
	// HTTPClient is the client used; a client without overall timeout when
	// nil (process streams live long; contexts bound every call).
	HTTPClient *http.Client
	// Retries is how often a transient failure (connection refused, 429,
	// 502-504) is retried; 4 when zero, none when negative.
	Retries int
	// RetryWait is the first backoff, doubled each time up to 5s; 250ms
	// when zero.
	RetryWait time.Duration
}

// Backend creates cpuos sandboxes over HTTP.
type Backend struct {
	cfg  Config
	base *url.URL
	hc   *http.Client
}

var _ sandbox.Backend = (*Backend)(nil)

// New checks cfg and returns the backend. It makes no request.
func New(cfg Config) (*Backend, error) {
	if cfg.APIKeyEnv == "" {
		cfg.APIKeyEnv = "CPUOS_API_KEY"
	}
	if cfg.BaseURL == "" {
		return nil, errors.New("cpuos: no API URL; set cpuos_url (or --cpuos-url)")
	}
	base, err := url.Parse(strings.TrimRight(cfg.BaseURL, "/"))
	if err != nil || (base.Scheme != "http" && base.Scheme != "https") || base.Host == "" {
		return nil, fmt.Errorf("cpuos: cpuos_url %q is not an http(s) URL", cfg.BaseURL)
	}
	if cfg.APIKey == "" {
		return nil, fmt.Errorf("cpuos: no API key; set %s", cfg.APIKeyEnv)
	}
	if cfg.Template == "" {
		cfg.Template = DefaultTemplate
	}
	if cfg.Retries == 0 {
		cfg.Retries = 4
	}
	if cfg.RetryWait <= 0 {
		cfg.RetryWait = 250 * time.Millisecond
	}
	hc := cfg.HTTPClient
	if hc == nil {
		hc = &http.Client{}
	}
	return &Backend{cfg: cfg, base: base, hc: hc}, nil
}

// APIError is a non-2xx answer from the API.
type APIError struct {
	Status  int
	Code    string
	Message string
	keyEnv  string
}

func (e *APIError) Error() string {
	switch {
	case e.Status == http.StatusUnauthorized || e.Status == http.StatusForbidden:
		return fmt.Sprintf("cpuos rejected the API key in %s (HTTP %d): %s", e.keyEnv, e.Status, e.Message)
	case e.Status == http.StatusPaymentRequired || e.Status == http.StatusTooManyRequests:
		return fmt.Sprintf("cpuos quota or rate limit reached (HTTP %d): %s", e.Status, e.Message)
	case e.Code == codeSandboxNotFound:
		return "the cpuos sandbox no longer exists (expired, paused elsewhere or killed): " + e.Message
	}
	return fmt.Sprintf("cpuos: HTTP %d: %s", e.Status, e.Message)
}

// Unwrap maps the API's not-found answers to sandbox.ErrExpired and
// fs.ErrNotExist.
func (e *APIError) Unwrap() error {
	switch e.Code {
	case codeSandboxNotFound:
		return sandbox.ErrExpired
	case codeFileNotFound:
		return fs.ErrNotExist
	}
	return nil
}

func transientStatus(code int) bool {
	return code == http.StatusTooManyRequests || code == http.StatusBadGateway ||
		code == http.StatusServiceUnavailable || code == http.StatusGatewayTimeout
}

// request is one API call. body, when set, returns a fresh body for each
// attempt; nil from it means the body cannot be sent again (no retry).
type request struct {
	method, path string
	id, pid      string
	query        url.Values
	body         func() io.Reader
	json         any
}

func (b *Backend) url(r request) string {
	p := strings.ReplaceAll(r.path, "{id}", url.PathEscape(r.id))
	p = strings.ReplaceAll(p, "{pid}", url.PathEscape(r.pid))
	u := *b.base
	u.Path += p
	u.RawQuery = r.query.Encode()
	return u.String()
}

// do sends r, retrying transient failures, and returns a 2xx response.
func (b *Backend) do(ctx context.Context, r request) (*http.Response, error) {
	if r.json != nil {
		data, err := json.Marshal(r.json)
		if err != nil {
			return nil, err
		}
		r.body = func() io.Reader { return bytes.NewReader(data) }
	}
	wait := b.cfg.RetryWait
	for attempt := 0; ; attempt++ {
		var body io.Reader
		if r.body != nil {
			body = r.body()
		}
		req, err := http.NewRequestWithContext(ctx, r.method, b.url(r), body)
		if err != nil {
			return nil, err
		}
		req.Header.Set("Authorization", "Bearer "+b.cfg.APIKey)
		if r.json != nil {
			req.Header.Set("Content-Type", "application/json")
		} else if body != nil {
			req.Header.Set("Content-Type", "application/octet-stream")
		}
		resp, err := b.hc.Do(req)
		retry := false
		switch {
		case err != nil:
			retry = errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET)
			err = fmt.Errorf("cpuos: %s %s: %w", r.method, b.base.Host, err)
		case resp.StatusCode >= 200 && resp.StatusCode < 300:
			return resp, nil
		default:
			err = b.apiError(resp)
			retry = transientStatus(resp.StatusCode)
		}
		if !retry || attempt >= b.cfg.Retries || ctx.Err() != nil || (r.body != nil && r.json == nil && !rewindable(r)) {
			return nil, err
		}
		select {
		case <-ctx.Done():
			return nil, err
		case <-time.After(wait):
		}
		wait = min(2*wait, 5*time.Second)
	}
}

// rewindable reports whether a raw body can be sent again.
func rewindable(r request) bool { return r.body() != nil }

func (b *Backend) apiError(resp *http.Response) error {
	defer resp.Body.Close()
	data, _ := io.ReadAll(io.LimitReader(resp.Body, 16<<10))
	var eb errorBody
	if json.Unmarshal(data, &eb) != nil || eb.Message == "" {
		eb.Message = strings.TrimSpace(string(data))
		if eb.Message == "" {
			eb.Message = http.StatusText(resp.StatusCode)
		}
	}
	return &APIError{Status: resp.StatusCode, Code: eb.Code, Message: eb.Message, keyEnv: b.cfg.APIKeyEnv}
}

// call sends r and decodes the JSON answer into out (when not nil).
func (b *Backend) call(ctx context.Context, r request, out any, limit int64) error {
	resp, err := b.do(ctx, r)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if out == nil {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
		return nil
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, limit)).Decode(out); err != nil {
		return fmt.Errorf("cpuos: bad answer to %s %s: %w", r.method, r.path, err)
	}
	return nil
}

func seconds(d time.Duration) int {
	if d <= 0 {
		return 0
	}
	return int((d + time.Second - 1) / time.Second)
}

// Create starts a sandbox from the configured template.
func (b *Backend) Create(ctx context.Context, opt sandbox.Options) (sandbox.Sandbox, error) {
	var out sandboxResponse
	err := b.call(ctx, request{method: http.MethodPost, path: pathSandboxes, json: createRequest{
		TemplateID: b.cfg.Template, Timeout: seconds(opt.Timeout), Network: wireNetwork(opt.Network),
		MemoryBytes: opt.Limits.MemoryBytes, Processes: opt.Limits.Processes, FileSizeBytes: opt.Limits.FileSizeBytes,
		WorkBytes: opt.Limits.WorkBytes,
	}}, &out, 1<<20)
	if err != nil {
		return nil, err
	}
	if out.SandboxID == "" {
		return nil, errors.New("cpuos: the API created a sandbox without an id")
	}
	return &Sandbox{b: b, id: out.SandboxID}, nil
}

// Resume connects to the paused sandbox id; an unknown id is
// sandbox.ErrExpired.
func (b *Backend) Resume(ctx context.Context, id sandbox.SessionID) (sandbox.Sandbox, error) {
	var out sandboxResponse
	err := b.call(ctx, request{method: http.MethodPost, path: pathConnect, id: string(id), json: connectRequest{}}, &out, 1<<20)
	if err != nil {
		var ae *APIError
		if errors.As(err, &ae) && ae.Status == http.StatusNotFound && ae.Code == "" {
			ae.Code = codeSandboxNotFound
		}
		return nil, err
	}
	if out.SandboxID == "" {
		out.SandboxID = string(id)
	}
	return &Sandbox{b: b, id: out.SandboxID}, nil
}

// Sandbox is one cpuos sandbox.
type Sandbox struct {
	b  *Backend
	id string
}

var _ sandbox.Sandbox = (*Sandbox)(nil)

// ID is the sandbox's id, which Resume accepts.
func (s *Sandbox) ID() sandbox.SessionID { return sandbox.SessionID(s.id) }

func (s *Sandbox) req(method, path string) request {
	return request{method: method, path: path, id: s.id}
}

// WriteFile uploads r's bytes to path. A body that is an io.ReadSeeker is
// sent again on a transient failure; any other is sent once.
func (s *Sandbox) WriteFile(ctx context.Context, path string, r io.Reader) error {
	r0 := s.req(http.MethodPost, pathFiles)
	r0.query = url.Values{queryPath: {sandbox.WorkName(path)}}
	if rs, ok := r.(io.ReadSeeker); ok {
		start, err := rs.Seek(0, io.SeekCurrent)
		if err != nil {
			return err
		}
		r0.body = func() io.Reader {
			if _, err := rs.Seek(start, io.SeekStart); err != nil {
				return nil
			}
			return io.NopCloser(rs)
		}
	} else {
		used := false
		r0.body = func() io.Reader {
			if used {
				return nil
			}
			used = true
			return io.NopCloser(r)
		}
	}
	return s.b.call(ctx, r0, nil, 0)
}

// ReadFile downloads path.
func (s *Sandbox) ReadFile(ctx context.Context, path string) (io.ReadCloser, error) {
	r := s.req(http.MethodGet, pathFiles)
	r.query = url.Values{queryPath: {sandbox.WorkName(path)}}
	resp, err := s.b.do(ctx, r)
	if err != nil {
		return nil, err
	}
	return resp.Body, nil
}

// List returns the regular files under dir.
func (s *Sandbox) List(ctx context.Context, dir string) ([]sandbox.FileInfo, error) {
	r := s.req(http.MethodGet, pathList)
	r.query = url.Values{queryPath: {sandbox.WorkName(dir)}}
	var out listResponse
	if err := s.b.call(ctx, r, &out, 64<<20); err != nil {
		return nil, err
	}
	files := make([]sandbox.FileInfo, len(out.Files))
	for i, f := range out.Files {
		files[i] = sandbox.FileInfo{Path: f.Path, Size: f.Size, Mode: fs.FileMode(f.Mode), ModTime: f.ModTime}
	}
	if out.Total > len(files) {
		return files, &sandbox.TruncatedError{Listed: len(files), Total: out.Total}
	}
	return files, nil
}

func envMap(env []string) map[string]string {
	if len(env) == 0 {
		return nil
	}
	m := make(map[string]string, len(env))
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		m[k] = v
	}
	return m
}

// bound re-cuts s to limit bytes, head and tail, in case the server kept more.
func bound(s string, limit int) string {
	if len(s) <= limit {
		return s
	}
	c := sandbox.NewCapture(limit)
	_, _ = c.Write([]byte(s))
	return c.String()
}

// Exec runs cmd to completion. The answer is read with a bound derived from
// MaxStdout and MaxStderr, so a server that ignores them cannot flood terp.
func (s *Sandbox) Exec(ctx context.Context, cmd []string, opt sandbox.ExecOptions) (sandbox.ExecResult, error) {
	maxOut, maxErr := opt.MaxStdout, opt.MaxStderr
	if maxOut <= 0 {
		maxOut = sandbox.DefaultMaxOutput
	}
	if maxErr <= 0 {
		maxErr = sandbox.DefaultMaxOutput
	}
	req := execRequest{Cmd: cmd, Cwd: opt.Dir, Env: envMap(opt.Env), TimeoutMs: opt.Timeout.Milliseconds(), MaxStdout: maxOut, MaxStderr: maxErr}
	if opt.Stdin != nil {
		in, err := io.ReadAll(opt.Stdin)
		if err != nil {
			return sandbox.ExecResult{}, fmt.Errorf("read stdin: %w", err)
		}
		req.Stdin = in
	}
	r := s.req(http.MethodPost, pathExec)
	r.json = req
	var out execResponse
	// JSON escapes a byte into at most 6; the rest is small.
	limit := int64(6*(maxOut+maxErr)) + 64<<10
	if err := s.b.call(ctx, r, &out, limit); err != nil {
		return sandbox.ExecResult{}, err
	}
	return sandbox.ExecResult{
		ExitCode: out.ExitCode, Stdout: bound(out.Stdout, maxOut), Stderr: bound(out.Stderr, maxErr),
		StdoutBytes: out.StdoutBytes, StderrBytes: out.StderrBytes,
		TimedOut: out.TimedOut, Stopped: out.Stopped, Duration: time.Duration(out.DurationMs) * time.Millisecond,
	}, nil
}

// Pause pauses the sandbox and returns the session id Resume takes.
func (s *Sandbox) Pause(ctx context.Context) (sandbox.SessionID, error) {
	var out pauseResponse
	if err := s.b.call(ctx, s.req(http.MethodPost, pathPause), &out, 1<<20); err != nil {
		return "", err
	}
	if out.SessionID == "" {
		out.SessionID = s.id
	}
	return sandbox.SessionID(out.SessionID), nil
}

// Close kills the sandbox. One that is already gone is not an error.
func (s *Sandbox) Close(ctx context.Context) error {
	err := s.b.call(ctx, s.req(http.MethodDelete, pathSandbox), nil, 0)
	if errors.Is(err, sandbox.ErrExpired) {
		return nil
	}
	return err
}

// Start starts a long-lived process (the kernel) through the processes
// endpoints: stdin is sent write by write, stdout and stderr are streamed.
// When ctx ends the process is killed.
func (s *Sandbox) Start(ctx context.Context, cmd []string, opt sandbox.ExecOptions) (sandbox.Process, error) {
	r := s.req(http.MethodPost, pathProcesses)
	r.json = processRequest{Cmd: cmd, Cwd: opt.Dir, Env: envMap(opt.Env)}
	var out processResponse
	if err := s.b.call(ctx, r, &out, 1<<20); err != nil {
		return nil, err
	}
	p := &process{s: s, pid: out.PID}
	open := func(path string) (io.ReadCloser, error) {
		rq := s.req(http.MethodGet, path)
		rq.pid = p.pid
		resp, err := s.b.do(ctx, rq)
		if err != nil {
			return nil, err
		}
		return resp.Body, nil
	}
	var err error
	if p.stdout, err = open(pathStdout); err == nil {
		p.stderr, err = open(pathStderr)
	}
	if err != nil {
		_ = p.Signal(sandbox.SIGKILL)
		if p.stdout != nil {
			p.stdout.Close()
		}
		return nil, err
	}
	p.stop = context.AfterFunc(ctx, func() { _ = p.Signal(sandbox.SIGKILL) })
	p.stdin = &stdinWriter{p: p}
	if opt.Stdin != nil {
		go func() {
			_, _ = io.Copy(p.stdin, opt.Stdin)
			_ = p.stdin.Close()
		}()
	}
	return p, nil
}

type process struct {
	s              *Sandbox
	pid            string
	stdin          *stdinWriter
	stdout, stderr io.ReadCloser
	stop           func() bool

	once    sync.Once
	code    int
	err     error
	stopped string
}

var _ sandbox.StopReporter = (*process)(nil)

// StopReason is why the server stopped the process, once Wait returned.
func (p *process) StopReason() string { return p.stopped }

func (p *process) req(method, path string) request {
	r := p.s.req(method, path)
	r.pid = p.pid
	return r
}

func (p *process) Stdin() io.WriteCloser { return p.stdin }
func (p *process) Stdout() io.Reader     { return p.stdout }
func (p *process) Stderr() io.Reader     { return p.stderr }

func (p *process) Signal(sig sandbox.Signal) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	r := p.req(http.MethodPost, pathSignal)
	r.json = signalRequest{Signal: string(sig)}
	return p.s.b.call(ctx, r, nil, 0)
}

func (p *process) Wait() (int, error) {
	p.once.Do(func() {
		var out waitResponse
		p.err = p.s.b.call(context.Background(), p.req(http.MethodGet, pathWait), &out, 1<<20)
		if p.err == nil {
			p.code, p.stopped = out.ExitCode, out.Stopped
			if out.Error != "" {
				p.err = errors.New(out.Error)
			}
		}
		p.stop()
	})
	return p.code, p.err
}

// stdinWriter sends each Write as one request.
type stdinWriter struct {
	p      *process
	mu     sync.Mutex
	closed bool
}

func (w *stdinWriter) Write(b []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return 0, io.ErrClosedPipe
	}
	r := w.p.req(http.MethodPost, pathStdin)
	data := bytes.Clone(b)
	r.body = func() io.Reader { return bytes.NewReader(data) }
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := w.p.s.b.call(ctx, r, nil, 0); err != nil {
		return 0, err
	}
	return len(b), nil
}

func (w *stdinWriter) Close() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return nil
	}
	w.closed = true
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return w.p.s.b.call(ctx, w.p.req(http.MethodDelete, pathStdin), nil, 0)
}

// wireNetwork is the create request's network field: absent for none.
func wireNetwork(n sandbox.Network) *networkSpec {
	if n.Off() {
		return nil
	}
	return &networkSpec{Mode: string(n.Mode), Allow: n.Allow}
}
