package librechat

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/terpdev/terp/internal/serve"
	"github.com/terpdev/terp/internal/serve/servetest"
	"github.com/terpdev/terp/internal/serve/state"
	"github.com/terpdev/terp/internal/terptest"
)

const (
	aliceKey = servetest.AliceKey
	bobKey   = servetest.BobKey
)

// testServer is terp serve with LibreChat's code API, on the real local
// sandbox, over real HTTP.
type testServer struct {
	*httptest.Server
	srv *serve.Server
}

func newTestServer(t testing.TB, opt Options) *testServer {
	t.Helper()
	sc, _ := servetest.Config(t, terptest.TempDir(t), servetest.Options{})
	sc.Settings.Timeout = time.Minute
	hs, srv := servetest.Start(t, sc, func(srv *serve.Server) { Register(srv, opt) })
	return &testServer{Server: hs, srv: srv}
}

func ctx(t testing.TB) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return c
}

// call sends a request as @librechat/agents does (X-API-Key, LibreChat's
// User-Agent), and decodes a JSON answer into out unless it is nil; it
// returns the status and the body.
func (ts *testServer) call(t testing.TB, method, path string, header http.Header, body io.Reader, out any) (int, []byte) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx(t), method, ts.URL+Prefix+path, body)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("User-Agent", "LibreChat/1.0")
	for k, v := range header {
		req.Header[k] = v
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if out != nil && resp.StatusCode == http.StatusOK {
		if err := json.Unmarshal(b, out); err != nil {
			t.Fatalf("%s %s: %v in %s", method, path, err, b)
		}
	}
	return resp.StatusCode, b
}

func keyHeader(key string) http.Header {
	return http.Header{"X-Api-Key": {key}, "Content-Type": {"application/json"}}
}

// exec runs a request's JSON with key, and wants 200.
func (ts *testServer) exec(t testing.TB, key string, req map[string]any) execReply {
	t.Helper()
	b, _ := json.Marshal(req)
	var out execReply
	if status, body := ts.call(t, "POST", "/exec", keyHeader(key), bytes.NewReader(b), &out); status != http.StatusOK {
		t.Fatalf("exec: %d %s", status, body)
	}
	return out
}

// refs are a run's files as @librechat/agents 3.1.63 sends them back.
func refs(session string, files []fileOut) []map[string]string {
	var out []map[string]string
	for _, f := range files {
		out = append(out, map[string]string{"id": f.ID, "name": f.Name, "session_id": session})
	}
	return out
}

func (ts *testServer) download(t testing.TB, key, session, id string) (int, string) {
	t.Helper()
	status, b := ts.call(t, "GET", "/download/"+session+"/"+id, keyHeader(key), nil, nil)
	return status, string(b)
}

func TestExecKeepsOnlyFilesBetweenRuns(t *testing.T) {
	ts := newTestServer(t, Options{})
	first := ts.exec(t, aliceKey, map[string]any{"lang": "py", "code": "x = 41\nopen('/mnt/data/notes.txt', 'w').write('first')\nprint('wrote', x + 1)"})
	if !validID().MatchString(first.SessionID) || first.Stdout != "wrote 42\n" {
		t.Fatalf("first run: %+v", first)
	}
	if len(first.Files) != 1 || first.Files[0].Name != "notes.txt" || !validID().MatchString(first.Files[0].ID) {
		t.Fatalf("first run's files: %+v", first.Files)
	}
	old := first.Files[0].ID
	if status, body := ts.download(t, aliceKey, first.SessionID, old); status != 200 || body != "first" {
		t.Fatalf("download: %d %q", status, body)
	}

	// The second run names the file as the client sends it back, and no
	// session: it runs in the same session, in a new process.
	second := ts.exec(t, aliceKey, map[string]any{"lang": "py", "files": refs(first.SessionID, first.Files),
		"code": "print(open('/mnt/data/notes.txt').read())\ntry:\n    x\nexcept NameError:\n    print('x is gone')"})
	if second.SessionID != first.SessionID || second.Stdout != "first\nx is gone\n" || len(second.Files) != 0 {
		t.Fatalf("second run: %+v", second)
	}

	// A changed file is reported again, with a new id; the old id keeps
	// what it was.
	third := ts.exec(t, aliceKey, map[string]any{"lang": "py", "files": refs(first.SessionID, first.Files),
		"code": "open('/mnt/data/notes.txt', 'a').write(' and second')\nraise ValueError('after the write')"})
	if len(third.Files) != 1 || third.Files[0].Name != "notes.txt" || third.Files[0].ID == old {
		t.Fatalf("third run's files: %+v", third.Files)
	}
	if !strings.Contains(third.Stderr, "ValueError: after the write") {
		t.Fatalf("a failed run's stderr: %q", third.Stderr)
	}
	if _, body := ts.download(t, aliceKey, first.SessionID, third.Files[0].ID); body != "first and second" {
		t.Fatalf("the new version: %q", body)
	}
	if _, body := ts.download(t, aliceKey, first.SessionID, old); body != "first" {
		t.Fatalf("the old version: %q", body)
	}
}

func TestExpiredSessionGetsItsFilesBack(t *testing.T) {
	ts := newTestServer(t, Options{})
	first := ts.exec(t, aliceKey, map[string]any{"lang": "py", "code": "import os\nos.makedirs('/mnt/data/out')\nopen('/mnt/data/out/a.csv', 'w').write('1,2')"})
	if len(first.Files) != 1 || first.Files[0].Name != "out/a.csv" {
		t.Fatalf("files: %+v", first.Files)
	}
	if err := ts.srv.RemoveContainer(ctx(t), "alice", first.SessionID); err != nil {
		t.Fatal(err)
	}
	again := ts.exec(t, aliceKey, map[string]any{"lang": "py", "files": refs(first.SessionID, first.Files),
		"code": "print(open('/mnt/data/out/a.csv').read())"})
	if again.Stdout != "1,2\n" || len(again.Files) != 0 || again.SessionID != first.SessionID {
		t.Fatalf("after expiry: %+v", again)
	}
}

func TestUploadThenExec(t *testing.T) {
	ts := newTestServer(t, Options{})
	var body bytes.Buffer
	mw := multipart.NewWriter(&body)
	_ = mw.WriteField("entity_id", "agent_abc")
	fw, _ := mw.CreateFormFile("file", "data.csv")
	_, _ = fw.Write([]byte("a,b\n1,2\n"))
	_ = mw.Close()
	var up uploadReply
	h := http.Header{"X-Api-Key": {aliceKey}, "Content-Type": {mw.FormDataContentType()}}
	if status, b := ts.call(t, "POST", "/upload", h, &body, &up); status != 200 {
		t.Fatalf("upload: %d %s", status, b)
	}
	if up.Message != "success" || !validID().MatchString(up.SessionID) || up.StorageSessionID != up.SessionID ||
		len(up.Files) != 1 || up.Files[0].Filename != "data.csv" || !validID().MatchString(up.Files[0].FileID) {
		t.Fatalf("upload reply: %+v", up)
	}

	// LibreChat checks an attachment's age before it names it.
	var summary []fileEntry
	if status, b := ts.call(t, "GET", "/files/"+up.SessionID+"?detail=summary", keyHeader(aliceKey), nil, &summary); status != 200 ||
		len(summary) != 1 || !strings.HasPrefix(summary[0].Name, up.SessionID+"/"+up.Files[0].FileID) {
		t.Fatalf("files: %d %s", status, b)
	}
	if at, err := time.Parse(time.RFC3339, summary[0].LastModified); err != nil || time.Since(at) > time.Minute {
		t.Fatalf("lastModified %q: %v", summary[0].LastModified, err)
	}

	run := ts.exec(t, aliceKey, map[string]any{"lang": "py", "code": "import pandas as pd\nprint(pd.read_csv('/mnt/data/data.csv').b.sum())",
		"files": []map[string]string{{"id": up.Files[0].FileID, "name": "data.csv", "session_id": up.SessionID}}})
	if run.Stdout != "2\n" || len(run.Files) != 0 {
		t.Fatalf("run on the upload: %+v", run)
	}

	// The newer client's references name the session storage_session_id.
	newer := ts.exec(t, aliceKey, map[string]any{"lang": "py", "code": "print(open('/mnt/data/data.csv').read().count(','))",
		"files": []map[string]string{{"id": up.Files[0].FileID, "resource_id": "user-1", "name": "data.csv", "storage_session_id": up.SessionID, "kind": "user"}}})
	if newer.Stdout != "2\n" {
		t.Fatalf("newer references: %+v", newer)
	}
}

func TestAnotherKeyReachesNothing(t *testing.T) {
	ts := newTestServer(t, Options{})
	alice := ts.exec(t, aliceKey, map[string]any{"lang": "py", "code": "open('/mnt/data/secret.txt', 'w').write('alice only')"})
	f := alice.Files[0]
	if status, _ := ts.download(t, bobKey, alice.SessionID, f.ID); status != http.StatusNotFound {
		t.Fatalf("bob's download of alice's file: %d", status)
	}
	if status, _ := ts.call(t, "GET", "/files/"+alice.SessionID+"?detail=full", keyHeader(bobKey), nil, nil); status != http.StatusNotFound {
		t.Fatalf("bob's listing of alice's session: %d", status)
	}
	// Bob naming alice's session runs in a new one of his own, told as a
	// session that expired is.
	named := ts.exec(t, bobKey, map[string]any{"lang": "py", "session_id": alice.SessionID,
		"code": "import os\nprint(os.path.exists('/mnt/data/secret.txt'))"})
	if named.SessionID == alice.SessionID || named.Stdout != "False\n" ||
		!strings.Contains(named.Stderr, "session "+alice.SessionID+" is not kept any more, or never was: this run is in a new session") {
		t.Fatalf("bob's exec naming alice's session: %+v", named)
	}
	bob := ts.exec(t, bobKey, map[string]any{"lang": "py", "files": refs(alice.SessionID, alice.Files),
		"code": "import os\nprint(os.path.exists('/mnt/data/secret.txt'))"})
	if bob.SessionID == alice.SessionID || bob.Stdout != "False\n" || !strings.Contains(bob.Stderr, "is not kept any more, or never was") {
		t.Fatalf("bob's exec with alice's references: %+v", bob)
	}
	// The right key with the wrong session finds nothing either.
	if status, _ := ts.download(t, aliceKey, bob.SessionID, f.ID); status != http.StatusNotFound {
		t.Fatalf("alice's file under bob's session: %d", status)
	}
}

func TestRefusals(t *testing.T) {
	ts := newTestServer(t, Options{})
	for _, tc := range []struct {
		name   string
		header http.Header
		body   string
		status int
		want   string
	}{
		{"no key", http.Header{"Content-Type": {"application/json"}}, `{"lang":"py","code":"print(1)"}`, 401, "X-API-Key"},
		{"wrong key", keyHeader("sk-wrong-0123456789abcdef"), `{"lang":"py","code":"print(1)"}`, 401, "X-API-Key"},
		{"unsupported language", keyHeader(aliceKey), `{"lang":"js","code":"console.log(1)"}`, 400, `terp runs lang py and bash, not \"js\"`},
		{"not JSON", keyHeader(aliceKey), `lang=py`, 400, "not the JSON /exec takes"},
		{"a signed token to a server that takes none", http.Header{"Authorization": {"Bearer eyJhbGciOiJFZERTQSJ9.eyJ9.c2ln"}}, `{"lang":"py","code":"1"}`, 401, "--librechat-jwt-key"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, body := ts.call(t, "POST", "/exec", tc.header, strings.NewReader(tc.body), nil)
			if status != tc.status || !strings.Contains(string(body), tc.want) {
				t.Fatalf("%d %s, want %d with %q", status, body, tc.status, tc.want)
			}
		})
	}
	if status, _ := ts.download(t, aliceKey, "../../etc", "passwd"); status != http.StatusNotFound {
		t.Fatalf("a download of a path: %d", status)
	}
}

func TestBash(t *testing.T) {
	ts := newTestServer(t, Options{})
	run := ts.exec(t, aliceKey, map[string]any{"lang": "bash", "args": []string{"hello"},
		"code": "echo \"$1 from $(basename $SHELL 2>/dev/null || echo bash)\" > /mnt/data/b.txt; cat /mnt/data/b.txt; echo oops >&2; exit 3"})
	if !strings.HasPrefix(run.Stdout, "hello from") || !strings.Contains(run.Stderr, "oops") || len(run.Files) != 1 || run.Files[0].Name != "b.txt" {
		t.Fatalf("bash: %+v", run)
	}
	plain := ts.exec(t, aliceKey, map[string]any{"lang": "bash", "code": "echo \"$# args\""})
	if plain.Stdout != "0 args\n" {
		t.Fatalf("bash without args: %+v", plain)
	}
	py := ts.exec(t, aliceKey, map[string]any{"lang": "py", "args": []string{"a b", "c"}, "code": "import sys\nprint(sys.argv[1:])"})
	if py.Stdout != "['a b', 'c']\n" {
		t.Fatalf("py with args: %+v", py)
	}
}

func TestImagesAreReportedByName(t *testing.T) {
	ts := newTestServer(t, Options{})
	run := ts.exec(t, aliceKey, map[string]any{"lang": "py",
		"code": "import matplotlib.pyplot as plt\nplt.plot([1, 2, 3])\nplt.savefig('/mnt/data/plot.png')\nprint('saved')"})
	if len(run.Files) != 1 || run.Files[0].Name != "plot.png" {
		t.Fatalf("files: %+v (stderr %q)", run.Files, run.Stderr)
	}
	status, body := ts.download(t, aliceKey, run.SessionID, run.Files[0].ID)
	if status != 200 || !strings.HasPrefix(body, "\x89PNG") {
		t.Fatalf("download: %d %q", status, fmt.Sprintf("%.8q", body))
	}
}

// Two replicas share the state and the conversations, as on PostgreSQL: a
// session's exec that reaches the other replica is forwarded to the one
// its sandbox is open in; when that one is gone, the other opens it. Files
// download from either.
func TestReplicasShareSessions(t *testing.T) {
	dir := terptest.TempDir(t)
	sc, _ := servetest.Config(t, dir, servetest.Options{})
	shared, err := state.OpenDir(filepath.Join(dir, "serve"))
	if err != nil {
		t.Fatal(err)
	}
	start := func() (*httptest.Server, *serve.Server) {
		hs := httptest.NewUnstartedServer(nil)
		hs.Start()
		c := sc
		c.State, c.Replica = shared, hs.URL
		srv, err := serve.New(c)
		if err != nil {
			t.Fatal(err)
		}
		Register(srv, Options{})
		hs.Config.Handler = srv.Handler()
		t.Cleanup(func() { hs.Close(); srv.Close(context.Background()) })
		return hs, srv
	}
	aHS, aSrv := start()
	bHS, bSrv := start()
	a, b := &testServer{Server: aHS, srv: aSrv}, &testServer{Server: bHS, srv: bSrv}

	first := a.exec(t, aliceKey, map[string]any{"lang": "py", "code": "open('/mnt/data/n.txt', 'w').write('on a')"})
	again := b.exec(t, aliceKey, map[string]any{"lang": "py", "files": refs(first.SessionID, first.Files),
		"code": "print(open('/mnt/data/n.txt').read())"})
	if again.SessionID != first.SessionID || again.Stdout != "on a\n" || !aSrv.IsOpen(first.SessionID) || bSrv.IsOpen(first.SessionID) {
		t.Fatalf("forwarded to a: %+v (open on a %v, on b %v)", again, aSrv.IsOpen(first.SessionID), bSrv.IsOpen(first.SessionID))
	}
	if status, body := b.download(t, aliceKey, first.SessionID, first.Files[0].ID); status != 200 || body != "on a" {
		t.Fatalf("download from b: %d %q", status, body)
	}
	aHS.Close()
	aSrv.Close(context.Background())
	taken := b.exec(t, aliceKey, map[string]any{"lang": "py", "files": refs(first.SessionID, first.Files),
		"code": "print(open('/mnt/data/n.txt').read(), 'on b')"})
	if taken.SessionID != first.SessionID || taken.Stdout != "on a on b\n" || !bSrv.IsOpen(first.SessionID) {
		t.Fatalf("after a stopped: %+v", taken)
	}
}

// A session is one of the key's containers, under its cap; execs of one
// session wait for each other rather than fail as busy; and they are
// counted in the host's metrics as every protocol's requests and runs.
func TestLimitsParallelRunsAndMetrics(t *testing.T) {
	sc, _ := servetest.Config(t, terptest.TempDir(t), servetest.Options{})
	sc.Keys[aliceKey] = serve.Principal{Name: "alice", Limits: serve.Limits{Containers: 1}}
	hs, srv := servetest.Start(t, sc, func(srv *serve.Server) { Register(srv, Options{}) })
	ts := &testServer{Server: hs, srv: srv}

	first := ts.exec(t, aliceKey, map[string]any{"lang": "py", "code": "open('/mnt/data/a.txt', 'w').write('a')"})
	b, _ := json.Marshal(map[string]any{"lang": "py", "code": "print(1)"})
	// The newer client reads error rate_limited and retry_after_seconds.
	status, body := ts.call(t, "POST", "/exec", keyHeader(aliceKey), bytes.NewReader(b), nil)
	var refusal errorBody
	_ = json.Unmarshal(body, &refusal)
	if status != http.StatusTooManyRequests || refusal.Error != "rate_limited" || refusal.RetryAfterSeconds <= 0 || !strings.Contains(refusal.Message, "container") {
		t.Fatalf("a second session over the key's cap of one: %d %s", status, body)
	}

	type result struct {
		reply execReply
		err   error
	}
	done := make(chan result, 2)
	for i := range 2 {
		body, _ := json.Marshal(map[string]any{"lang": "py", "files": refs(first.SessionID, first.Files),
			"code": fmt.Sprintf("import time\ntime.sleep(0.3)\nprint(open('/mnt/data/a.txt').read(), %d)", i)})
		req, _ := http.NewRequestWithContext(ctx(t), "POST", ts.URL+Prefix+"/exec", bytes.NewReader(body))
		req.Header = keyHeader(aliceKey)
		go func() {
			var r result
			resp, err := http.DefaultClient.Do(req)
			if err == nil {
				defer resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					err = fmt.Errorf("status %d", resp.StatusCode)
				} else {
					err = json.NewDecoder(resp.Body).Decode(&r.reply)
				}
			}
			r.err = err
			done <- r
		}()
	}
	for range 2 {
		if r := <-done; r.err != nil || r.reply.SessionID != first.SessionID || !strings.HasPrefix(r.reply.Stdout, "a ") {
			t.Fatalf("a parallel run: %+v", r)
		}
	}
	ts.exec(t, aliceKey, map[string]any{"lang": "py", "session_id": first.SessionID, "code": "1/0"})

	rec := httptest.NewRecorder()
	srv.MetricsHandler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	for _, want := range []string{
		`terp_http_requests_total{code="200",route="POST /librechat/v1/exec"} 4`,
		`terp_http_requests_total{code="429",route="POST /librechat/v1/exec"} 1`,
		`terp_code_runs_total{result="ok"} 3`,
		`terp_code_runs_total{result="error"} 1`,
	} {
		if !strings.Contains(rec.Body.String(), want) {
			t.Errorf("the metrics lack %s:\n%s", want, rec.Body.String())
		}
	}
}

// A run past terp's per-run limit is stopped and answered 200, with what
// it printed and terp's notice in stderr; the files it wrote before are
// reported. Of very many files, those a listing names are kept.
func TestTimeoutAndManyFiles(t *testing.T) {
	sc, _ := servetest.Config(t, terptest.TempDir(t), servetest.Options{})
	sc.Settings.Timeout = 2 * time.Second
	hs, srv := servetest.Start(t, sc, func(srv *serve.Server) { Register(srv, Options{}) })
	ts := &testServer{Server: hs, srv: srv}
	slow := ts.exec(t, aliceKey, map[string]any{"lang": "py",
		"code": "import time\nopen('/mnt/data/early.txt', 'w').write('x')\nprint('started', flush=True)\ntime.sleep(60)"})
	if slow.Stdout != "started\n" || !strings.Contains(slow.Stderr, "stopped after 2s") || len(slow.Files) != 1 {
		t.Fatalf("a run past the limit: %+v", slow)
	}
	t.Logf("a run past the limit: stderr %q", slow.Stderr)
	many := ts.exec(t, aliceKey, map[string]any{"lang": "py", "code": "for i in range(120):\n    open(f'/mnt/data/f{i:03}.txt', 'w').write(str(i))"})
	if len(many.Files) == 0 || len(many.Files) >= 120 || !strings.Contains(many.Stderr, "120") {
		t.Fatalf("120 files: %d reported, stderr %q", len(many.Files), many.Stderr)
	}
	t.Logf("120 files: %d reported, stderr %q", len(many.Files), many.Stderr)
}

// A server without keys (--no-auth) takes any request, a LibreChat that
// sends signed tokens too.
func TestNoAuthTakesTokens(t *testing.T) {
	sc, _ := servetest.Config(t, terptest.TempDir(t), servetest.Options{})
	sc.Keys, sc.NoAuth = nil, true
	hs, srv := servetest.Start(t, sc, func(srv *serve.Server) { Register(srv, Options{}) })
	ts := &testServer{Server: hs, srv: srv}
	h := http.Header{"Authorization": {"Bearer eyJhbGciOiJFZERTQSJ9.eyJ9.c2ln"}, "Content-Type": {"application/json"}}
	var out execReply
	if status, body := ts.call(t, "POST", "/exec", h, strings.NewReader(`{"lang":"py","code":"print(6*7)"}`), &out); status != 200 || out.Stdout != "42\n" {
		t.Fatalf("a token to a server without keys: %d %s", status, body)
	}
}
