package mcp

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/terpdev/terp/internal/serve"
)

// These tests show terp mcp on the seams of terp serve's host: over HTTP
// the host's key ring turns a wrong token away and names the principal
// that owns a call's sandbox, every request is in its log and metrics, and
// every run of code in its code-run metrics and log; a sandbox is a host
// container, held for the whole of a call, and its conversation is kept
// when it goes.

// serveHTTP serves the world's server over HTTP on its host, as terp mcp
// --http does, and returns the address of its /mcp.
func (w *world) serveHTTP(t *testing.T) string {
	t.Helper()
	w.host.Register(w.srv.Protocol())
	ts := httptest.NewServer(w.host.Handler())
	t.Cleanup(ts.Close)
	return ts.URL + "/mcp"
}

// httpClient connects an SDK client to url through tr, asking for protocol
// version ("" for the newest, sessionless), closed when the test ends.
func httpClient(t *testing.T, url string, tr http.RoundTripper, version string) (*sdk.ClientSession, error) {
	t.Helper()
	client := sdk.NewClient(&sdk.Implementation{Name: "test-client", Version: "1"}, nil)
	cs, err := client.Connect(ctx(t), &sdk.StreamableClientTransport{Endpoint: url, HTTPClient: &http.Client{Transport: tr}},
		&sdk.ClientSessionOptions{ProtocolVersion: version})
	if err != nil {
		return nil, err
	}
	t.Cleanup(func() { _ = cs.Close() })
	return cs, nil
}

// keyTransport sends key as a bearer token and an id of its own with each
// request, and keeps the ids of the requests that carried a tools/call.
type keyTransport struct {
	key string

	mu    sync.Mutex
	n     int
	calls []string
}

func (k *keyTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	if k.key != "" {
		r.Header.Set("Authorization", "Bearer "+k.key)
	}
	k.mu.Lock()
	k.n++
	id := fmt.Sprintf("test-%d", k.n)
	k.mu.Unlock()
	r.Header.Set(serve.RequestIDHeader, id)
	if r.GetBody != nil {
		if body, err := r.GetBody(); err == nil {
			b, _ := io.ReadAll(body)
			if bytes.Contains(b, []byte(`"tools/call"`)) {
				k.mu.Lock()
				k.calls = append(k.calls, id)
				k.mu.Unlock()
			}
		}
	}
	return http.DefaultTransport.RoundTrip(r)
}

func (k *keyTransport) callIDs() []string {
	k.mu.Lock()
	defer k.mu.Unlock()
	return slices.Clone(k.calls)
}

// attrLog is a slog handler that keeps each record's message and
// attributes as text.
type attrLog struct {
	mu   sync.Mutex
	recs []map[string]string
}

func (l *attrLog) Enabled(context.Context, slog.Level) bool { return true }
func (l *attrLog) WithAttrs([]slog.Attr) slog.Handler       { return l }
func (l *attrLog) WithGroup(string) slog.Handler            { return l }

func (l *attrLog) Handle(_ context.Context, r slog.Record) error {
	rec := map[string]string{"msg": r.Message}
	r.Attrs(func(a slog.Attr) bool {
		rec[a.Key] = a.Value.String()
		return true
	})
	l.mu.Lock()
	l.recs = append(l.recs, rec)
	l.mu.Unlock()
	return nil
}

// find is the first record with msg whose attributes include want.
func (l *attrLog) find(msg string, want map[string]string) map[string]string {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, rec := range l.recs {
		if rec["msg"] != msg {
			continue
		}
		match := true
		for k, v := range want {
			match = match && rec[k] == v
		}
		if match {
			return rec
		}
	}
	return nil
}

// scrape is what the host's metrics say now.
func scrape(t *testing.T, host *serve.Server) string {
	t.Helper()
	rec := httptest.NewRecorder()
	host.MetricsHandler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	return rec.Body.String()
}

// Over HTTP the host authenticates, logs and counts: a missing or wrong
// token is its 401, in the words terp mcp's clients always got; a call of
// a principal's runs in that principal's sandbox on the host's exec path,
// and appears in the host's request log and code-run metrics, its run
// logged with the id of the request that carried it; another principal
// does not find the sandbox by its handle.
func TestHTTPIsServedByTheHost(t *testing.T) {
	log := &attrLog{}
	w := newWorld(t, worldOptions{hostLog: log,
		keys: map[string]serve.Principal{"alice-key-0123456789": {Name: "alice"}, "bob-key-0123456789": {Name: "bob"}}})
	url := w.serveHTTP(t)

	initialize := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"curl","version":"1"}}}`
	for _, key := range []string{"", "wrong"} {
		req, _ := http.NewRequestWithContext(ctx(t), http.MethodPost, url, strings.NewReader(initialize))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if key != "" {
			req.Header.Set("Authorization", "Bearer "+key)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized || resp.Header.Get("WWW-Authenticate") != `Bearer realm="terp mcp"` ||
			!strings.Contains(string(body), "TERP_MCP_TOKEN") {
			t.Errorf("key %q: %d, WWW-Authenticate %q, %q; want 401 with a bearer challenge naming TERP_MCP_TOKEN",
				key, resp.StatusCode, resp.Header.Get("WWW-Authenticate"), body)
		}
	}
	if _, err := httpClient(t, url, &keyTransport{key: "wrong"}, ""); err == nil {
		t.Error("a client with a wrong token connected")
	}

	// With a session, whose calls run in the context of the request that
	// opened it.
	alice := &keyTransport{key: "alice-key-0123456789"}
	cs, err := httpClient(t, url, alice, "2025-11-25")
	if err != nil {
		t.Fatal(err)
	}
	if res := call(t, cs, PythonTool, map[string]any{"code": "print hello"}); res.IsError || !strings.Contains(textOf(res), "hello") {
		t.Fatalf("python = %q (error %v)", textOf(res), res.IsError)
	}
	metrics := scrape(t, w.host)
	for _, want := range []string{`terp_code_runs_total{result="ok"} 1`, `terp_http_requests_total{code="401",route="/"} `} {
		if !strings.Contains(metrics, want) {
			t.Errorf("the host's metrics do not say %s:\n%s", want, metrics)
		}
	}
	if log.find("request", map[string]string{"route": "/", "status": "200", "key_name": "alice"}) == nil {
		t.Errorf("the host's log has no request of alice's: %v", log.recs)
	}
	run := log.find("code run", map[string]string{"result": "ok"})
	if run == nil || !slices.Contains(alice.callIDs(), run["request_id"]) {
		t.Errorf("the host logged the run as %v; want it with the id of the request that carried the call, one of %v", run, alice.callIDs())
	}

	// Without sessions, the handle is the principal's.
	mine, err := httpClient(t, url, &keyTransport{key: "alice-key-0123456789"}, "")
	if err != nil {
		t.Fatal(err)
	}
	res := call(t, mine, PythonTool, map[string]any{"code": "write a.txt alice's"})
	handle, _ := res.Meta[MetaSandbox].(string)
	if res.IsError || handle == "" {
		t.Fatalf("python = %q (error %v), _meta %v; want a new sandbox's handle", textOf(res), res.IsError, res.Meta)
	}
	bob, err := httpClient(t, url, &keyTransport{key: "bob-key-0123456789"}, "")
	if err != nil {
		t.Fatal(err)
	}
	res = call(t, bob, PythonTool, map[string]any{"code": "cat a.txt", "sandbox": handle})
	if !res.IsError || !strings.Contains(textOf(res), "no sandbox "+handle) {
		t.Errorf("bob with alice's handle: %q (error %v); want no such sandbox", textOf(res), res.IsError)
	}
	res = call(t, mine, PythonTool, map[string]any{"code": "cat a.txt", "sandbox": handle})
	if res.IsError || !strings.Contains(textOf(res), "alice's") {
		t.Errorf("alice with her handle: %q (error %v); want her file", textOf(res), res.IsError)
	}
}

// A call that runs longer than --expire-after keeps its sandbox: the
// sandbox expires that long after its last call ends, and its conversation
// is then kept, its sandbox paused, for terp sessions.
func TestCallOutlastingExpiryKeepsItsSandbox(t *testing.T) {
	const expireAfter = 200 * time.Millisecond
	w := newWorld(t, worldOptions{expireAfter: expireAfter})
	cs, err := httpClient(t, w.serveHTTP(t), &keyTransport{}, "")
	if err != nil {
		t.Fatal(err)
	}
	res := call(t, cs, UploadTool, map[string]any{"name": "kept.txt", "text": "here"})
	handle, _ := res.Meta[MetaSandbox].(string)
	if res.IsError || handle == "" {
		t.Fatalf("upload = %q (error %v); want a new sandbox's handle", textOf(res), res.IsError)
	}
	long := make(chan *sdk.CallToolResult, 1)
	go func() {
		res, err := cs.CallTool(ctx(t), &sdk.CallToolParams{Name: PythonTool,
			Arguments: map[string]any{"code": "# block\ncat kept.txt", "sandbox": handle}})
		if err != nil {
			t.Errorf("the long call: %v", err)
		}
		long <- res
	}()
	select {
	case <-w.started:
	case <-ctx(t).Done():
		t.Fatal("the long call never started")
	}
	time.Sleep(5 * expireAfter)
	if n := w.logs.count("expired a sandbox"); n != 0 {
		t.Errorf("the sandbox expired %d times while a call ran in it", n)
	}
	close(w.release)
	if res := <-long; res == nil || res.IsError || !strings.Contains(textOf(res), "here") {
		t.Fatalf("the long call = %+v; want the file read", res)
	}
	w.logs.wait(t, "expired a sandbox", 1)
	res = call(t, cs, PythonTool, map[string]any{"code": "cat kept.txt", "sandbox": handle})
	if !res.IsError || !strings.Contains(textOf(res), "expired after "+expireAfter.String()) {
		t.Errorf("a call after the expiry = %q (error %v); want a tool error saying it expired", textOf(res), res.IsError)
	}
	ids := w.conversationIDs(t)
	if len(ids) != 1 || w.sandboxState(t, ids[0]) != "paused" {
		t.Errorf("conversations %v after the expiry; want the one kept, its sandbox paused", ids)
	}
}

// A sandbox has the settings' network, which the operator of terp mcp
// chose, where a terp serve container has what its client asked for; its
// conversation is stored as terp mcp's.
func TestSandboxesHaveTheSettingsNetwork(t *testing.T) {
	for _, tc := range []struct {
		network string
		allow   []string
	}{{"none", nil}, {"allowlist", []string{"pypi.org", "*.pythonhosted.org"}}, {"full", nil}} {
		t.Run(tc.network, func(t *testing.T) {
			w := newWorld(t, worldOptions{network: tc.network, networkAllow: tc.allow})
			cs := w.connect(t)
			if res := call(t, cs, UploadTool, map[string]any{"name": "a.txt", "text": "x"}); res.IsError {
				t.Fatalf("upload: %s", textOf(res))
			}
			ids := w.conversationIDs(t)
			if len(ids) != 1 {
				t.Fatalf("%d conversations stored, want 1", len(ids))
			}
			rec, err := w.store.Load(ids[0])
			if err != nil {
				t.Fatal(err)
			}
			if rec.Settings.Network != tc.network || !slices.Equal(rec.Settings.NetworkAllow, tc.allow) || rec.Origin != "mcp" {
				t.Errorf("stored with network %q %v, origin %q; want %q %v, mcp",
					rec.Settings.Network, rec.Settings.NetworkAllow, rec.Origin, tc.network, tc.allow)
			}
		})
	}
}

// sessionIDTransport sends id as the x-session-id of every request, as
// vLLM's tool server client does, through next.
type sessionIDTransport struct {
	next http.RoundTripper
	id   string
}

func (s sessionIDTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set(SessionHeader, s.id)
	return s.next.RoundTrip(r)
}

// The sandboxes that handles and x-session-ids name outlive a restart of
// the server and its host on the same state, still their owner's: another
// key's call with the same handle is told there is none, and with the same
// id gets a sandbox of its own. A restart after --expire-after has passed
// expires them.
func TestNamedSandboxesOutliveARestart(t *testing.T) {
	const aliceKey, bobKey = "alice-key-0123456789", "bob-key-0123456789"
	w := newWorld(t, worldOptions{keys: map[string]serve.Principal{aliceKey: {Name: "alice"}, bobKey: {Name: "bob"}}})
	url := w.serveHTTP(t)
	connect := func(key, id string) *sdk.ClientSession {
		t.Helper()
		var tr http.RoundTripper = &keyTransport{key: key}
		if id != "" {
			tr = sessionIDTransport{next: tr, id: id}
		}
		cs, err := httpClient(t, url, tr, "")
		if err != nil {
			t.Fatal(err)
		}
		return cs
	}
	run := func(cs *sdk.ClientSession, code, handle string) string {
		t.Helper()
		args := map[string]any{"code": code}
		if handle != "" {
			args["sandbox"] = handle
		}
		return textOf(call(t, cs, PythonTool, args))
	}
	res := call(t, connect(aliceKey, ""), PythonTool, map[string]any{"code": "write a.txt by-handle"})
	handle, _ := res.Meta[MetaSandbox].(string)
	if res.IsError || handle == "" {
		t.Fatalf("python = %q (error %v), _meta %v; want a new sandbox's handle", textOf(res), res.IsError, res.Meta)
	}
	run(connect(aliceKey, "A"), "write b.txt by-id", "")

	cfg := Config{Settings: w.cfg, Version: "test", Log: slog.New(w.logs)}
	w.restart(t, cfg)
	url = w.serveHTTP(t)
	if got := run(connect(bobKey, ""), "cat a.txt", handle); !strings.Contains(got, "no sandbox "+handle) {
		t.Errorf("bob with alice's handle after a restart: %q; want no such sandbox", got)
	}
	if got := run(connect(bobKey, "A"), "cat b.txt", ""); strings.Contains(got, "by-id") {
		t.Errorf("bob with alice's x-session-id after a restart read %q, want a sandbox of his own", got)
	}
	if got := run(connect(aliceKey, ""), "cat a.txt", handle); !strings.Contains(got, "by-handle") {
		t.Errorf("alice with her handle after a restart: %q; want her file", got)
	}
	if got := run(connect(aliceKey, "A"), "cat b.txt", ""); !strings.Contains(got, "by-id") {
		t.Errorf("alice with her x-session-id after a restart: %q; want her file", got)
	}

	expired := w.logs.count("expired a sandbox")
	cfg.ExpireAfter = time.Millisecond
	w.restart(t, cfg)
	url = w.serveHTTP(t)
	w.logs.wait(t, "expired a sandbox", expired+3) // alice's two, bob's one
	if got := run(connect(aliceKey, ""), "cat a.txt", handle); !strings.Contains(got, "expired after 1ms") {
		t.Errorf("alice's handle after it expired: %q; want a tool error saying it expired", got)
	}
	recs, err := w.host.State().Containers(ctx(t), "")
	for _, rec := range recs {
		if rec.Ref != "" {
			t.Errorf("the expired sandbox %s has a record still: %+v", rec.ID, rec)
		}
	}
	if err != nil {
		t.Fatal(err)
	}
}
