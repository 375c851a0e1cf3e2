package mcp

import (
	"bufio"
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/terpdev/terp/internal/agent"
	"github.com/terpdev/terp/internal/config"
	"github.com/terpdev/terp/internal/conversation"
	"github.com/terpdev/terp/internal/sandbox"
	"github.com/terpdev/terp/internal/sandbox/memory"
	"github.com/terpdev/terp/internal/serve"
	"github.com/terpdev/terp/internal/store"
)

// These tests drive the server through a real SDK client over the SDK's
// in-memory transports, on a real conversation service whose sandboxes
// are the in-memory backend: its Python stand-in runs a line language
// (print, write PATH TEXT, cat, sleep, exit), not Python. What needs a
// real Python and bubblewrap is tested end to end in internal/cli.

// world is one Server on a fresh store and memory backend.
type world struct {
	srv     *Server
	host    *serve.Server
	backend *recordingBackend
	store   store.Store
	cfg     *config.Config
	logs    *logRecorder
	// hostConfig makes the world's host, again after a restart.
	hostConfig serve.Config
	// started receives once a run whose code holds the line "# block" is
	// running; it then waits for release (or its context) before it runs
	// the rest.
	started chan struct{}
	release chan struct{}
}

// worldOptions change what newWorld builds.
type worldOptions struct {
	maxEmbed        int64
	maxDownloadSize int64
	// createGate, when set, holds every sandbox's creation until it is
	// closed, after telling creating.
	createGate chan struct{}
	// pauseGate, when set, holds every sandbox's pause until it is
	// closed, after telling pausing.
	pauseGate chan struct{}
	// keys are the host's; none makes its key ring open.
	keys map[string]serve.Principal
	// hostLog receives the host's log; nil discards it.
	hostLog     slog.Handler
	expireAfter time.Duration
	// network and networkAllow are the settings' egress.
	network      string
	networkAllow []string
}

func newWorld(t *testing.T, opt worldOptions) *world {
	t.Helper()
	st, err := store.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	w := &world{store: st, logs: newLogRecorder(), started: make(chan struct{}, 1), release: make(chan struct{})}
	python := func(ctx context.Context, c *memory.Cmd) int {
		c.Stdin = &blockingRequests{r: bufio.NewReader(c.Stdin), ctx: ctx, w: w}
		return memory.PythonStandIn(ctx, c)
	}
	w.backend = &recordingBackend{
		Backend:    memory.New(memory.Config{Programs: map[string]memory.Program{"python3": python}}),
		state:      map[sandbox.SessionID]string{},
		createGate: opt.createGate,
		creating:   make(chan struct{}, 1),
		pauseGate:  opt.pauseGate,
		pausing:    make(chan struct{}, 1),
	}
	cfg := config.Default()
	cfg.Sandbox = "memory"
	cfg.ExecMode = "script"
	cfg.OutDir = t.TempDir()
	cfg.IdlePause = 0
	if opt.maxDownloadSize > 0 {
		cfg.MaxDownloadSize = opt.maxDownloadSize
	}
	if opt.network != "" {
		cfg.Network, cfg.NetworkAllow = opt.network, opt.networkAllow
	}
	w.cfg = cfg
	svc := conversation.New(conversation.Deps{
		Store:      st,
		NewBackend: func(*config.Config) (sandbox.Backend, error) { return w.backend, nil },
	})
	var hostLog *slog.Logger
	if opt.hostLog != nil {
		hostLog = slog.New(opt.hostLog)
	}
	w.hostConfig = serve.Config{Conversations: svc, Settings: cfg, Keys: opt.keys, NoAuth: len(opt.keys) == 0,
		DataDir: t.TempDir(), Log: hostLog}
	w.start(t, Config{Settings: cfg, Version: "test", Log: slog.New(w.logs), MaxEmbed: opt.maxEmbed,
		ExpireAfter: opt.expireAfter})
	return w
}

// start starts the world's host and a Server of cfg on it, both closed
// when the test ends.
func (w *world) start(t *testing.T, cfg Config) {
	t.Helper()
	host, err := serve.New(w.hostConfig)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { host.Close(context.Background()) })
	w.host, cfg.Host = host, host
	w.srv = New(cfg)
	t.Cleanup(func() { w.srv.Close(context.Background()) })
}

// restart stops the world's Server and host, as terp mcp does when it
// stops, and starts them again on the same store, backend and host state,
// the Server with cfg.
func (w *world) restart(t *testing.T, cfg Config) {
	t.Helper()
	w.srv.Close(ctx(t))
	w.host.Close(ctx(t))
	w.start(t, cfg)
}

// connect is a new client session on the server, as Run serves one, closed
// when the test ends: then, if it had a conversation, the test waits until
// the server has closed it, which it does after the session ends.
func (w *world) connect(t *testing.T) *sdk.ClientSession {
	t.Helper()
	serverT, clientT := sdk.NewInMemoryTransports()
	ss, err := w.srv.sdk.Connect(ctx(t), serverT, nil)
	if err != nil {
		t.Fatal(err)
	}
	cs := w.client(t, clientT)
	t.Cleanup(func() {
		w.srv.mu.Lock()
		_, opened := w.srv.sessions[ss]
		w.srv.mu.Unlock()
		closed := w.logs.count("closed a sandbox")
		_ = cs.Close()
		_ = ss.Wait()
		if opened {
			w.logs.wait(t, "closed a sandbox", closed+1)
		}
	})
	return cs
}

// client connects a client on t.
func (w *world) client(t *testing.T, clientT sdk.Transport) *sdk.ClientSession {
	t.Helper()
	client := sdk.NewClient(&sdk.Implementation{Name: "test-client", Version: "1"}, nil)
	cs, err := client.Connect(ctx(t), clientT, nil)
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	t.Cleanup(cancel)
	return c
}

// call calls a tool, failing the test on a protocol error: every mistake
// of the client's must come back as a result its model can read.
func call(t *testing.T, cs *sdk.ClientSession, name string, args any) *sdk.CallToolResult {
	t.Helper()
	res, err := cs.CallTool(ctx(t), &sdk.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("%s(%v): protocol error %v, want a result", name, args, err)
	}
	return res
}

// textOf is the text of a result's text contents.
func textOf(res *sdk.CallToolResult) string {
	var parts []string
	for _, c := range res.Content {
		if tc, ok := c.(*sdk.TextContent); ok {
			parts = append(parts, tc.Text)
		}
	}
	return strings.Join(parts, "\n")
}

// links are a result's resource links, by name.
func links(res *sdk.CallToolResult) map[string]*sdk.ResourceLink {
	out := map[string]*sdk.ResourceLink{}
	for _, c := range res.Content {
		if l, ok := c.(*sdk.ResourceLink); ok {
			out[l.Name] = l
		}
	}
	return out
}

// conversationIDs are the ids of the stored conversations.
func (w *world) conversationIDs(t *testing.T) []string {
	t.Helper()
	entries, err := w.store.List()
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, e := range entries {
		ids = append(ids, e.ID)
	}
	return ids
}

// sandboxState is what became of the sandbox conversation id stored.
func (w *world) sandboxState(t *testing.T, id string) string {
	t.Helper()
	rec, err := w.store.Load(id)
	if err != nil {
		t.Fatal(err)
	}
	return w.backend.stateOf(sandbox.SessionID(rec.Sandbox.SessionID))
}

// recordingBackend is the memory backend, telling what was done to each
// of its sandboxes: the memory backend keeps that to itself.
type recordingBackend struct {
	*memory.Backend
	createGate chan struct{}
	creating   chan struct{}
	pauseGate  chan struct{}
	pausing    chan struct{}

	mu    sync.Mutex
	state map[sandbox.SessionID]string // "running", "paused", "closed"
}

func (b *recordingBackend) Create(ctx context.Context, opt sandbox.Options) (sandbox.Sandbox, error) {
	if b.createGate != nil {
		select {
		case b.creating <- struct{}{}:
		default:
		}
		<-b.createGate
	}
	sbx, err := b.Backend.Create(ctx, opt)
	if err != nil {
		return nil, err
	}
	b.set(sbx.ID(), "running")
	return &recordingSandbox{Sandbox: sbx, b: b}, nil
}

func (b *recordingBackend) Resume(ctx context.Context, id sandbox.SessionID) (sandbox.Sandbox, error) {
	sbx, err := b.Backend.Resume(ctx, id)
	if err != nil {
		return nil, err
	}
	b.set(id, "running")
	return &recordingSandbox{Sandbox: sbx, b: b}, nil
}

func (b *recordingBackend) set(id sandbox.SessionID, state string) {
	b.mu.Lock()
	b.state[id] = state
	b.mu.Unlock()
}

func (b *recordingBackend) stateOf(id sandbox.SessionID) string {
	b.mu.Lock()
	defer b.mu.Unlock()
	if s, ok := b.state[id]; ok {
		return s
	}
	return "unknown"
}

type recordingSandbox struct {
	sandbox.Sandbox
	b *recordingBackend
}

func (s *recordingSandbox) Pause(ctx context.Context) (sandbox.SessionID, error) {
	if s.b.pauseGate != nil {
		select {
		case s.b.pausing <- struct{}{}:
		default:
		}
		<-s.b.pauseGate
	}
	id, err := s.Sandbox.Pause(ctx)
	if err == nil {
		s.b.set(s.ID(), "paused")
	}
	return id, err
}

func (s *recordingSandbox) Close(ctx context.Context) error {
	err := s.Sandbox.Close(ctx)
	if err == nil {
		s.b.set(s.ID(), "closed")
	}
	return err
}

// logRecorder is a slog handler that keeps the messages logged, so that a
// test can wait for one.
type logRecorder struct {
	mu   sync.Mutex
	msgs []string
	more chan struct{} // closed and replaced at each message
}

func newLogRecorder() *logRecorder { return &logRecorder{more: make(chan struct{})} }

func (l *logRecorder) Enabled(context.Context, slog.Level) bool { return true }
func (l *logRecorder) WithAttrs([]slog.Attr) slog.Handler       { return l }
func (l *logRecorder) WithGroup(string) slog.Handler            { return l }

func (l *logRecorder) Handle(_ context.Context, r slog.Record) error {
	l.mu.Lock()
	l.msgs = append(l.msgs, r.Message)
	close(l.more)
	l.more = make(chan struct{})
	l.mu.Unlock()
	return nil
}

// count is how many times msg was logged.
func (l *logRecorder) count(msg string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, m := range l.msgs {
		if m == msg {
			n++
		}
	}
	return n
}

// wait waits for msg to have been logged n times in all.
func (l *logRecorder) wait(t *testing.T, msg string, n int) {
	t.Helper()
	timeout := time.After(10 * time.Second)
	for {
		l.mu.Lock()
		count := 0
		for _, m := range l.msgs {
			if m == msg {
				count++
			}
		}
		more := l.more
		l.mu.Unlock()
		if count >= n {
			return
		}
		select {
		case <-more:
		case <-timeout:
			t.Fatalf("%q was logged %d times, want %d", msg, count, n)
		}
	}
}

// A call the client got wrong is a tool error whose text says what to do,
// never a protocol error, and never runs anything.
func TestInvalidCallsAreToolErrors(t *testing.T) {
	w := newWorld(t, worldOptions{})
	cs := w.connect(t)
	for _, tc := range []struct {
		name string
		tool string
		args any
		want string
	}{
		{"no code", PythonTool, map[string]any{}, "code is missing or empty"},
		{"null arguments", RunPythonTool, nil, "code is missing or empty"},
		{"blank code", RunPythonTool, map[string]any{"code": " \n\t"}, "code is missing or empty"},
		{"code not a string", PythonTool, map[string]any{"code": 42}, "documented schema"},
		{"arguments not an object", PythonTool, json.RawMessage(`["print hi"]`), "documented schema"},
		{"text and base64", UploadTool, map[string]any{"name": "a.txt", "text": "x", "base64": "eA=="}, "not both"},
		{"no content", UploadTool, map[string]any{"name": "a.txt"}, "give the content"},
		{"bad base64", UploadTool, map[string]any{"name": "a.bin", "base64": "not*base64!"}, "not valid standard base64"},
		{"name not a string", UploadTool, map[string]any{"name": 7, "text": "x"}, "documented schema"},
		{"name a path", UploadTool, map[string]any{"name": "../a.txt", "text": "x"}, "plain file name"},
		{"no name", UploadTool, map[string]any{"text": "x"}, "plain file name"},
		{"missing file", DownloadTool, map[string]any{"path": "nope.txt"}, "/work/nope.txt is not there"},
		{"empty path", DownloadTool, map[string]any{"path": ""}, "give the path"},
		{"no path", DownloadTool, map[string]any{}, "give the path"},
		{"path is /work/", DownloadTool, map[string]any{"path": "/work/"}, "give the path"},
		{"path not a string", DownloadTool, map[string]any{"path": []string{"a"}}, "documented schema"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := call(t, cs, tc.tool, tc.args)
			if !res.IsError {
				t.Fatalf("%s(%v) = %q, not a tool error", tc.tool, tc.args, textOf(res))
			}
			if got := textOf(res); !strings.Contains(got, tc.want) {
				t.Errorf("%s(%v) says %q, want it to say %q", tc.tool, tc.args, got, tc.want)
			}
		})
	}
	// None of them uploaded or ran anything.
	if res := call(t, cs, ListTool, nil); res.IsError || !strings.Contains(textOf(res), "/work is empty") {
		t.Errorf("list_files after the bad calls = %q (error %v), want /work empty", textOf(res), res.IsError)
	}
}

// A path that climbs out of /work is confined to it: download_file and
// resources/read look for /work/etc/passwd, which is not there, and say
// so, and an absolute path outside /work is refused; nothing outside /work
// is read.
func TestPathEscapingWorkIsConfined(t *testing.T) {
	w := newWorld(t, worldOptions{})
	cs := w.connect(t)
	if res := call(t, cs, UploadTool, map[string]any{"name": "passwd", "text": "in work"}); res.IsError {
		t.Fatalf("upload: %s", textOf(res))
	}
	for p, want := range map[string]string{
		"../../etc/passwd":       "/work/etc/passwd is not there",
		"/work/../../etc/passwd": "/etc/passwd is outside /work",
		"/etc/passwd":            "/etc/passwd is outside /work",
	} {
		res := call(t, cs, DownloadTool, map[string]any{"path": p})
		if !res.IsError || !strings.Contains(textOf(res), want) {
			t.Errorf("download_file %q = %q (error %v), want %q", p, textOf(res), res.IsError, want)
		}
		if len(res.Content) != 1 {
			t.Errorf("download_file %q returned %d contents, want only the error", p, len(res.Content))
		}
	}
	// ../passwd climbs out of /work and back to nothing but /work/passwd.
	res := call(t, cs, DownloadTool, map[string]any{"path": "../passwd"})
	if res.IsError || len(res.Content) != 1 {
		t.Fatalf("download_file ../passwd = %q (error %v)", textOf(res), res.IsError)
	}
	if er, ok := res.Content[0].(*sdk.EmbeddedResource); !ok || er.Resource.Text != "in work" {
		t.Errorf("download_file ../passwd = %#v, want /work/passwd's text", res.Content[0])
	}
	for _, uri := range []string{uriPrefix + "../../etc/passwd", uriPrefix + "..%2F..%2Fetc%2Fpasswd"} {
		if got, err := cs.ReadResource(ctx(t), &sdk.ReadResourceParams{URI: uri}); !isNotFound(err) {
			t.Errorf("resources/read %s = %+v, %v; want not found", uri, got, err)
		}
	}
}

// blockingRequests passes the worker its requests, but holds one whose code
// has the line "# block" until the test releases it, saying it started.
type blockingRequests struct {
	r       *bufio.Reader
	ctx     context.Context
	w       *world
	pending []byte
}

func (b *blockingRequests) Read(p []byte) (int, error) {
	if len(b.pending) == 0 {
		line, err := b.r.ReadBytes('\n')
		if len(line) == 0 {
			return 0, err
		}
		if strings.Contains(string(line), `# block\n`) {
			b.w.started <- struct{}{}
			select {
			case <-b.w.release:
			case <-b.ctx.Done():
				return 0, b.ctx.Err()
			}
		}
		b.pending = line
	}
	n := copy(p, b.pending)
	b.pending = b.pending[n:]
	return n, nil
}

// isNotFound reports whether err is the protocol's resource-not-found.
func isNotFound(err error) bool {
	return err != nil && strings.Contains(strings.ToLower(err.Error()), "not found")
}

// A second run while one runs in the same session is a tool error that
// says the sandbox is busy, and the first run still finishes.
func TestSecondRunWhileOneRunsIsBusy(t *testing.T) {
	w := newWorld(t, worldOptions{})
	cs := w.connect(t)
	first := make(chan *sdk.CallToolResult, 1)
	go func() {
		res, err := cs.CallTool(ctx(t), &sdk.CallToolParams{Name: PythonTool, Arguments: map[string]any{"code": "# block\nprint first done"}})
		if err != nil {
			t.Errorf("the first run: %v", err)
		}
		first <- res
	}()
	select {
	case <-w.started:
	case <-ctx(t).Done():
		t.Fatal("the first run never started")
	}
	res := call(t, cs, RunPythonTool, map[string]any{"code": "print second"})
	// "sandbox is busy", not the conversation service's own words, which
	// speak of a question the MCP client never asked.
	if !res.IsError || !strings.Contains(textOf(res), "sandbox is busy") {
		t.Errorf("the second run = %q (error %v), want a tool error saying the sandbox is busy", textOf(res), res.IsError)
	}
	if strings.Contains(textOf(res), "second\n") {
		t.Errorf("the second run ran: %q", textOf(res))
	}
	close(w.release)
	select {
	case res := <-first:
		if res == nil || res.IsError || !strings.Contains(textOf(res), "first done") {
			t.Errorf("the first run = %+v, want its output", res)
		}
	case <-ctx(t).Done():
		t.Fatal("the first run never finished")
	}
	// The sandbox is free again.
	if res := call(t, cs, PythonTool, map[string]any{"code": "print third"}); res.IsError || !strings.Contains(textOf(res), "third") {
		t.Errorf("a run after the first = %q (error %v)", textOf(res), res.IsError)
	}
}

// A file over MaxEmbed comes from download_file as a text and a link, and
// resources/read of the link returns it whole, up to max_download_size,
// past which it is an error, not a file cut short.
func TestDownloadLargeFileIsALink(t *testing.T) {
	w := newWorld(t, worldOptions{maxEmbed: 1 << 10, maxDownloadSize: 4 << 10})
	cs := w.connect(t)
	small, big, huge := "month,revenue\n", strings.Repeat("a,b\n", 750), strings.Repeat("x", 5000)
	for name, content := range map[string]string{"small.csv": small, "big.csv": big, "huge.txt": huge} {
		if res := call(t, cs, UploadTool, map[string]any{"name": name, "text": content}); res.IsError {
			t.Fatalf("upload %s: %s", name, textOf(res))
		}
	}

	res := call(t, cs, DownloadTool, map[string]any{"path": "/work/small.csv"})
	if res.IsError || len(res.Content) != 1 {
		t.Fatalf("download small.csv = %q (error %v)", textOf(res), res.IsError)
	}
	if er, ok := res.Content[0].(*sdk.EmbeddedResource); !ok || er.Resource.Text != small || er.Resource.URI != uriPrefix+"small.csv" {
		t.Errorf("download small.csv = %#v, want it embedded", res.Content[0])
	}

	// /mnt/data, where notebook-trained models put files, is /work.
	res = call(t, cs, DownloadTool, map[string]any{"path": "/mnt/data/small.csv"})
	if er, ok := res.Content[0].(*sdk.EmbeddedResource); res.IsError || !ok || er.Resource.Text != small {
		t.Errorf("download /mnt/data/small.csv = %q (error %v), want small.csv", textOf(res), res.IsError)
	}

	res = call(t, cs, DownloadTool, map[string]any{"path": "big.csv"})
	if res.IsError {
		t.Fatalf("download big.csv: %s", textOf(res))
	}
	if !strings.Contains(textOf(res), "resources/read") {
		t.Errorf("download big.csv says %q, want it to point at resources/read", textOf(res))
	}
	link := links(res)["big.csv"]
	if link == nil {
		t.Fatalf("download big.csv = %+v, want a resource link", res.Content)
	}
	if link.URI != uriPrefix+"big.csv" || link.Size == nil || *link.Size != int64(len(big)) {
		t.Errorf("the link is %s of size %v, want %sbig.csv of %d bytes", link.URI, link.Size, uriPrefix, len(big))
	}
	read, err := cs.ReadResource(ctx(t), &sdk.ReadResourceParams{URI: link.URI})
	if err != nil {
		t.Fatalf("resources/read %s: %v", link.URI, err)
	}
	if len(read.Contents) != 1 || read.Contents[0].Text != big || read.Contents[0].URI != link.URI {
		t.Errorf("resources/read %s = %+v, want the whole file", link.URI, read.Contents)
	}

	res = call(t, cs, DownloadTool, map[string]any{"path": "huge.txt"})
	link = links(res)["huge.txt"]
	if res.IsError || link == nil {
		t.Fatalf("download huge.txt = %+v, want a link", res.Content)
	}
	if read, err := cs.ReadResource(ctx(t), &sdk.ReadResourceParams{URI: link.URI}); err == nil {
		t.Errorf("resources/read of a file over max_download_size returned %d bytes, want an error", len(read.Contents[0].Text))
	}
}

// A chart a run saves comes back as an image when it is small enough to
// embed, and as a link to read when it is larger; any other file saved is
// a link.
func TestRunReturnsImagesAndLinks(t *testing.T) {
	w := newWorld(t, worldOptions{maxEmbed: 1 << 10})
	cs := w.connect(t)
	big := strings.Repeat("P", 2000)
	code := "write chart.png tiny-png\nwrite big.png " + big + "\nwrite out.csv a,b\nprint saved"
	res := call(t, cs, PythonTool, map[string]any{"code": code})
	if res.IsError || !strings.Contains(textOf(res), "saved") {
		t.Fatalf("run = %q (error %v)", textOf(res), res.IsError)
	}
	var images []*sdk.ImageContent
	for _, c := range res.Content {
		if im, ok := c.(*sdk.ImageContent); ok {
			images = append(images, im)
		}
	}
	if len(images) != 1 || string(images[0].Data) != "tiny-png" || images[0].MIMEType != "image/png" {
		t.Errorf("images = %+v, want chart.png's bytes as image/png", images)
	}
	got := links(res)
	if len(got) != 2 || got["big.png"] == nil || got["out.csv"] == nil || got["chart.png"] != nil {
		t.Fatalf("links = %v, want big.png and out.csv", got)
	}
	if l := got["big.png"]; l.URI != uriPrefix+"big.png" || l.MIMEType != "image/png" || l.Size == nil || *l.Size != int64(len(big)) {
		t.Errorf("big.png's link = %+v", l)
	}
	read, err := cs.ReadResource(ctx(t), &sdk.ReadResourceParams{URI: got["big.png"].URI})
	if err != nil {
		t.Fatal(err)
	}
	if len(read.Contents) != 1 || string(read.Contents[0].Blob) != big || read.Contents[0].MIMEType != "image/png" {
		t.Errorf("resources/read big.png = %d contents, want its bytes as an image/png blob", len(read.Contents))
	}
}

// When a client session ends its conversation is closed: a conversation
// that holds something is kept with its sandbox paused, one that holds
// nothing is discarded with its sandbox; either way the server says it
// closed a sandbox.
func TestSessionEndClosesItsConversation(t *testing.T) {
	w := newWorld(t, worldOptions{})
	cs := w.connect(t)
	if res := call(t, cs, UploadTool, map[string]any{"name": "data.csv", "text": "a,b"}); res.IsError {
		t.Fatalf("upload: %s", textOf(res))
	}
	ids := w.conversationIDs(t)
	if len(ids) != 1 {
		t.Fatalf("%d conversations stored, want 1", len(ids))
	}
	if s := w.sandboxState(t, ids[0]); s != "running" {
		t.Fatalf("the sandbox is %s during the session, want running", s)
	}
	if err := cs.Close(); err != nil {
		t.Fatal(err)
	}
	w.logs.wait(t, "closed a sandbox", 1)
	if s := w.sandboxState(t, ids[0]); s != "paused" {
		t.Errorf("the sandbox is %s after the session ended, want paused", s)
	}
	// Closed, it lets go of the conversation: it can be locked again.
	lock, err := w.store.Lock(ids[0])
	if err != nil {
		t.Errorf("the conversation is still held after its session ended: %v", err)
	} else {
		_ = lock.Unlock()
	}

	empty := w.connect(t)
	if res := call(t, empty, ListTool, nil); res.IsError {
		t.Fatalf("list: %s", textOf(res))
	}
	all := w.conversationIDs(t)
	if len(all) != 2 {
		t.Fatalf("%d conversations stored, want 2", len(all))
	}
	var second string
	for _, id := range all {
		if id != ids[0] {
			second = id
		}
	}
	rec, err := w.store.Load(second)
	if err != nil {
		t.Fatal(err)
	}
	sbx := sandbox.SessionID(rec.Sandbox.SessionID)
	if s := w.backend.stateOf(sbx); s != "running" {
		t.Fatalf("the empty session's sandbox is %s during the session, want running", s)
	}
	_ = empty.Close()
	w.logs.wait(t, "closed a sandbox", 2)
	if got := w.conversationIDs(t); len(got) != 1 || got[0] != ids[0] {
		t.Errorf("stored after an empty session ended: %v, want only %s", got, ids[0])
	}
	if s := w.backend.stateOf(sbx); s != "closed" {
		t.Errorf("the empty session's sandbox is %s after it ended, want closed", s)
	}
}

// Two client sessions have two sandboxes: a file uploaded in one is not
// listed in the other, nor read from it by its URI, which names no
// sandbox and so resolves in the caller's own.
func TestSessionsHaveTheirOwnSandboxes(t *testing.T) {
	w := newWorld(t, worldOptions{})
	a, b := w.connect(t), w.connect(t)
	if res := call(t, a, UploadTool, map[string]any{"name": "secret.txt", "text": "for A"}); res.IsError {
		t.Fatalf("upload in A: %s", textOf(res))
	}
	if res := call(t, a, ListTool, nil); !strings.Contains(textOf(res), "/work/secret.txt") {
		t.Errorf("A lists %q, want its own file", textOf(res))
	}
	res := call(t, b, ListTool, nil)
	if res.IsError || strings.Contains(textOf(res), "secret.txt") || !strings.Contains(textOf(res), "/work is empty") {
		t.Errorf("B lists %q (error %v), want /work empty", textOf(res), res.IsError)
	}
	uri := uriPrefix + "secret.txt"
	if read, err := a.ReadResource(ctx(t), &sdk.ReadResourceParams{URI: uri}); err != nil || read.Contents[0].Text != "for A" {
		t.Errorf("A reads %s: %+v, %v", uri, read, err)
	}
	if read, err := b.ReadResource(ctx(t), &sdk.ReadResourceParams{URI: uri}); !isNotFound(err) {
		t.Errorf("B reads A's %s: %+v, %v; want not found", uri, read, err)
	}
	if res := call(t, b, DownloadTool, map[string]any{"path": "secret.txt"}); !res.IsError || !strings.Contains(textOf(res), "not there") {
		t.Errorf("B downloads A's file: %q (error %v), want not there", textOf(res), res.IsError)
	}
	if n := len(w.conversationIDs(t)); n != 2 {
		t.Errorf("%d conversations stored, want one per session", n)
	}
}

// Server.Close closes every session's conversation, pausing its sandbox,
// and a later call, in a session old or new, is a tool error saying the
// server is stopping.
func TestCloseClosesEveryConversation(t *testing.T) {
	w := newWorld(t, worldOptions{})
	a, b := w.connect(t), w.connect(t)
	for i, cs := range []*sdk.ClientSession{a, b} {
		if res := call(t, cs, PythonTool, map[string]any{"code": "write out.txt x"}); res.IsError {
			t.Fatalf("run in session %d: %s", i, textOf(res))
		}
	}
	ids := w.conversationIDs(t)
	if len(ids) != 2 {
		t.Fatalf("%d conversations stored, want 2", len(ids))
	}
	w.srv.Close(ctx(t))
	for _, id := range ids {
		if s := w.sandboxState(t, id); s != "paused" {
			t.Errorf("conversation %s's sandbox is %s after Close, want paused", id, s)
		}
		lock, err := w.store.Lock(id)
		if err != nil {
			t.Errorf("conversation %s is still held after Close: %v", id, err)
			continue
		}
		_ = lock.Unlock()
	}
	late := w.connect(t)
	for _, cs := range []*sdk.ClientSession{a, late} {
		res := call(t, cs, PythonTool, map[string]any{"code": "print hi"})
		if !res.IsError || !strings.Contains(textOf(res), "the server is stopping") {
			t.Errorf("a call after Close = %q (error %v), want the server is stopping", textOf(res), res.IsError)
		}
		if _, err := cs.ReadResource(ctx(t), &sdk.ReadResourceParams{URI: uriPrefix + "out.txt"}); err == nil {
			t.Error("resources/read after Close worked")
		}
	}
	if n := len(w.conversationIDs(t)); n != 2 {
		t.Errorf("%d conversations stored after calls past Close, want the 2 there were", n)
	}
}

// A first call whose conversation is still opening when Server.Close runs
// must not leave that conversation open: Close promises to close every
// conversation and refuse new ones. This fails today: Close only sees
// conversations already opened, the call goes on to open one and run in it,
// and as Close forgot its session, the session's end never closes it.
func TestCloseDuringFirstCallClosesItsConversation(t *testing.T) {
	gate := make(chan struct{})
	w := newWorld(t, worldOptions{createGate: gate})
	cs := w.connect(t)
	done := make(chan *sdk.CallToolResult, 1)
	go func() {
		res, err := cs.CallTool(ctx(t), &sdk.CallToolParams{Name: UploadTool, Arguments: map[string]any{"name": "a.txt", "text": "x"}})
		if err != nil {
			t.Errorf("upload: %v", err)
		}
		done <- res
	}()
	select {
	case <-w.backend.creating:
	case <-ctx(t).Done():
		t.Fatal("the sandbox was never created")
	}
	closed := make(chan struct{})
	go func() { w.srv.Close(context.Background()); close(closed) }()
	// Close may wait for the opening conversation or not; either way the
	// sandbox is let be created now.
	select {
	case <-closed:
	case <-time.After(100 * time.Millisecond):
	}
	close(gate)
	<-closed
	res := <-done
	if res == nil {
		t.Fatal("no result")
	}
	if res.IsError && strings.Contains(textOf(res), "stopping") {
		return // refused: nothing was left open
	}
	ids := w.conversationIDs(t)
	if len(ids) != 1 {
		t.Fatalf("%d conversations stored, want 1", len(ids))
	}
	if s := w.sandboxState(t, ids[0]); s != "paused" {
		t.Errorf("the upload (%q) opened a conversation during Close, and its sandbox is %s after Close; want paused",
			textOf(res), s)
	}
}

// The instructions tell the client's model where files are, how long a
// call may run, what the network allows, and of the idle pause when there
// is one; the client gets them in initialize.
func TestInstructions(t *testing.T) {
	for _, idle := range []time.Duration{0, 10 * time.Minute} {
		cfg := config.Default()
		cfg.IdlePause = idle
		cfg.Timeout = 97 * time.Second
		got := instructions(cfg)
		for _, want := range []string{"/work", "1m37s", agent.NetworkSentence(cfg.NetworkPolicy())} {
			if !strings.Contains(got, want) {
				t.Errorf("idle %s: the instructions do not mention %q:\n%s", idle, want, got)
			}
		}
		if mentions := strings.Contains(got, "paused"); mentions != (idle > 0) {
			t.Errorf("idle %s: the instructions mention a pause: %v:\n%s", idle, mentions, got)
		}
		if idle > 0 && !strings.Contains(got, "10m0s") {
			t.Errorf("the instructions do not say how long until the pause:\n%s", got)
		}
	}
	w := newWorld(t, worldOptions{})
	cs := w.connect(t)
	if got := cs.InitializeResult().Instructions; got != instructions(w.cfg) || got == "" {
		t.Errorf("initialize told %q, want the instructions", got)
	}
}

// A process serving an HTTP session may be stopped just as the session
// ends: Close must not return while the ended session's conversation is
// still closing, or its sandbox is never paused. This failed once: the
// session's end took the conversation out of the server's sessions before
// closing it, and Close waited only for those it found there.
func TestCloseWaitsForAnEndedSessionsConversation(t *testing.T) {
	gate := make(chan struct{})
	w := newWorld(t, worldOptions{pauseGate: gate})
	serverT, clientT := sdk.NewInMemoryTransports()
	ss, err := w.srv.sdk.Connect(ctx(t), serverT, nil)
	if err != nil {
		t.Fatal(err)
	}
	ran := make(chan error, 1)
	go func() { ran <- ss.Wait() }()
	cs := w.client(t, clientT)
	if res := call(t, cs, UploadTool, map[string]any{"name": "data.csv", "text": "a,b"}); res.IsError {
		t.Fatalf("upload: %s", textOf(res))
	}
	_ = cs.Close()
	select {
	case <-ran:
	case <-ctx(t).Done():
		t.Fatal("Run did not return when its client went")
	}
	select {
	case <-w.backend.pausing:
	case <-ctx(t).Done():
		t.Fatal("the ended session's sandbox was never paused")
	}
	closed := make(chan struct{})
	go func() { w.srv.Close(context.Background()); close(closed) }()
	select {
	case <-closed:
		t.Error("Server.Close returned while the ended session's sandbox was still pausing; terp mcp would exit now")
	case <-time.After(200 * time.Millisecond):
	}
	close(gate)
	<-closed
	w.logs.wait(t, "closed a sandbox", 1)
	ids := w.conversationIDs(t)
	if len(ids) != 1 || w.sandboxState(t, ids[0]) != "paused" {
		t.Errorf("conversations %v, want one with its sandbox paused", ids)
	}
}

// download_file of something in /work that is not a file it can read (a
// directory here) must not tell the model it is too large to embed.
func TestDownloadDirectoryIsNotTooLarge(t *testing.T) {
	w := newWorld(t, worldOptions{})
	cs := w.connect(t)
	if res := call(t, cs, PythonTool, map[string]any{"code": "write charts/a.png x"}); res.IsError {
		t.Fatalf("run: %s", textOf(res))
	}
	res := call(t, cs, DownloadTool, map[string]any{"path": "charts"})
	if strings.Contains(textOf(res), "larger than") {
		t.Errorf("download_file of a directory = %q (error %v), %d contents: it says the directory is too large",
			textOf(res), res.IsError, len(res.Content))
	}
}

// A stdio client restarts terp mcp whenever it restarts itself, so a stdio
// session's sandbox has a handle, told in its first result: it outlives the
// session and the process, and a call naming it after a restart finds the
// files, while a new session's calls that name none get a sandbox of their
// own.
func TestStdioSessionsSandboxOutlivesARestart(t *testing.T) {
	w := newWorld(t, worldOptions{})
	stdio := func() *sdk.ClientSession {
		t.Helper()
		serverT, clientT := sdk.NewInMemoryTransports()
		ran := make(chan error, 1)
		go func() { ran <- w.srv.Run(context.Background(), serverT) }()
		cs := w.client(t, clientT)
		t.Cleanup(func() {
			_ = cs.Close()
			<-ran
		})
		return cs
	}
	cs := stdio()
	res := call(t, cs, UploadTool, map[string]any{"name": "data.csv", "text": "a,b"})
	handle, _ := res.Meta[MetaSandbox].(string)
	if res.IsError || handle == "" || !strings.Contains(textOf(res), `after terp mcp restarts, pass "sandbox": "`+handle+`"`) {
		t.Fatalf("upload = %q (error %v), _meta %v; want the session's handle told", textOf(res), res.IsError, res.Meta)
	}
	if res := call(t, cs, PythonTool, map[string]any{"code": "cat data.csv"}); res.IsError || !strings.HasSuffix(textOf(res), "\n[sandbox "+handle+"]") {
		t.Errorf("a later call = %q (error %v); want the same sandbox, its handle at the end", textOf(res), res.IsError)
	}
	_ = cs.Close()

	w.restart(t, Config{Settings: w.cfg, Version: "test", Log: slog.New(w.logs)})
	ids := w.conversationIDs(t)
	if len(ids) != 1 || w.sandboxState(t, ids[0]) != "paused" {
		t.Fatalf("conversations %v after the restart, want one with its sandbox paused", ids)
	}
	cs = stdio()
	if got := textOf(call(t, cs, ListTool, map[string]any{"sandbox": handle})); !strings.Contains(got, "/work/data.csv") {
		t.Errorf("list_files with the handle after a restart = %q, want the file", got)
	}
	res = call(t, cs, ListTool, nil)
	if other, _ := res.Meta[MetaSandbox].(string); !strings.Contains(textOf(res), "/work is empty") || other == "" || other == handle {
		t.Errorf("a new session's list_files = %q, handle %q; want a sandbox of its own (the old one's %s)", textOf(res), other, handle)
	}
}
