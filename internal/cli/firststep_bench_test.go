package cli

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/terpdev/terp/internal/config"
	"github.com/terpdev/terp/internal/llm/llmtest"
	"github.com/terpdev/terp/internal/sandbox"
	"github.com/terpdev/terp/internal/terptest"
)

// stampCode prints the wall clock when the model's first code runs, which
// the sandbox shares with the host: the benchmark reads it back from the
// tool result.
const stampCode = "import time\nprint(time.time_ns())\n"

// BenchmarkFirstStep times `terp ask` from its start to the first tool
// output, part by part, in kernel mode with the default prewarm and in
// script mode, against a scripted model that answers at once and one that
// takes a second per reply. terp itself is not changed for it: every part is
// seen from outside, in each iteration by two runs of the same question.
//
// The binary (terptest.Binary) is timed from process start by what the model
// server sees (the first chat request arriving, its reply written, the next
// request, which carries the tool output) and by the time the code itself
// prints. The same command run in this process (Run with a Factory whose
// sandbox backend is wrapped, and a progress writer that stands for a
// terminal) adds what happens inside: NewBackend called (the configuration
// loaded), the sandbox created, the kernel's worker started and its first
// frame on stdout (the ready frame, after the prewarm imports), and the tool
// output printed by the progress. Metrics are ms from the start of the run,
// "bin-" ones the binary's, the others the in-process run's: config
// (NewBackend called), backend (built), created, start and started (the
// worker's Sandbox.Start called and returned), ready, exec (script mode's
// first command), request and reply (the first chat exchange), code (the
// code's stamp), output (printed), request2 (the tool output at the model)
// and exit (docs/benchmarks.md, "Time to the first step").
//
//	go test -run '^$' -bench FirstStep -benchtime 5x -count 1 ./internal/cli/
func BenchmarkFirstStep(b *testing.B) {
	if _, err := exec.LookPath("bwrap"); err != nil {
		b.Skip("SKIP: bubblewrap (bwrap) is not installed: terp's local sandbox cannot run")
	}
	bin := terptest.Binary(b)
	for _, mode := range []string{"kernel", "script"} {
		for _, latency := range []time.Duration{0, time.Second} {
			b.Run(fmt.Sprintf("mode=%s/latency=%s", mode, latency), func(b *testing.B) {
				m := newStampModel(b, latency)
				home := terptest.TempDir(b)
				env := map[string]string{
					"HOME": home, "XDG_CONFIG_HOME": filepath.Join(home, "config"), "XDG_DATA_HOME": filepath.Join(home, "data"),
					"TERP_BASE_URL": m.baseURL, "TERP_MODEL": "test-model", "TERP_EXEC_MODE": mode,
				}
				// Untimed, as on a machine where terp has run before: what a
				// terp keeps in its data directory once per boot (the probe's
				// record, matplotlib's font cache) is there.
				firstStepBinary(b, bin, env, m)
				sums := map[string]time.Duration{}
				for b.Loop() {
					for k, v := range firstStepBinary(b, bin, env, m) {
						sums["bin-"+k] += v
					}
					for k, v := range firstStepInProcess(b, env, m) {
						sums[k] += v
					}
				}
				for k, v := range sums {
					b.ReportMetric(v.Seconds()*1000/float64(b.N), "ms-"+k)
				}
			})
		}
	}
}

// stampModel is a scripted model that runs stampCode, then answers, each
// reply after latency, behind a handler that records when requests arrive
// and when their replies have been written, and the stamp the code printed.
type stampModel struct {
	baseURL string
	mu      sync.Mutex
	chats   []exchange
	stdout  string // the first tool output's stdout
}

// exchange is one chat request as the server saw it.
type exchange struct{ arrived, replied time.Time }

func newStampModel(b *testing.B, latency time.Duration) *stampModel {
	m := &stampModel{}
	s := llmtest.Each(b, func(req llmtest.Request) llmtest.Reply {
		time.Sleep(latency)
		if opensTurn(req) {
			return llmtest.RunPython(stampCode)
		}
		res, err := req.ToolResult()
		if err != nil || res.ExitCode != 0 {
			b.Errorf("the stamp code failed: %v %+v", err, res)
		}
		m.mu.Lock()
		m.stdout = res.Stdout
		m.mu.Unlock()
		return llmtest.Answer("done")
	})
	next := s.Config.Handler
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		arrived := time.Now()
		next.ServeHTTP(w, r)
		if strings.HasSuffix(r.URL.Path, "/chat/completions") {
			m.mu.Lock()
			m.chats = append(m.chats, exchange{arrived, time.Now()})
			m.mu.Unlock()
		}
	}))
	b.Cleanup(front.Close)
	m.baseURL = front.URL + "/v1"
	return m
}

// take returns the exchanges and the tool output recorded since the last
// take.
func (m *stampModel) take() ([]exchange, string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	chats, stdout := m.chats, m.stdout
	m.chats, m.stdout = nil, ""
	return chats, stdout
}

// serverParts are the parts of a turn that the model server and the code's
// stamp show, as durations from start.
func serverParts(b *testing.B, start time.Time, m *stampModel) (map[string]time.Duration, time.Time) {
	chats, stdout := m.take()
	if len(chats) != 2 {
		b.Fatalf("%d chat requests, want 2 (one step, one answer)", len(chats))
	}
	stamp := stampIn(b, stdout)
	return map[string]time.Duration{
		"request":  chats[0].arrived.Sub(start),
		"reply":    chats[0].replied.Sub(start),
		"code":     stamp.Sub(start),
		"request2": chats[1].arrived.Sub(start),
	}, stamp
}

// stampIn finds the time stampCode printed in out.
func stampIn(b *testing.B, out string) time.Time {
	for _, f := range strings.Fields(out) {
		if n, err := strconv.ParseInt(f, 10, 64); err == nil && n > 1e18 {
			return time.Unix(0, n)
		}
	}
	b.Fatalf("no time stamp in %q", out)
	return time.Time{}
}

// firstStepBinary runs the terp binary once, timed from process start.
func firstStepBinary(b *testing.B, bin string, env map[string]string, m *stampModel) map[string]time.Duration {
	cmd := exec.Command(bin, "ask", "time stamp")
	cmd.Env = []string{"PATH=" + os.Getenv("PATH")}
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	start := time.Now()
	out, err := cmd.CombinedOutput()
	exit := time.Since(start)
	if err != nil {
		b.Fatalf("terp ask: %v\n%s", err, out)
	}
	parts, _ := serverParts(b, start, m)
	parts["exit"] = exit
	return parts
}

// firstStepInProcess runs the same command through Run in this process, with
// the sandbox and the progress output watched.
func firstStepInProcess(b *testing.B, env map[string]string, m *stampModel) map[string]time.Duration {
	tr := &marks{at: map[string]time.Time{}}
	errOut := &markWriter{tr: tr}
	f := NewFactory()
	f.IO = IOStreams{In: strings.NewReader(""), Out: io.Discard, ErrOut: errOut, StderrTTY: true}
	f.Getenv = func(k string) string { return env[k] }
	newBackend := f.NewBackend
	f.NewBackend = func(cfg *config.Config) (sandbox.Backend, error) {
		tr.mark("config")
		be, err := newBackend(cfg)
		tr.mark("backend")
		if err != nil {
			return nil, err
		}
		return markedBackend{be, tr}, nil
	}
	start := time.Now()
	code := Run(context.Background(), f, []string{"ask", "time stamp"})
	exit := time.Since(start)
	if code != 0 {
		b.Fatalf("terp ask: exit %d\n%s", code, errOut.all())
	}
	parts, stamp := serverParts(b, start, m)
	parts["exit"] = exit
	for k, t := range tr.copy() {
		parts[k] = t.Sub(start)
	}
	if t, ok := errOut.first(strconv.FormatInt(stamp.UnixNano(), 10)); ok {
		parts["output"] = t.Sub(start)
	} else {
		b.Fatalf("the progress never showed the tool output:\n%s", errOut.all())
	}
	return parts
}

// marks are the first times named things happened.
type marks struct {
	mu sync.Mutex
	at map[string]time.Time
}

func (m *marks) mark(name string) {
	now := time.Now()
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.at[name]; !ok {
		m.at[name] = now
	}
}

func (m *marks) copy() map[string]time.Time {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make(map[string]time.Time, len(m.at))
	for k, v := range m.at {
		out[k] = v
	}
	return out
}

// markWriter keeps what the progress printed, with when.
type markWriter struct {
	tr     *marks
	mu     sync.Mutex
	writes []timedWrite
}

type timedWrite struct {
	at   time.Time
	text string
}

func (w *markWriter) Write(p []byte) (int, error) {
	now := time.Now()
	w.mu.Lock()
	defer w.mu.Unlock()
	w.writes = append(w.writes, timedWrite{now, string(p)})
	return len(p), nil
}

// first is when a write containing s was made.
func (w *markWriter) first(s string) (time.Time, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, wr := range w.writes {
		if strings.Contains(wr.text, s) {
			return wr.at, true
		}
	}
	return time.Time{}, false
}

func (w *markWriter) all() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	var sb strings.Builder
	for _, wr := range w.writes {
		sb.WriteString(wr.text)
	}
	return sb.String()
}

// markedBackend marks when its sandbox is created; its sandbox marks when
// the kernel's worker is started and first speaks (its ready frame), and
// when script mode's first command starts.
type markedBackend struct {
	sandbox.Backend
	tr *marks
}

func (be markedBackend) Create(ctx context.Context, opt sandbox.Options) (sandbox.Sandbox, error) {
	sb, err := be.Backend.Create(ctx, opt)
	be.tr.mark("created")
	if err != nil {
		return nil, err
	}
	return markedSandbox{sb, be.tr}, nil
}

type markedSandbox struct {
	sandbox.Sandbox
	tr *marks
}

func (s markedSandbox) Exec(ctx context.Context, cmd []string, opt sandbox.ExecOptions) (sandbox.ExecResult, error) {
	s.tr.mark("exec")
	return s.Sandbox.Exec(ctx, cmd, opt)
}

func (s markedSandbox) Start(ctx context.Context, cmd []string, opt sandbox.ExecOptions) (sandbox.Process, error) {
	s.tr.mark("start")
	p, err := s.Sandbox.Start(ctx, cmd, opt)
	s.tr.mark("started")
	if err != nil {
		return nil, err
	}
	return markedProcess{p, s.tr}, nil
}

// markedProcess is the worker's process: its first bytes on stdout are the
// ready frame.
type markedProcess struct {
	sandbox.Process
	tr *marks
}

func (p markedProcess) Stdout() io.Reader { return markedReader{p.Process.Stdout(), p.tr} }

// StopReason passes on the sandbox's, which the kernel asks for.
func (p markedProcess) StopReason() string {
	if sr, ok := p.Process.(sandbox.StopReporter); ok {
		return sr.StopReason()
	}
	return ""
}

type markedReader struct {
	r  io.Reader
	tr *marks
}

func (r markedReader) Read(b []byte) (int, error) {
	n, err := r.r.Read(b)
	if n > 0 {
		r.tr.mark("ready")
	}
	return n, err
}
