package serve

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/terpdev/terp/internal/agent"
	"github.com/terpdev/terp/internal/conversation"
	"github.com/terpdev/terp/internal/llm"
)

// Metrics are one server's Prometheus metrics, in a registry of their own,
// so that two servers in one process (tests, an embedding program) never
// count into each other. A front-end makes them before the server when
// something built earlier must report into them, as the model client's
// transport does (Transport); otherwise New makes them. One Metrics serves
// one Server.
type Metrics struct {
	registry *prometheus.Registry

	requests        *prometheus.CounterVec
	requestDuration *prometheus.HistogramVec
	upstream        *prometheus.HistogramVec
	runs            *prometheus.CounterVec
	runDuration     prometheus.Histogram
	tokens          *prometheus.CounterVec
	sandboxFailures *prometheus.CounterVec

	// containers is set by the server that counts its containers at each
	// scrape.
	mu         sync.Mutex
	containers func() (active, paused, warm int)
}

// Every metric's name starts with this.
const metricPrefix = "terp_"

// Latency buckets, in seconds: a request or a model call from a few
// milliseconds to a long turn; a run of code from a print to a long
// computation.
var (
	latencyBuckets = []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120, 300}
	runBuckets     = []float64{.01, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600}
)

// Run results, the values of terp_code_runs_total's result label.
const (
	runOK      = "ok"      // exited 0
	runError   = "error"   // exited otherwise: an exception, sys.exit(1)
	runTimeout = "timeout" // killed at the per-run timeout
	runStopped = "stopped" // the turn ended while it ran
	runFailed  = "failed"  // could not run at all: bad arguments, a sandbox failure
)

// NewMetrics returns the metrics of one server, with the Go runtime's and
// the process's own beside them.
func NewMetrics() *Metrics {
	m := &Metrics{
		registry: prometheus.NewRegistry(),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: metricPrefix + "http_requests_total",
			Help: "HTTP requests answered, by route (the endpoint's pattern, not the path) and status code.",
		}, []string{"route", "code"}),
		requestDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    metricPrefix + "http_request_duration_seconds",
			Help:    "Time from a request's arrival to the end of its answer (a stream's last event), by route.",
			Buckets: latencyBuckets,
		}, []string{"route"}),
		upstream: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    metricPrefix + "upstream_request_duration_seconds",
			Help:    "Time of each request to the model server upstream, each retry apart, until its answer's body is read, by endpoint and status code (\"error\": no answer).",
			Buckets: latencyBuckets,
		}, []string{"endpoint", "code"}),
		runs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: metricPrefix + "code_runs_total",
			Help: "Runs of the model's code in a sandbox, by result: ok, error (exited non-zero), timeout, stopped (the turn ended), failed (could not run).",
		}, []string{"result"}),
		runDuration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    metricPrefix + "code_run_duration_seconds",
			Help:    "Time each run of the model's code took in its sandbox.",
			Buckets: runBuckets,
		}),
		tokens: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: metricPrefix + "tokens_total",
			Help: "Tokens the model server counted for the code interpreter's turns, by the name of the client's key (never the key) and direction (input: prompt, output: completion).",
		}, []string{"key_name", "direction"}),
		sandboxFailures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: metricPrefix + "sandbox_failures_total",
			Help: "Failures of terp's own while serving, by stage: create (a container's sandbox could not be made), open (a paused container's could not be resumed nor made again), turn (a turn ended with a server error, not the model server's).",
		}, []string{"stage"}),
	}
	m.registry.MustRegister(m.requests, m.requestDuration, m.upstream, m.runs, m.runDuration, m.tokens, m.sandboxFailures,
		containerCollector{m},
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	// A failure label that was never counted still shows, as 0, so that
	// an alert on its rate has a series from the start.
	for _, stage := range []string{"create", "open", "turn"} {
		m.sandboxFailures.WithLabelValues(stage)
	}
	return m
}

// instrument readies what the server reports on itself: its metrics, which
// count its containers at each scrape; the request id on every log line;
// the timing of its own requests upstream; the readiness checks.
func (s *Server) instrument() error {
	if s.cfg.Metrics == nil {
		s.cfg.Metrics = NewMetrics()
	}
	s.metrics = s.cfg.Metrics
	if err := s.metrics.use(s.containerCounts); err != nil {
		return err
	}
	s.cfg.Log = slog.New(requestLog{s.cfg.Log.Handler()})
	up := *s.cfg.Upstream
	up.Transport = s.metrics.Transport(up.Transport)
	s.cfg.Upstream = &up
	s.ready = s.readyChecks()
	return nil
}

// Handler serves the metrics in Prometheus's text format (or the format a
// scraper negotiates).
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.registry, promhttp.HandlerOpts{Registry: m.registry})
}

// Transport wraps base (nil: http.DefaultTransport) so that each request
// through it is timed into terp_upstream_request_duration_seconds: the model
// client's requests (give it to llm.Config.HTTPClient) as well as the
// server's own pass-through ones.
func (m *Metrics) Transport(base http.RoundTripper) http.RoundTripper {
	if base == nil {
		base = http.DefaultTransport
	}
	return &timedTransport{base: base, hist: m.upstream}
}

// use ties the metrics to the server whose containers they count.
func (m *Metrics) use(containers func() (active, paused, warm int)) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.containers != nil {
		return errors.New("serve: these Metrics already serve another Server; make one per Server with NewMetrics")
	}
	m.containers = containers
	return nil
}

// request counts one answered request.
func (m *Metrics) request(route string, status int, d time.Duration) {
	m.requests.WithLabelValues(route, strconv.Itoa(status)).Inc()
	m.requestDuration.WithLabelValues(route).Observe(d.Seconds())
}

// run counts one run of code, from the event the loop sends when it ends.
func (m *Metrics) run(e agent.ToolOutput) {
	m.runs.WithLabelValues(runResult(e)).Inc()
	m.runDuration.Observe(e.Duration.Seconds())
}

// runResult is what became of a run, as terp_code_runs_total labels it.
func runResult(e agent.ToolOutput) string {
	switch {
	case e.Error != "":
		return runFailed
	case e.Stopped != "":
		return runStopped
	case e.TimedOut:
		return runTimeout
	case e.ExitCode != 0:
		return runError
	}
	return runOK
}

// turn counts what a finished turn used, under the name of the key that
// asked, and a failure of terp's own that ended it.
func (m *Metrics) turn(keyName string, usage llm.Usage, err error) {
	if usage.PromptTokens > 0 {
		m.tokens.WithLabelValues(keyName, "input").Add(float64(usage.PromptTokens))
	}
	if usage.CompletionTokens > 0 {
		m.tokens.WithLabelValues(keyName, "output").Add(float64(usage.CompletionTokens))
	}
	if serverFailure(err) {
		m.sandboxFailures.WithLabelValues("turn").Inc()
	}
}

// containerFailed counts a container whose sandbox could not be made
// (stage create) or, paused, resumed or made again (stage open).
func (m *Metrics) containerFailed(stage string, err error) {
	if serverFailure(err) {
		m.sandboxFailures.WithLabelValues(stage).Inc()
	}
}

// serverFailure reports whether err is a failure of terp's own: not the
// client's mistake, nor a busy container, nor the model server's failure
// (which upstream's metrics show), nor a client that went away.
func serverFailure(err error) bool {
	var input *conversation.InputError
	var upstream *llm.Error
	switch {
	case err == nil, errors.As(err, &input), errors.As(err, &upstream),
		errors.Is(err, conversation.ErrBusy), errors.Is(err, context.Canceled):
		return false
	}
	return true
}

// containerCollector reports the containers, active and paused, at each
// scrape, from the server's own state: a gauge kept up to date by hand
// would drift from it.
type containerCollector struct{ m *Metrics }

var containersDesc = prometheus.NewDesc(metricPrefix+"containers",
	"Containers open in this process, by state: active (the sandbox runs) or paused (idle past idle_pause: it costs only disk until the next request wakes it). Those kept only in the state (after a restart, or open in another replica) are not counted.",
	[]string{"state"}, nil)

var warmDesc = prometheus.NewDesc(metricPrefix+"warm_sandboxes",
	"Sandboxes made ahead, with Python started and its prewarm imports done, ready for the next containers to take (terp serve --warm).",
	nil, nil)

func (c containerCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- containersDesc
	ch <- warmDesc
}

func (c containerCollector) Collect(ch chan<- prometheus.Metric) {
	c.m.mu.Lock()
	count := c.m.containers
	c.m.mu.Unlock()
	active, paused, warm := 0, 0, 0
	if count != nil {
		active, paused, warm = count()
	}
	ch <- prometheus.MustNewConstMetric(containersDesc, prometheus.GaugeValue, float64(active), "active")
	ch <- prometheus.MustNewConstMetric(containersDesc, prometheus.GaugeValue, float64(paused), "paused")
	ch <- prometheus.MustNewConstMetric(warmDesc, prometheus.GaugeValue, float64(warm))
}

// containerCounts counts the containers open in this process by state,
// and the warm sandboxes ready for more: each replica reports its own, and
// a sum over replicas counts each once.
func (s *Server) containerCounts() (active, paused, warm int) {
	s.mu.Lock()
	all := make([]*Container, 0, len(s.containers))
	for _, c := range s.containers {
		all = append(all, c)
	}
	s.mu.Unlock()
	for _, c := range all {
		if c.conv.Paused() {
			paused++
		} else {
			active++
		}
	}
	return active, paused, s.cfg.Conversations.WarmReady()
}

// timedTransport times each request to the model server until its body is
// read or closed, so that a streamed answer counts its whole generation,
// not only the wait for its first byte.
type timedTransport struct {
	base http.RoundTripper
	hist *prometheus.HistogramVec
}

func (t *timedTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Header.Get(ForwardedHeader) != "" {
		// A request forwarded to another replica, through Upstream's
		// transport: not the model server's.
		return t.base.RoundTrip(req)
	}
	start := time.Now()
	endpoint := upstreamEndpoint(req.URL.Path)
	resp, err := t.base.RoundTrip(req)
	if err != nil {
		t.hist.WithLabelValues(endpoint, "error").Observe(time.Since(start).Seconds())
		return nil, err
	}
	obs := t.hist.WithLabelValues(endpoint, strconv.Itoa(resp.StatusCode))
	resp.Body = &timedBody{ReadCloser: resp.Body, done: func() { obs.Observe(time.Since(start).Seconds()) }}
	return resp, nil
}

// upstreamEndpoint names the model server's endpoint a path ends in, from
// the few terp calls, so that a label never takes the path's whole range.
func upstreamEndpoint(p string) string {
	for _, e := range []string{"chat/completions", "models"} {
		if strings.HasSuffix(strings.TrimRight(p, "/"), "/"+e) {
			return e
		}
	}
	return "other"
}

// timedBody calls done once, at the body's end or its close, whichever
// comes first.
type timedBody struct {
	io.ReadCloser
	once sync.Once
	done func()
}

func (b *timedBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err != nil {
		b.once.Do(b.done)
	}
	return n, err
}

func (b *timedBody) Close() error {
	b.once.Do(b.done)
	return b.ReadCloser.Close()
}
