package openaiapi

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/terpdev/terp/internal/agent"
	"github.com/terpdev/terp/internal/config"
	"github.com/terpdev/terp/internal/conversation"
	"github.com/terpdev/terp/internal/llm"
	"github.com/terpdev/terp/internal/llm/llmtest"
	"github.com/terpdev/terp/internal/sandbox"
	"github.com/terpdev/terp/internal/sandbox/memory"
	"github.com/terpdev/terp/internal/serve"
	"github.com/terpdev/terp/internal/serve/state"
	"github.com/terpdev/terp/internal/store"
	"github.com/terpdev/terp/internal/terptest"
)

// These tests run terp serve on the in-memory sandbox, whose stand-in for
// Python runs lines like "print 42", wired as `terp serve` wires it: the
// model client's requests go through the server's metrics. They reach it
// over real HTTP, its API on one listener and its metrics on their own.

// obsServer is terp serve with its API and its metrics listener.
type obsServer struct {
	api, ops *httptest.Server
	srv      *serve.Server
	// cfg is what srv was made with.
	cfg     serve.Config
	backend *flakyBackend
	log     *syncBuffer
}

// obsOptions change an obsServer before it starts.
type obsOptions struct {
	// debug logs at debug level with Config.LogDebug.
	debug bool
	serve func(*serve.Config)
}

func newObsServer(t *testing.T, upstreamURL string, opts obsOptions) *obsServer {
	t.Helper()
	dir := terptest.TempDir(t)
	st, err := store.Open(filepath.Join(dir, "data"))
	if err != nil {
		t.Fatal(err)
	}
	backend := &flakyBackend{Backend: memory.New(memory.Config{Programs: map[string]memory.Program{"python3": memory.PythonStandIn}})}
	cfg := config.Default()
	cfg.BaseURL, cfg.Model, cfg.Sandbox, cfg.ExecMode, cfg.IdlePause = upstreamURL, "test-model", "memory", "script", 0
	metrics := serve.NewMetrics()
	svc := conversation.New(conversation.Deps{
		Store:      st,
		NewBackend: func(*config.Config) (sandbox.Backend, error) { return backend, nil },
		NewModel: func(c *config.Config) agent.Completer {
			return llm.New(llm.Config{BaseURL: c.BaseURL, MaxRetries: -1, HTTPClient: &http.Client{Transport: metrics.Transport(nil)}})
		},
	})
	log := &syncBuffer{}
	level := slog.LevelInfo
	if opts.debug {
		level = slog.LevelDebug
	}
	sc := serve.Config{Conversations: svc, Settings: cfg, DataDir: filepath.Join(dir, "serve"),
		Keys:     map[string]serve.Principal{aliceKey: {Name: "alice"}, bobKey: {Name: "bob"}},
		Metrics:  metrics,
		Ready:    []serve.ReadyCheck{serve.SandboxCheck(backend)},
		Log:      slog.New(slog.NewTextHandler(log, &slog.HandlerOptions{Level: level})),
		LogDebug: opts.debug}
	if opts.serve != nil {
		opts.serve(&sc)
	}
	srv, err := serve.New(sc)
	if err != nil {
		t.Fatal(err)
	}
	Register(srv, Options{})
	o := &obsServer{api: httptest.NewServer(srv.Handler()), ops: httptest.NewServer(srv.MetricsHandler()), srv: srv, cfg: sc, backend: backend, log: log}
	t.Cleanup(func() {
		o.api.Close()
		o.ops.Close()
		srv.Close(context.Background())
	})
	return o
}

func (o *obsServer) client(key string) openai.Client {
	return openai.NewClient(option.WithBaseURL(o.api.URL+"/v1"), option.WithAPIKey(key), option.WithMaxRetries(0))
}

// ask runs one Responses request as alice.
func (o *obsServer) ask(t *testing.T, question string, opts ...option.RequestOption) *responses.Response {
	t.Helper()
	client := o.client(aliceKey)
	resp, err := client.Responses.New(ctx(t), responses.ResponseNewParams{
		Model: "test-model",
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String(question)},
		Tools: []responses.ToolUnionParam{codeInterpreter()},
	}, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// scrape reads /metrics as Prometheus does, with its own text parser.
func (o *obsServer) scrape(t *testing.T) map[string]*dto.MetricFamily {
	t.Helper()
	resp, err := http.Get(o.ops.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /metrics: %s", resp.Status)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("/metrics is not Prometheus's text format: %v", err)
	}
	return fams
}

// metric is the series of family name with exactly these labels, or nil.
func metric(fams map[string]*dto.MetricFamily, name string, labels map[string]string) *dto.Metric {
	f := fams[name]
	if f == nil {
		return nil
	}
	for _, m := range f.GetMetric() {
		if len(m.GetLabel()) != len(labels) {
			continue
		}
		match := true
		for _, l := range m.GetLabel() {
			match = match && labels[l.GetName()] == l.GetValue()
		}
		if match {
			return m
		}
	}
	return nil
}

func counter(t *testing.T, fams map[string]*dto.MetricFamily, name string, labels map[string]string) float64 {
	t.Helper()
	m := metric(fams, name, labels)
	if m == nil {
		t.Fatalf("no series %s%v in /metrics", name, labels)
	}
	if c := m.GetCounter(); c != nil {
		return c.GetValue()
	}
	return m.GetGauge().GetValue()
}

func samples(t *testing.T, fams map[string]*dto.MetricFamily, name string, labels map[string]string) uint64 {
	t.Helper()
	m := metric(fams, name, labels)
	if m == nil {
		t.Fatalf("no histogram %s%v in /metrics", name, labels)
	}
	return m.GetHistogram().GetSampleCount()
}

// A Responses request that runs code moves every metric it touches, with
// the labels an operator would query: the route's pattern, the status, the
// model server's endpoint, the run's result, the key's name (never the key).
func TestMetricsCountAResponse(t *testing.T) {
	s := llmtest.New(t, llmtest.Fixed(llmtest.RunPython("print 42")), answerFromTool("It is "))
	o := newObsServer(t, s.BaseURL(), obsOptions{})
	resp := o.ask(t, "What is 6 times 7?")
	if resp.OutputText() != "It is 42" {
		t.Fatalf("answered %q", resp.OutputText())
	}
	// A request without a key counts under its route too.
	bad, err := http.Get(o.api.URL + "/v1/files")
	if err != nil {
		t.Fatal(err)
	}
	bad.Body.Close()

	fams := o.scrape(t)
	route := map[string]string{"route": "POST /v1/responses"}
	if got := counter(t, fams, "terp_http_requests_total", map[string]string{"route": "POST /v1/responses", "code": "200"}); got != 1 {
		t.Errorf("terp_http_requests_total of the response = %v, want 1", got)
	}
	if got := counter(t, fams, "terp_http_requests_total", map[string]string{"route": "GET /v1/files", "code": "401"}); got != 1 {
		t.Errorf("terp_http_requests_total of the keyless request = %v, want 1", got)
	}
	if got := samples(t, fams, "terp_http_request_duration_seconds", route); got != 1 {
		t.Errorf("terp_http_request_duration_seconds of the response has %d samples, want 1", got)
	}
	// Two model calls: the one that ran the code, the one that answered.
	if got := samples(t, fams, "terp_upstream_request_duration_seconds", map[string]string{"endpoint": "chat/completions", "code": "200"}); got != 2 {
		t.Errorf("terp_upstream_request_duration_seconds has %d samples, want 2", got)
	}
	if got := counter(t, fams, "terp_code_runs_total", map[string]string{"result": "ok"}); got != 1 {
		t.Errorf("terp_code_runs_total{result=ok} = %v, want 1", got)
	}
	if got := samples(t, fams, "terp_code_run_duration_seconds", nil); got != 1 {
		t.Errorf("terp_code_run_duration_seconds has %d samples, want 1", got)
	}
	in := counter(t, fams, "terp_tokens_total", map[string]string{"key_name": "alice", "direction": "input"})
	out := counter(t, fams, "terp_tokens_total", map[string]string{"key_name": "alice", "direction": "output"})
	if in != float64(resp.Usage.InputTokens) || out != float64(resp.Usage.OutputTokens) || in == 0 {
		t.Errorf("terp_tokens_total of alice: input %v, output %v; the response's usage: %d, %d", in, out, resp.Usage.InputTokens, resp.Usage.OutputTokens)
	}
	if got := counter(t, fams, "terp_containers", map[string]string{"state": "active"}); got != 1 {
		t.Errorf("terp_containers{state=active} = %v, want 1", got)
	}
	if got := counter(t, fams, "terp_sandbox_failures_total", map[string]string{"stage": "create"}); got != 0 {
		t.Errorf("terp_sandbox_failures_total{stage=create} = %v, want 0", got)
	}
	if fams["go_goroutines"] == nil || fams["process_start_time_seconds"] == nil {
		t.Error("the Go runtime's and the process's metrics are missing")
	}
	for name, f := range fams {
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if strings.Contains(l.GetValue(), aliceKey) {
					t.Errorf("%s has a label with alice's key: %s=%q", name, l.GetName(), l.GetValue())
				}
			}
		}
	}

	// The API's listener serves no metrics, and says where they are.
	resp2, err := http.Get(o.api.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp2.Body)
	resp2.Body.Close()
	if resp2.StatusCode != http.StatusNotFound || !strings.Contains(string(body), "--metrics-listen") {
		t.Errorf("GET /metrics on the API's listener: %s %s", resp2.Status, body)
	}
}

// A container whose sandbox cannot be made, and a turn that ends because
// its paused sandbox cannot be woken, count as sandbox failures; a code run
// that raises counts as an error; a container idle past idle_pause counts
// as paused.
func TestMetricsCountFailuresAndPausedContainers(t *testing.T) {
	s := llmtest.New(t, llmtest.Fixed(llmtest.RunPython("exit 1")), llmtest.Fixed(llmtest.Answer("It failed.")))
	o := newObsServer(t, s.BaseURL(), obsOptions{serve: func(c *serve.Config) { c.Settings.IdlePause = 20 * time.Millisecond }})
	first := o.ask(t, "Fail, please.")

	fams := o.scrape(t)
	if got := counter(t, fams, "terp_code_runs_total", map[string]string{"result": "error"}); got != 1 {
		t.Errorf("terp_code_runs_total{result=error} = %v, want 1", got)
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		fams = o.scrape(t)
		if counter(t, fams, "terp_containers", map[string]string{"state": "paused"}) == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the idle container never counted as paused")
		}
	}
	if got := counter(t, fams, "terp_containers", map[string]string{"state": "active"}); got != 0 {
		t.Errorf("terp_containers{state=active} = %v with the one container paused", got)
	}

	o.backend.setFailure(errors.New("the sandbox host is gone"))
	client := o.client(aliceKey)
	second, err := client.Responses.New(ctx(t), responses.ResponseNewParams{
		Model: "test-model", PreviousResponseID: openai.String(first.ID),
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("Again?")},
		Tools: []responses.ToolUnionParam{codeInterpreter()},
	})
	if err != nil || second.Status != responses.ResponseStatusFailed {
		t.Fatalf("a turn whose sandbox cannot be woken: %v, %+v", err, second)
	}
	created, err := http.DefaultClient.Do(authorized(t, "POST", o.api.URL+"/v1/containers", `{"name": "x"}`, aliceKey))
	if err != nil {
		t.Fatal(err)
	}
	created.Body.Close()
	if created.StatusCode != http.StatusInternalServerError {
		t.Errorf("a container whose sandbox cannot be made: %s", created.Status)
	}
	fams = o.scrape(t)
	for _, stage := range []string{"turn", "create"} {
		if got := counter(t, fams, "terp_sandbox_failures_total", map[string]string{"stage": stage}); got != 1 {
			t.Errorf("terp_sandbox_failures_total{stage=%s} = %v, want 1", stage, got)
		}
	}
	if !strings.Contains(o.log.String(), "turn failed") || !strings.Contains(o.log.String(), "the sandbox host is gone") {
		t.Errorf("the failed turn is not logged with its cause:\n%s", o.log)
	}
}

// A container kept in the state by a server that stopped, which the next
// server cannot open (its backend fails), counts as a failure to open.
func TestMetricsCountContainersThatCannotOpen(t *testing.T) {
	st, err := state.OpenDir(terptest.TempDir(t))
	if err != nil {
		t.Fatal(err)
	}
	up := llmtest.New(t)
	a := newObsServer(t, up.BaseURL(), obsOptions{serve: func(c *serve.Config) { c.State = st }})
	resp, err := http.DefaultClient.Do(authorized(t, "POST", a.api.URL+"/v1/containers", `{"name": "kept"}`, aliceKey))
	if err != nil {
		t.Fatal(err)
	}
	var created struct{ ID string }
	err = json.NewDecoder(resp.Body).Decode(&created)
	resp.Body.Close()
	if err != nil || created.ID == "" {
		t.Fatalf("create a container: %s %v", resp.Status, err)
	}
	a.srv.Close(context.Background())

	b, err := serve.New(serve.Config{Conversations: a.cfg.Conversations, Settings: a.cfg.Settings, State: st,
		Keys: map[string]serve.Principal{aliceKey: {Name: "alice"}}})
	if err != nil {
		t.Fatal(err)
	}
	Register(b, Options{})
	api, ops := httptest.NewServer(b.Handler()), httptest.NewServer(b.MetricsHandler())
	t.Cleanup(func() {
		api.Close()
		ops.Close()
		b.Close(context.Background())
	})
	a.backend.setFailure(errors.New("the sandbox host is gone"))
	resp, err = http.DefaultClient.Do(authorized(t, "GET", api.URL+"/v1/containers/"+created.ID+"/files", "", aliceKey))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusInternalServerError {
		t.Errorf("a container that cannot be opened: %s", resp.Status)
	}
	fams := (&obsServer{ops: ops}).scrape(t)
	if got := counter(t, fams, "terp_sandbox_failures_total", map[string]string{"stage": "open"}); got != 1 {
		t.Errorf("terp_sandbox_failures_total{stage=open} = %v, want 1", got)
	}
}

// A request that one replica forwards to another goes through Upstream's
// transport, and is not the model server's: it is not timed as one.
func TestMetricsLeaveForwardedRequestsOut(t *testing.T) {
	peer := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {}))
	defer peer.Close()
	m := serve.NewMetrics()
	hc := &http.Client{Transport: m.Transport(nil)}
	for _, forwarded := range []bool{true, false} {
		req, _ := http.NewRequest("GET", peer.URL+"/v1/models", nil)
		if forwarded {
			req.Header.Set(serve.ForwardedHeader, "replica-b")
		}
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	srv := httptest.NewServer(m.Handler())
	defer srv.Close()
	fams := (&obsServer{ops: srv}).scrape(t)
	if got := samples(t, fams, "terp_upstream_request_duration_seconds", map[string]string{"endpoint": "models", "code": "200"}); got != 1 {
		t.Errorf("%d requests timed as upstream's, want the one not forwarded", got)
	}
}

// Two servers in one process count apart, and one serve.Metrics serves one
// server only.
func TestMetricsPerServer(t *testing.T) {
	s := llmtest.New(t, llmtest.Fixed(llmtest.RunPython("print 1")), answerFromTool(""))
	a := newObsServer(t, s.BaseURL(), obsOptions{})
	b := newObsServer(t, s.BaseURL(), obsOptions{})
	a.ask(t, "One?")
	if m := metric(b.scrape(t), "terp_http_requests_total", map[string]string{"route": "POST /v1/responses", "code": "200"}); m != nil {
		t.Errorf("the other server counted the request: %v", m)
	}
	_, err := serve.New(serve.Config{Conversations: a.cfg.Conversations, Settings: a.cfg.Settings, DataDir: t.TempDir(), NoAuth: true, Metrics: a.cfg.Metrics})
	if err == nil || !strings.Contains(err.Error(), "one per Server") {
		t.Errorf("a second server on the same Metrics: %v", err)
	}
}

// /healthz answers without a key, on both listeners, whatever upstream
// does, and is not logged unless at debug level: probes come every few
// seconds.
func TestHealthz(t *testing.T) {
	o := newObsServer(t, "http://127.0.0.1:1/v1", obsOptions{})
	for _, base := range []string{o.api.URL, o.ops.URL} {
		resp, err := http.Get(base + "/healthz")
		if err != nil {
			t.Fatal(err)
		}
		var got map[string]string
		err = json.NewDecoder(resp.Body).Decode(&got)
		resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusOK || got["status"] != "ok" {
			t.Errorf("GET %s/healthz: %s %v %v", base, resp.Status, got, err)
		}
	}
	if strings.Contains(o.log.String(), "healthz") {
		t.Errorf("a probe that passed is logged at info level:\n%s", o.log)
	}
}

// readyReport is /readyz's answer.
type readyReport struct {
	Status string `json:"status"`
	Checks []struct {
		Name   string `json:"name"`
		Status string `json:"status"`
		Error  string `json:"error"`
	} `json:"checks"`
}

func getReady(t *testing.T, base string) (int, readyReport) {
	t.Helper()
	resp, err := http.Get(base + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var r readyReport
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
		t.Fatalf("/readyz answered %s with no JSON: %v", resp.Status, err)
	}
	return resp.StatusCode, r
}

// /readyz answers 200 when the model server, the store and the sandbox
// backend all work, and 503 naming the check that failed, and why, when
// one does not.
func TestReadyz(t *testing.T) {
	up := llmtest.New(t)
	downURL := "http://" + terptest.RefusedAddr(t) + "/v1"
	for _, tt := range []struct {
		name     string
		upstream string
		// breakIt runs after the server starts.
		breakIt func(o *obsServer)
		serve   func(*serve.Config)
		failing string
		why     string
	}{
		{name: "all good", upstream: up.BaseURL()},
		{name: "upstream down", upstream: downURL, failing: "upstream", why: "does not answer"},
		{name: "data dir not writable", upstream: up.BaseURL(), failing: "store", why: "is not writable",
			// Root writes in a read-only directory; nobody writes in a
			// directory that became a file.
			breakIt: func(o *obsServer) {
				dir := o.cfg.DataDir
				if err := os.RemoveAll(dir); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(dir, []byte("not a directory"), 0o600); err != nil {
					t.Fatal(err)
				}
			}},
		{name: "state refuses writes", upstream: up.BaseURL(), failing: "store", why: "the database refuses writes",
			serve: func(c *serve.Config) {
				st, err := state.OpenDir(t.TempDir())
				if err != nil {
					t.Fatal(err)
				}
				c.State = refusingState{st}
			}},
		{name: "sandbox backend fails", upstream: up.BaseURL(), failing: "sandbox", why: "cannot create a sandbox: no sandbox host",
			breakIt: func(o *obsServer) { o.backend.setFailure(errors.New("no sandbox host")) }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			o := newObsServer(t, tt.upstream, obsOptions{serve: tt.serve})
			if tt.breakIt != nil {
				tt.breakIt(o)
			}
			for _, base := range []string{o.api.URL, o.ops.URL} {
				code, r := getReady(t, base)
				names := map[string]bool{}
				for _, c := range r.Checks {
					names[c.Name] = true
					switch {
					case c.Name == tt.failing && (c.Status != "fail" || !strings.Contains(c.Error, tt.why)):
						t.Errorf("check %s: %s %q, want fail saying %q", c.Name, c.Status, c.Error, tt.why)
					case c.Name != tt.failing && c.Status != "ok":
						t.Errorf("check %s: %s %q, want ok", c.Name, c.Status, c.Error)
					}
				}
				if !names["upstream"] || !names["store"] || !names["sandbox"] {
					t.Errorf("checks %v, want upstream, store and sandbox", r.Checks)
				}
				wantCode, wantStatus := http.StatusOK, "ready"
				if tt.failing != "" {
					wantCode, wantStatus = http.StatusServiceUnavailable, "unavailable"
				}
				if code != wantCode || r.Status != wantStatus {
					t.Errorf("GET %s/readyz: %d %q, want %d %q", base, code, r.Status, wantCode, wantStatus)
				}
			}
		})
	}
}

// A costly check runs at most once per its Every, however many probes ask,
// even at once.
func TestReadyzCachesCostlyChecks(t *testing.T) {
	var mu sync.Mutex
	runs := 0
	costly := serve.ReadyCheck{Name: "costly", Every: time.Hour, Check: func(context.Context) error {
		mu.Lock()
		runs++
		mu.Unlock()
		time.Sleep(20 * time.Millisecond)
		return nil
	}}
	up := llmtest.New(t)
	o := newObsServer(t, up.BaseURL(), obsOptions{serve: func(c *serve.Config) { c.Ready = []serve.ReadyCheck{costly} }})
	var wg sync.WaitGroup
	codes := make([]int, 5)
	for i := range codes {
		wg.Go(func() {
			resp, err := http.Get(o.api.URL + "/readyz")
			if err == nil {
				codes[i] = resp.StatusCode
				resp.Body.Close()
			}
		})
	}
	wg.Wait()
	mu.Lock()
	defer mu.Unlock()
	if runs != 1 || slices.ContainsFunc(codes, func(c int) bool { return c != http.StatusOK }) {
		t.Errorf("the costly check ran %d times for 5 probes, which got %v; want once, all 200", runs, codes)
	}
}

// The log has one line per request with its method, route, status,
// duration, key name and request id, and a line per run; it never holds
// the key, the prompt or the code, unless the debug flag says to log them.
func TestLogsHoldNoKeysNorCode(t *testing.T) {
	const secret = "TOP-SECRET-31337"
	for _, debug := range []bool{false, true} {
		name := "default"
		if debug {
			name = "debug"
		}
		t.Run(name, func(t *testing.T) {
			s := llmtest.New(t, llmtest.Fixed(llmtest.RunPython("print "+secret)), answerFromTool("It printed "))
			o := newObsServer(t, s.BaseURL(), obsOptions{debug: debug})
			o.ask(t, "Print "+secret+", please.")
			log := o.log.String()
			var request string
			for line := range strings.Lines(log) {
				if strings.Contains(line, "msg=request ") {
					request = line
				}
			}
			for _, want := range []string{"method=POST", `route="POST /v1/responses"`, "status=200", "duration=", "key_name=alice", "request_id=req_"} {
				if !strings.Contains(request, want) {
					t.Errorf("the request's line lacks %s: %q", want, request)
				}
			}
			if !strings.Contains(log, `msg="code run"`) || !strings.Contains(log, "result=ok") {
				t.Errorf("no line for the run:\n%s", log)
			}
			hasKey, hasCode := strings.Contains(log, aliceKey), strings.Contains(log, secret)
			if debug && (!hasKey || !hasCode) {
				t.Errorf("with the debug flag the log should hold the key (%v) and the code (%v):\n%s", hasKey, hasCode, log)
			}
			if !debug && (hasKey || hasCode) {
				t.Errorf("the log holds the key (%v) or the code (%v):\n%s", hasKey, hasCode, log)
			}
		})
	}
}

// A sane X-Request-Id from the client is kept, in the answer's header and
// in every line about the request; anything else is replaced by terp's own.
func TestLogsRequestID(t *testing.T) {
	s := llmtest.New(t, llmtest.Fixed(llmtest.RunPython("print 1")), answerFromTool(""))
	o := newObsServer(t, s.BaseURL(), obsOptions{})
	var header http.Header
	o.ask(t, "One?", option.WithHeader(serve.RequestIDHeader, "trace-42.a:b_c"),
		option.WithMiddleware(func(r *http.Request, next option.MiddlewareNext) (*http.Response, error) {
			resp, err := next(r)
			if resp != nil {
				header = resp.Header
			}
			return resp, err
		}))
	if got := header.Get(serve.RequestIDHeader); got != "trace-42.a:b_c" {
		t.Errorf("X-Request-Id = %q, want the client's", got)
	}
	lines := 0
	for line := range strings.Lines(o.log.String()) {
		if strings.Contains(line, "request_id=trace-42.a:b_c") {
			lines++
		}
	}
	if lines < 2 { // the run's and the request's
		t.Errorf("%d lines carry the client's request id:\n%s", lines, o.log)
	}

	for _, given := range []string{"", "two words", strings.Repeat("x", 129), `say "hi"`, "key=value"} {
		req := authorized(t, "GET", o.api.URL+"/v1/files", "", aliceKey)
		req.Header.Set(serve.RequestIDHeader, given)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if got := resp.Header.Get(serve.RequestIDHeader); !strings.HasPrefix(got, "req_") || len(got) != len("req_")+32 {
			t.Errorf("for X-Request-Id %q the answer's is %q, want one of terp's", given, got)
		}
	}
}

// authorized is a request with key.
func authorized(t *testing.T, method, url, body, key string) *http.Request {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+key)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	return req
}

// flakyBackend is a backend that fails to create and resume sandboxes once
// told to.
type flakyBackend struct {
	sandbox.Backend
	mu   sync.Mutex
	fail error
}

func (b *flakyBackend) setFailure(err error) {
	b.mu.Lock()
	b.fail = err
	b.mu.Unlock()
}

func (b *flakyBackend) failure() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.fail
}

func (b *flakyBackend) Create(ctx context.Context, opt sandbox.Options) (sandbox.Sandbox, error) {
	if err := b.failure(); err != nil {
		return nil, err
	}
	return b.Backend.Create(ctx, opt)
}

func (b *flakyBackend) Resume(ctx context.Context, id sandbox.SessionID) (sandbox.Sandbox, error) {
	if err := b.failure(); err != nil {
		return nil, err
	}
	return b.Backend.Resume(ctx, id)
}

// refusingState is a state whose check fails, as a database that takes
// no writes would.
type refusingState struct{ state.State }

func (refusingState) Check(context.Context) error { return errors.New("the database refuses writes") }

// syncBuffer is a log the server writes while the test reads.
type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
