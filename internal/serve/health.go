package serve

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/terpdev/terp/internal/sandbox"
)

// ReadyCheck is one thing /readyz checks before it calls the server ready:
// something every request needs that can fail while the process runs.
type ReadyCheck struct {
	// Name is how /readyz reports it: upstream, store, sandbox.
	Name string
	// Check returns why the thing is not usable, or nil.
	Check func(context.Context) error
	// Every is how long a result stands before the check runs again (0:
	// at every /readyz). /readyz answers anyone without a key, so a check
	// that costs something (making a sandbox) must not run at every probe.
	Every time.Duration
	// Timeout bounds one run of Check (0: 5 s).
	Timeout time.Duration
}

// How often and how patiently the checks run: the model list is cheap, a
// sandbox is made and closed at most once a minute.
const (
	upstreamEvery   = 5 * time.Second
	upstreamTimeout = 3 * time.Second
	sandboxEvery    = time.Minute
	sandboxTimeout  = 30 * time.Second
)

// SandboxCheck is the readiness check of a sandbox backend: it makes a
// sandbox and closes it, at most once a minute, which proves what a new
// container needs without running code.
func SandboxCheck(backend sandbox.Backend) ReadyCheck {
	return ReadyCheck{Name: "sandbox", Every: sandboxEvery, Timeout: sandboxTimeout, Check: func(ctx context.Context) error {
		sbx, err := backend.Create(ctx, sandbox.Options{Timeout: time.Minute})
		if err != nil {
			return fmt.Errorf("cannot create a sandbox: %w", err)
		}
		if err := sbx.Close(context.WithoutCancel(ctx)); err != nil {
			return fmt.Errorf("cannot close a sandbox: %w", err)
		}
		return nil
	}}
}

// readyState is a check with its last result, which concurrent probes
// share: one runs the check, the others wait for its result.
type readyState struct {
	ReadyCheck
	mu   sync.Mutex
	at   time.Time
	err  error
	took time.Duration
}

// result runs the check if its last result is older than Every.
func (st *readyState) result() (at time.Time, took time.Duration, err error) {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.at.IsZero() || time.Since(st.at) >= st.Every {
		timeout := st.Timeout
		if timeout == 0 {
			timeout = 5 * time.Second
		}
		// Not the probe's context: a probe that hangs up must not leave a
		// cancelled check as the result others read.
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		start := time.Now()
		st.err = st.Check(ctx)
		st.took = time.Since(start)
		cancel()
		st.at = time.Now()
	}
	return st.at, st.took, st.err
}

// readyChecks are the server's checks: the model server, the state (which
// says itself whether it takes writes: a file on disk, a database), and
// those of its Config (the sandbox backend's, from the front-end that has
// the backend).
func (s *Server) readyChecks() []*readyState {
	checks := []ReadyCheck{
		{Name: "upstream", Check: s.upstreamReady, Every: upstreamEvery, Timeout: upstreamTimeout},
		{Name: "store", Check: s.state.Check},
	}
	checks = append(checks, s.cfg.Ready...)
	out := make([]*readyState, len(checks))
	for i, c := range checks {
		out[i] = &readyState{ReadyCheck: c}
	}
	return out
}

// upstreamReady asks the model server for its models, with upstream's key.
func (s *Server) upstreamReady(ctx context.Context) error {
	url := s.UpstreamURL("/models")
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	if key, _ := s.cfg.Settings.APIKey(); key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err := s.cfg.Upstream.Do(req)
	if err != nil {
		return fmt.Errorf("the model server does not answer: %w", err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, MaxUpstreamBody))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("the model server answered GET %s with %s", url, resp.Status)
	}
	return nil
}

// checkReport is one check in /readyz's answer.
type checkReport struct {
	Name   string `json:"name"`
	Status string `json:"status"` // ok or fail
	Error  string `json:"error,omitempty"`
	// CheckedAt is when the result was found: a check with Every may
	// report one found a while ago.
	CheckedAt  time.Time `json:"checked_at"`
	DurationMS int64     `json:"duration_ms"`
}

// readyz answers 200 when every check passes, 503 otherwise, with each
// check's result. The checks run at once.
func (s *Server) readyz(w http.ResponseWriter, _ *http.Request) {
	reports := make([]checkReport, len(s.ready))
	var wg sync.WaitGroup
	for i, st := range s.ready {
		wg.Go(func() {
			at, took, err := st.result()
			reports[i] = checkReport{Name: st.Name, Status: "ok", CheckedAt: at.UTC(), DurationMS: took.Milliseconds()}
			if err != nil {
				reports[i].Status, reports[i].Error = "fail", err.Error()
			}
		})
	}
	wg.Wait()
	status, code := "ready", http.StatusOK
	for _, r := range reports {
		if r.Status != "ok" {
			status, code = "unavailable", http.StatusServiceUnavailable
		}
	}
	if s.draining.Load() {
		status, code = "stopping", http.StatusServiceUnavailable
	}
	w.Header().Set("Cache-Control", "no-store")
	WriteJSON(w, code, map[string]any{"status": status, "checks": reports})
}

// healthz answers 200 while the process serves: nothing it depends on is
// asked, so that a restart is never the answer to a model server that is
// down.
func (s *Server) healthz(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Cache-Control", "no-store")
	WriteJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}

// health is the probes, and a /metrics that says where the metrics are:
// never on the API's listener, where anyone with the address would see
// every key's name and use. All are public: probes and scrapers send no
// key.
func (s *Server) health() Protocol {
	return Protocol{Name: "health", Routes: []Route{
		{Pattern: "GET /healthz", Handler: s.healthz, Public: true},
		{Pattern: "GET /readyz", Handler: s.readyz, Public: true},
		{Pattern: "GET /metrics", Public: true, Handler: func(w http.ResponseWriter, _ *http.Request) {
			WriteJSON(w, http.StatusNotFound, map[string]map[string]any{"error": {"type": "invalid_request_error", "code": "unknown_url", "param": nil,
				"message": "terp serve's metrics have a listener of their own, without a key: start it with --metrics-listen ADDR and scrape http://ADDR/metrics."}})
		}},
	}}
}

// MetricsHandler serves /metrics, /healthz and /readyz, without a key, for
// a listener of their own (terp serve --metrics-listen) that only the
// operator's scraper and probes reach.
func (s *Server) MetricsHandler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", s.metrics.Handler())
	mux.HandleFunc("GET /healthz", s.healthz)
	mux.HandleFunc("GET /readyz", s.readyz)
	return mux
}
