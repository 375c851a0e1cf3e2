// Package loadtest puts the real `terp serve` under load, as a process of its
// own built from this tree: BenchmarkLoad runs N concurrent code-interpreter
// conversations through the Responses API and reports throughput, latency,
// what the gateway adds to each request, CPU and memory per container;
// BenchmarkSoak runs 16 conversations at a time, one after another, for
// minutes and fails on growth of the server's threads, open files,
// sandboxes or memory. Both are benchmarks, run by `make loadtest` and
// `make soak`, never by `make test`: they load the machine for minutes.
// docs/benchmarks.md ("terp serve under load") has the numbers and the
// commands.
//
// The upstream model is llmtest's, over real HTTP, scripted per
// conversation and 300 ms per reply; the clients are the official openai-go
// SDK; sandboxes are bubblewrap's, either run by terp serve itself
// (--sandbox local) or by a `terp sandbox serve` process it talks to
// (--sandbox cpuos).
package loadtest

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"

	"github.com/terpdev/terp/internal/llm/llmtest"
	"github.com/terpdev/terp/internal/terptest"
)

func TestMain(m *testing.M) {
	code := m.Run()
	terptest.RemoveBinary()
	os.Exit(code)
}

// heavy skips b unless TERP_LOADTEST is set, as make loadtest and make soak
// set it: these benchmarks take the machine for minutes, and `go test
// -bench . ./...` (make bench) must not start them by surprise.
func heavy(b *testing.B) {
	b.Helper()
	if os.Getenv("TERP_LOADTEST") == "" {
		b.Skip("the load and soak runs take the machine for minutes: run them with make loadtest or make soak (or set TERP_LOADTEST=1)")
	}
}

// modelLatency is how long the scripted model takes over every reply, a
// fast open model's time to write a short tool call.
const modelLatency = 300 * time.Millisecond

// Settings read from the environment, with their defaults; the Makefile's
// targets pass them on.
var (
	// prewarm is what each container's kernel imports before its first
	// step (terp's --prewarm). The default is none: the conversation's
	// code needs nothing, and with terp's default (numpy, pandas,
	// matplotlib: about 1.3 s of CPU per container) the run would
	// measure two cores importing pandas rather than the gateway.
	prewarm = envString("TERP_LOAD_PREWARM", "")
	// idlePause is terp's idle_pause in the load runs: long enough that no
	// container pauses before its wave ends (the harness fails if one
	// does), short enough not to wait long for them to.
	idlePause = envDuration("TERP_LOAD_IDLE_PAUSE", 30*time.Second)
)

func envString(name, def string) string {
	if v, ok := os.LookupEnv(name); ok {
		return v
	}
	return def
}

func envDuration(name string, def time.Duration) time.Duration {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		panic(fmt.Sprintf("%s=%q: %v", name, v, err))
	}
	return d
}

func envInt(name string, def int) int {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		panic(fmt.Sprintf("%s=%q: %v", name, v, err))
	}
	return n
}

// The conversation every client has: the model's first reply runs code
// that sets a variable, its second code that prints twice it, its third
// answers with what the second printed. The variable is the
// conversation's own, so an answer that reaches the wrong client, or a
// kernel that lost its variables, fails the run.

func secret(id int) int { return 1000 + 7*id }

func question(id int) string {
	return fmt.Sprintf("Load conversation %d: set x, then print twice x.", id)
}

func wantAnswer(id int) string { return fmt.Sprintf("twice x is %d", 2*secret(id)) }

var conversationRe = regexp.MustCompile(`Load conversation (\d+):`)

// span is one reply of the scripted model: from when it had read the
// request to when its reply was ready.
type span struct{ start, end time.Time }

// model is the scripted upstream. It records when it worked on each of a
// conversation's replies, so that what the gateway adds to a request can
// be told from the time it waited for the model.
type model struct {
	*llmtest.Server
	mu    sync.Mutex
	spans map[int][]span
}

func newModel(b *testing.B) *model {
	m := &model{spans: map[int][]span{}}
	m.Server = llmtest.Each(b, m.step)
	return m
}

func (m *model) step(req llmtest.Request) llmtest.Reply {
	start := time.Now()
	id, calls := -1, 0
	for _, msg := range req.Messages {
		if sm := conversationRe.FindStringSubmatch(msg.Content); msg.Role == "user" && sm != nil {
			id, _ = strconv.Atoi(sm[1])
		}
		if msg.Role == "assistant" && len(msg.ToolCalls) > 0 {
			calls++
		}
	}
	var reply llmtest.Reply
	switch {
	case id < 0:
		reply = llmtest.Reply{Status: http.StatusBadRequest, Body: `{"error":{"message":"no Load conversation in the request"}}`}
	case calls == 0:
		reply = llmtest.RunPython(fmt.Sprintf("x = %d", secret(id)))
	case calls == 1:
		reply = llmtest.RunPython("print(x * 2)")
	case calls == 2:
		res, err := req.ToolResult()
		if err != nil {
			reply = llmtest.Answer("the tool result is not JSON: " + err.Error())
		} else {
			reply = llmtest.Answer("twice x is " + strings.TrimSpace(res.Stdout))
		}
	default:
		reply = llmtest.Reply{Status: http.StatusBadRequest, Body: `{"error":{"message":"a fourth step"}}`}
	}
	time.Sleep(modelLatency)
	if id >= 0 {
		m.mu.Lock()
		m.spans[id] = append(m.spans[id], span{start, time.Now()})
		m.mu.Unlock()
	}
	return reply
}

// take returns conversation id's spans and forgets them.
func (m *model) take(id int) []span {
	m.mu.Lock()
	defer m.mu.Unlock()
	s := m.spans[id]
	delete(m.spans, id)
	return s
}

// process is a terp command running as a process of its own.
type process struct {
	name string
	cmd  *exec.Cmd
	url  string
	log  *tail
	done chan error
	// exited is set once done has been received from.
	exited bool
	err    error
}

// startProcess runs bin with args and env and waits until its stderr says,
// in a line addr matches, where it serves (the first group).
func startProcess(b *testing.B, name string, env []string, addr *regexp.Regexp, bin string, args ...string) *process {
	b.Helper()
	p := &process{name: name, log: &tail{max: 64 << 10}, done: make(chan error, 1)}
	p.cmd = exec.CommandContext(context.Background(), bin, args...)
	p.cmd.Env = env
	stderr, err := p.cmd.StderrPipe()
	if err != nil {
		b.Fatal(err)
	}
	p.cmd.Stdout = p.log
	if err := p.cmd.Start(); err != nil {
		b.Fatalf("start %s: %v", name, err)
	}
	found := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			fmt.Fprintln(p.log, sc.Text())
			if m := addr.FindStringSubmatch(sc.Text()); m != nil {
				select {
				case found <- m[1]:
				default:
				}
			}
		}
		_, _ = io.Copy(p.log, stderr)
		p.done <- p.cmd.Wait()
	}()
	b.Cleanup(func() { p.stop(b) })
	select {
	case p.url = <-found:
		return p
	case err := <-p.done:
		p.exited, p.err = true, err
		b.Fatalf("%s exited before it served (%v):\n%s", name, err, p.log)
	case <-time.After(time.Minute):
		b.Fatalf("%s did not say where it serves within a minute:\n%s", name, p.log)
	}
	return nil
}

func (p *process) pid() int { return p.cmd.Process.Pid }

// stop asks the process to stop as a user would (SIGTERM: terp pauses its
// containers and exits 0) and fails the benchmark if it does not, or exits
// with an error.
func (p *process) stop(b *testing.B) {
	if p.exited {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case p.err = <-p.done:
	case <-time.After(2 * time.Minute):
		_ = p.cmd.Process.Kill()
		p.err = fmt.Errorf("still running two minutes after SIGTERM; killed: %v", <-p.done)
	}
	p.exited = true
	if p.err != nil {
		b.Errorf("%s: %v:\n%s", p.name, p.err, p.log)
	}
}

// tail keeps the last max bytes written to it: a long run's request log
// must not fill the harness's memory.
type tail struct {
	mu  sync.Mutex
	max int
	buf []byte
}

func (t *tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if over := len(t.buf) - t.max; over > 0 {
		t.buf = append(t.buf[:0], t.buf[over:]...)
	}
	return len(p), nil
}

func (t *tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.buf)
}

// stackConfig says how to run terp serve.
type stackConfig struct {
	// sandbox is terp serve's --sandbox: local, or cpuos against a
	// `terp sandbox serve` the stack starts.
	sandbox string
	// keys is how many API keys the keys file holds; clients take them in
	// turn. terp serve allows 64 live containers per key.
	keys int
	// idlePause is terp's idle_pause (TERP_IDLE_PAUSE).
	idlePause time.Duration
}

// stack is one terp serve with its upstream model, and its sandbox server
// for cpuos.
type stack struct {
	cfg       stackConfig
	model     *model
	sandboxes *process // nil on the local backend
	gateway   *process
	clients   []openai.Client
	keys      []string
	// sandboxRoot is where the sandboxes' directories are.
	sandboxRoot string
	// floor is how many processes run below the sandboxes' runner with no
	// container live.
	floor int
	// metrics is the address of terp serve's metrics listener.
	metrics string
}

var (
	gatewayAddr = regexp.MustCompile(`serving the OpenAI API on (http://\S+/v1)`)
	sandboxAddr = regexp.MustCompile(`serving sandboxes on (http://\S+)`)
	metricsAddr = regexp.MustCompile(`serving metrics on (http://\S+)/metrics`)
)

// homeEnv is an environment of its own for one terp process: a fresh home,
// config and data directory, nothing of the caller's TERP_ variables.
func homeEnv(b *testing.B, extra ...string) (env []string, dataDir string) {
	home := terptest.TempDir(b)
	env = []string{
		"PATH=" + os.Getenv("PATH"),
		"HOME=" + home,
		"XDG_CONFIG_HOME=" + filepath.Join(home, "config"),
		"XDG_DATA_HOME=" + filepath.Join(home, "data"),
	}
	return append(env, extra...), filepath.Join(home, "data", "terp")
}

func randomKey() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func startStack(b *testing.B, cfg stackConfig) *stack {
	b.Helper()
	bin := terptest.Binary(b)
	st := &stack{cfg: cfg, model: newModel(b)}
	args := []string{"serve", "--listen", "127.0.0.1:0", "--base-url", st.model.BaseURL(), "--model", "test-model",
		"--sandbox", cfg.sandbox, "--exec-mode", "kernel", "--prewarm=" + prewarm, "--metrics-listen", "127.0.0.1:0"}
	env, dataDir := homeEnv(b, "TERP_IDLE_PAUSE="+cfg.idlePause.String())
	st.sandboxRoot = filepath.Join(dataDir, "sandboxes")
	switch cfg.sandbox {
	case "local":
	case "cpuos":
		token := randomKey()
		senv, sdata := homeEnv(b, "CPUOS_API_KEY="+token)
		st.sandboxes = startProcess(b, "terp sandbox serve", senv, sandboxAddr, bin, "sandbox", "serve", "--listen", "127.0.0.1:0")
		st.sandboxRoot = filepath.Join(sdata, "served-sandboxes")
		args = append(args, "--cpuos-url", st.sandboxes.url)
		env = append(env, "CPUOS_API_KEY="+token)
	default:
		b.Fatalf("unknown sandbox %q", cfg.sandbox)
	}
	var lines []string
	for i := range max(cfg.keys, 1) {
		st.keys = append(st.keys, randomKey())
		lines = append(lines, fmt.Sprintf("load%d %s", i, st.keys[i]))
	}
	keysFile := filepath.Join(b.TempDir(), "keys")
	if err := os.WriteFile(keysFile, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
		b.Fatal(err)
	}
	args = append(args, "--keys-file", keysFile)
	st.gateway = startProcess(b, "terp serve", env, gatewayAddr, bin, args...)
	// terp serve says where the metrics are before where the API is.
	if m := metricsAddr.FindStringSubmatch(st.gateway.log.String()); m != nil {
		st.metrics = m[1]
	}
	// One connection per client at most; the default transport would keep
	// two idle and open the rest anew for every request.
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 1024, IdleConnTimeout: time.Minute}}
	for _, k := range st.keys {
		st.clients = append(st.clients, openai.NewClient(option.WithBaseURL(st.gateway.url), option.WithAPIKey(k),
			option.WithMaxRetries(0), option.WithHTTPClient(hc)))
	}
	st.floor = len(descendants(st.runner()))
	return st
}

// runner is the process whose children the sandboxes are.
func (st *stack) runner() int {
	if st.sandboxes != nil {
		return st.sandboxes.pid()
	}
	return st.gateway.pid()
}

// outcome is one conversation, as its client saw it.
type outcome struct {
	id        int
	container string
	response  string
	// latency is the request's, at the client; model the time the
	// scripted model spent on its three replies; before, between and
	// after are the rest (what the gateway adds): up to the first reply,
	// between replies (the code running), after the last.
	latency, model, before, between, after time.Duration
	// end is when the answer arrived.
	end time.Time
	err error
}

// added is what the gateway adds to the request: everything but the model.
func (o outcome) added() time.Duration { return o.latency - o.model }

// converse has conversation id: one POST /v1/responses that the model
// answers in three replies, two running code.
func (st *stack) converse(ctx context.Context, id int) outcome {
	o := outcome{id: id}
	client := st.clients[id%len(st.clients)]
	start := time.Now()
	resp, err := client.Responses.New(ctx, responses.ResponseNewParams{
		Model: "test-model",
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String(question(id))},
		Tools: []responses.ToolUnionParam{responses.ToolParamOfCodeInterpreter(
			responses.ToolCodeInterpreterContainerCodeInterpreterContainerAutoParam{})},
		Include: []responses.ResponseIncludable{responses.ResponseIncludableCodeInterpreterCallOutputs},
	})
	o.end = time.Now()
	o.latency = o.end.Sub(start)
	spans := st.model.take(id)
	if err != nil {
		o.err = detailed(err)
		return o
	}
	o.response = resp.ID
	var calls []responses.ResponseCodeInterpreterToolCall
	for _, item := range resp.Output {
		if item.Type == "code_interpreter_call" {
			calls = append(calls, item.AsCodeInterpreterCall())
		}
	}
	if len(calls) > 0 {
		o.container = calls[0].ContainerID
	}
	want := fmt.Sprint(2 * secret(id))
	switch {
	case resp.Status != responses.ResponseStatusCompleted:
		o.err = fmt.Errorf("status %q: %s", resp.Status, resp.Error.Message)
	case resp.OutputText() != wantAnswer(id):
		o.err = fmt.Errorf("answer %q, want %q", resp.OutputText(), wantAnswer(id))
	case len(calls) != 2 || len(calls[1].Outputs) == 0 || strings.TrimSpace(calls[1].Outputs[0].AsLogs().Logs) != want:
		o.err = fmt.Errorf("code_interpreter_calls %+v, want two, the second printing %s", calls, want)
	case len(spans) != 3:
		o.err = fmt.Errorf("the model answered %d times, want 3", len(spans))
	}
	if o.err != nil {
		return o
	}
	for i, s := range spans {
		o.model += s.end.Sub(s.start)
		if i > 0 {
			o.between += s.start.Sub(spans[i-1].end)
		}
	}
	o.before = spans[0].start.Sub(start)
	o.after = start.Add(o.latency).Sub(spans[len(spans)-1].end)
	return o
}

// cleanUp deletes what conversation o left: its container (sandbox and
// stored conversation) and its stored response, as a client that is done
// does.
func (st *stack) cleanUp(ctx context.Context, o outcome) error {
	client := st.clients[o.id%len(st.clients)]
	var errs []error
	if o.container != "" {
		if err := client.Containers.Delete(ctx, o.container); err != nil {
			errs = append(errs, fmt.Errorf("delete container %s: %w", o.container, detailed(err)))
		}
	}
	if o.response != "" {
		if err := client.Responses.Delete(ctx, o.response); err != nil {
			errs = append(errs, fmt.Errorf("delete response %s: %w", o.response, detailed(err)))
		}
	}
	return errors.Join(errs...)
}

// detailed adds the server's message to an API error: openai-go's own
// text says only the status, and a failed run must say why.
func detailed(err error) error {
	var apiErr *openai.Error
	if errors.As(err, &apiErr) {
		return fmt.Errorf("%w: %s", err, apiErr.RawJSON())
	}
	return err
}

// wave runs conversations first..first+n-1 at once, each with a client
// of its own, and returns their outcomes and the wall time from the first
// request to the last answer.
func (st *stack) wave(ctx context.Context, first, n int) ([]outcome, time.Duration) {
	out := make([]outcome, n)
	var ready, done sync.WaitGroup
	ready.Add(n)
	done.Add(n)
	gate := make(chan struct{})
	for i := range n {
		go func() {
			defer done.Done()
			ready.Done()
			<-gate
			out[i] = st.converse(ctx, first+i)
		}()
	}
	ready.Wait()
	start := time.Now()
	close(gate)
	done.Wait()
	return out, time.Since(start)
}

// snapshot is the state of the stack's processes at one moment.
type snapshot struct {
	at time.Time
	// gateway is terp serve alone; server terp sandbox serve alone (cpuos
	// only); sandboxes every process below whichever runs them.
	gateway, server, sandboxes procMem
	// procs is how many processes run below the sandboxes' runner.
	procs int
	// comms names them, for the log.
	comms string
	// threads and fds are terp serve's, and of terp sandbox serve on
	// cpuos (0 on local).
	threads, fds             int
	serverThreads, serverFDs int
	// goroutines is terp serve's, when it exposes Prometheus metrics at
	// /metrics (go_goroutines); -1 when it does not.
	goroutines int
	// dirs is how many sandbox directories exist, live or paused.
	dirs int
	// cpu is the CPU time of terp serve, terp sandbox serve and every
	// child they have waited for.
	cpu time.Duration
}

// total is the memory of every process of the stack.
func (s snapshot) total() procMem { return s.gateway.add(s.server).add(s.sandboxes) }

func (st *stack) snapshot(ctx context.Context) snapshot {
	s := snapshot{at: time.Now(), goroutines: st.goroutines(ctx)}
	gw := st.gateway.pid()
	s.gateway, _ = memOf(gw)
	s.threads, s.fds = threadsOf(gw), fdsOf(gw)
	g, _ := statOf(gw)
	s.cpu = g.cpu
	if st.sandboxes != nil {
		sp := st.sandboxes.pid()
		s.server, _ = memOf(sp)
		s.serverThreads, s.serverFDs = threadsOf(sp), fdsOf(sp)
		ss, _ := statOf(sp)
		s.cpu += ss.cpu
	}
	pids := descendants(st.runner())
	for _, p := range pids {
		if m, ok := memOf(p); ok {
			s.sandboxes = s.sandboxes.add(m)
			s.procs++
		}
	}
	s.comms = commsOf(pids)
	s.dirs = dirsIn(st.sandboxRoot)
	return s
}

// goroutines reads go_goroutines from terp serve's /metrics, on the
// listener of their own, which needs no key.
func (st *stack) goroutines(ctx context.Context) int {
	if st.metrics == "" {
		return -1
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, st.metrics+"/metrics", nil)
	if err != nil {
		return -1
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return -1
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return -1
	}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "go_goroutines "); ok {
			if f, err := strconv.ParseFloat(strings.TrimSpace(v), 64); err == nil {
				return int(f)
			}
		}
	}
	return -1
}

// settle waits until no more than st.floor processes run below the
// sandboxes' runner (every container paused or gone) and returns the
// snapshot then; it fails the benchmark after timeout.
func (st *stack) settle(ctx context.Context, b *testing.B, timeout time.Duration) snapshot {
	b.Helper()
	deadline := time.Now().Add(timeout)
	for {
		s := st.snapshot(ctx)
		if s.procs <= st.floor {
			return s
		}
		if time.Now().After(deadline) {
			b.Fatalf("%d processes still run below the sandboxes' runner %v after the last conversation (%s); %d before any",
				s.procs, timeout, s.comms, st.floor)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// failed reports the conversations that failed, loudly, and fails the
// benchmark if any did.
func failed(b *testing.B, outs []outcome) {
	b.Helper()
	var bad []string
	for _, o := range outs {
		if o.err != nil {
			bad = append(bad, fmt.Sprintf("conversation %d: %v", o.id, o.err))
		}
	}
	n := len(bad)
	if n == 0 {
		return
	}
	if n > 10 {
		bad = append(bad[:10], fmt.Sprintf("... and %d more", n-10))
	}
	b.Fatalf("ERRORS: %d of %d conversations failed:\n%s", n, len(outs), strings.Join(bad, "\n"))
}

const mib = 1 << 20

func mibs(n int64) string { return fmt.Sprintf("%.1f MiB", float64(n)/mib) }
