package jupyter

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/terpdev/terp/internal/serve"
	"github.com/terpdev/terp/internal/serve/servetest"
	"github.com/terpdev/terp/internal/terptest"
)

const (
	aliceKey = servetest.AliceKey
	bobKey   = servetest.BobKey
)

// testServer is terp serve with the Jupyter API, on the real local
// sandbox, over real HTTP.
type testServer struct {
	*httptest.Server
	srv *serve.Server
	api *api
}

func newTestServer(t testing.TB, change ...func(*serve.Config)) *testServer {
	t.Helper()
	return newTestServerIn(t, terptest.TempDir(t), change...)
}

// newTestServerIn is newTestServer keeping its state, conversations and
// sandboxes in dir, where a server started before it kept its own.
func newTestServerIn(t testing.TB, dir string, change ...func(*serve.Config)) *testServer {
	t.Helper()
	sc, _ := servetest.Config(t, dir, servetest.Options{})
	sc.Settings.Timeout = time.Minute
	for _, ch := range change {
		ch(&sc)
	}
	var a *api
	hs, srv := servetest.Start(t, sc, func(srv *serve.Server) {
		a = newAPI(srv, "terp test")
		srv.Register(a.protocol())
	})
	return &testServer{Server: hs, srv: srv, api: a}
}

func ctx(t testing.TB) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return c
}

// call sends a request with key as Open WebUI does (?token=), and decodes
// the JSON answer into out unless it is nil.
func (ts *testServer) call(t testing.TB, method, path, key string, body string, out any) int {
	t.Helper()
	sep := "?"
	if strings.Contains(path, "?") {
		sep = "&"
	}
	req, err := http.NewRequestWithContext(ctx(t), method, ts.URL+path+sep+"token="+key, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if out != nil && resp.StatusCode < 300 {
		if err := json.Unmarshal(b, out); err != nil {
			t.Fatalf("%s %s: %v in %s", method, path, err, b)
		}
	}
	return resp.StatusCode
}

// startKernel starts a kernel of key's.
func (ts *testServer) startKernel(t *testing.T, key string) kernelModel {
	t.Helper()
	var k kernelModel
	if status := ts.call(t, "POST", "/api/kernels", key, "", &k); status != http.StatusCreated || !isUUID(k.ID) {
		t.Fatalf("POST /api/kernels: %d %+v", status, k)
	}
	return k
}

// client is one websocket connection to a kernel's channels.
type client struct {
	t       testing.TB
	ws      *websocket.Conn
	v1      bool
	session string
}

// connect opens a websocket to a kernel's channels; status is the
// handshake's HTTP status.
func (ts *testServer) connect(t testing.TB, kernelID, key string, protocols ...string) (c *client, status int, err error) {
	t.Helper()
	url := "ws" + strings.TrimPrefix(ts.URL, "http") + "/api/kernels/" + kernelID + "/channels?token=" + key
	ws, resp, err := websocket.Dial(ctx(t), url, &websocket.DialOptions{Subprotocols: protocols})
	if resp != nil {
		status = resp.StatusCode
		if resp.Body != nil {
			_ = resp.Body.Close()
		}
	}
	if err != nil {
		return nil, status, err
	}
	ws.SetReadLimit(64 << 20)
	t.Cleanup(func() { _ = ws.CloseNow() })
	return &client{t: t, ws: ws, v1: ws.Subprotocol() == subprotocolV1, session: newUUID()}, status, nil
}

// request sends a request on channel and returns its msg_id.
func (c *client) request(channel, msgType string, content any) string {
	c.t.Helper()
	b, _ := json.Marshal(content)
	m := message{Channel: channel, Content: b, ParentHeader: json.RawMessage("{}"), Metadata: json.RawMessage("{}"),
		Header: header{MsgID: newUUID(), MsgType: msgType, Username: "test", Session: c.session, Date: now(), Version: "5.3"}}
	var frame []byte
	var err error
	typ := websocket.MessageText
	if c.v1 {
		frame, err = encodeV1(m)
		typ = websocket.MessageBinary
	} else {
		frame, err = encodeLegacy(m)
	}
	if err == nil {
		err = c.ws.Write(ctx(c.t), typ, frame)
	}
	if err != nil {
		c.t.Fatal(err)
	}
	return m.Header.MsgID
}

// reply is a message the kernel sent, decoded.
type reply struct {
	Channel string
	Type    string
	Parent  string
	Content map[string]any
}

// next is the kernel's next message parented to id, skipping others;
// so is what was read before it, for the failure's message.
func (c *client) next(id string, so []reply) reply {
	c.t.Helper()
	for {
		typ, b, err := c.ws.Read(ctx(c.t))
		if err != nil {
			c.t.Fatalf("reading the replies to %s: %v (so far %+v)", id, err, so)
		}
		var m message
		if typ == websocket.MessageBinary {
			m, err = decodeV1(b)
		} else {
			m, err = decodeLegacy(b)
		}
		if err != nil {
			c.t.Fatal(err)
		}
		var parent header
		_ = json.Unmarshal(m.ParentHeader, &parent)
		if parent.MsgID != id {
			continue
		}
		r := reply{Channel: m.Channel, Type: m.Header.MsgType, Parent: parent.MsgID}
		_ = json.Unmarshal(m.Content, &r.Content)
		return r
	}
}

// until reads the kernel's messages parented to id up to and including
// the status idle that ends them (and the shell reply, which may come
// after it).
func (c *client) until(id string) []reply {
	c.t.Helper()
	var out []reply
	idle, replied := false, false
	for !idle || !replied {
		r := c.next(id, out)
		out = append(out, r)
		idle = idle || (r.Type == "status" && r.Content["execution_state"] == "idle")
		replied = replied || r.Channel == "shell" || r.Channel == "control"
	}
	return out
}

// untilStream reads the kernel's messages parented to id until a stream
// carried text, and returns them: the cell runs on meanwhile.
func (c *client) untilStream(id, text string) []reply {
	c.t.Helper()
	var out []reply
	for {
		r := c.next(id, out)
		out = append(out, r)
		if r.Type == "stream" && r.Content["text"] == text {
			return out
		}
		if r.Type == "status" && r.Content["execution_state"] == "idle" {
			c.t.Fatalf("the cell ended before it printed %q: %+v", text, out)
		}
	}
}

func (c *client) execute(code string) []reply {
	c.t.Helper()
	return c.until(c.request("shell", "execute_request", map[string]any{"code": code, "silent": false, "store_history": true,
		"user_expressions": map[string]any{}, "allow_stdin": false, "stop_on_error": true}))
}

// of are the replies of type typ.
func of(rs []reply, typ string) []reply {
	var out []reply
	for _, r := range rs {
		if r.Type == typ {
			out = append(out, r)
		}
	}
	return out
}

// streamed is what the stream messages carried, by stream name.
func streamed(rs []reply) map[string]string {
	out := map[string]string{}
	for _, r := range of(rs, "stream") {
		out[r.Content["name"].(string)] += r.Content["text"].(string)
	}
	return out
}

// A client that speaks Jupyter's protocol runs code in terp's sandbox and
// gets what a Jupyter kernel sends: busy and idle around each request, the
// code's output as streams, a figure as an image, the last value apart,
// an error with its name and traceback; state lasts between cells, an
// interrupt keeps it, a restart clears it.
func TestKernelSpeaksJupyter(t *testing.T) {
	for _, format := range []string{"legacy", "v1"} {
		t.Run(format, func(t *testing.T) {
			// The cell interrupted below takes 3 s to clean up: longer than
			// the default grace, which the server's setting must replace; and
			// a grace a loaded machine cannot miss.
			ts := newTestServer(t, func(c *serve.Config) { c.Settings.InterruptGrace = 30 * time.Second })
			k := ts.startKernel(t, aliceKey)
			var protocols []string
			if format == "v1" {
				protocols = []string{subprotocolV1}
			}
			c, _, err := ts.connect(t, k.ID, aliceKey, protocols...)
			if err != nil {
				t.Fatal(err)
			}
			if c.v1 != (format == "v1") {
				t.Fatalf("the server chose subprotocol %q", c.ws.Subprotocol())
			}

			info := c.until(c.request("shell", "kernel_info_request", map[string]any{}))
			if r := of(info, "kernel_info_reply"); len(r) != 1 || r[0].Content["language_info"].(map[string]any)["name"] != "python" {
				t.Fatalf("kernel_info: %+v", info)
			}

			rs := c.execute("import sys\nx = 41\nprint('out', flush=True)\nprint('err', file=sys.stderr)\nx + 1")
			if rs[0].Type != "status" || rs[0].Content["execution_state"] != "busy" {
				t.Errorf("the first message is %+v; want status busy", rs[0])
			}
			if s := streamed(rs); s["stdout"] != "out\n" || s["stderr"] != "err\n" {
				t.Errorf("streams %q; want out and err apart, and the value not among them", s)
			}
			if r := of(rs, "execute_result"); len(r) != 1 || r[0].Content["data"].(map[string]any)["text/plain"] != "42" {
				t.Errorf("execute_result: %+v", r)
			}
			reply := of(rs, "execute_reply")
			if len(reply) != 1 || reply[0].Content["status"] != "ok" || reply[0].Content["execution_count"] != float64(1) {
				t.Errorf("execute_reply: %+v", reply)
			}
			if r := of(rs, "execute_input"); len(r) != 1 || r[0].Content["execution_count"] != float64(1) {
				t.Errorf("execute_input: %+v", r)
			}

			rs = c.execute("import matplotlib.pyplot as plt\nplt.plot([1, 2, 3])\nplt.show()")
			if d := of(rs, "display_data"); len(d) != 1 || !strings.HasPrefix(d[0].Content["data"].(map[string]any)["image/png"].(string), "iVBORw0KGgo") {
				t.Errorf("a figure: %+v; want one display_data with a PNG", d)
			}

			rs = c.execute("1 / 0")
			if e := of(rs, "error"); len(e) != 1 || e[0].Content["ename"] != "ZeroDivisionError" || e[0].Content["evalue"] != "division by zero" ||
				len(e[0].Content["traceback"].([]any)) == 0 {
				t.Errorf("an error: %+v", e)
			}
			if r := of(rs, "execute_reply"); len(r) != 1 || r[0].Content["status"] != "error" {
				t.Errorf("the reply to an error: %+v", r)
			}

			// What a cell prints reaches the client while it runs; an
			// interrupt on the control channel then stops it, and the state
			// is kept, also when the code takes a while to clean up.
			id := c.request("shell", "execute_request", map[string]any{"code": "import time\nprint('sleeping', flush=True)\n" +
				"try:\n    time.sleep(60)\nexcept KeyboardInterrupt:\n    time.sleep(3)\n    raise"})
			early := c.untilStream(id, "sleeping\n")
			c.request("control", "interrupt_request", map[string]any{})
			if e := of(append(early, c.until(id)...), "error"); len(e) != 1 || e[0].Content["ename"] != "KeyboardInterrupt" {
				t.Errorf("an interrupted cell: %+v; want KeyboardInterrupt", e)
			}
			if s := streamed(c.execute("print(x)")); s["stdout"] != "41\n" {
				t.Errorf("after the interrupt, x printed %q; want the state kept", s)
			}

			// A restart through the API gives a fresh Python.
			if status := ts.call(t, "POST", "/api/kernels/"+k.ID+"/restart", aliceKey, "", nil); status != http.StatusOK {
				t.Fatalf("restart: %d", status)
			}
			if e := of(c.execute("x"), "error"); len(e) != 1 || e[0].Content["ename"] != "NameError" {
				t.Errorf("after a restart, x: %+v; want NameError", e)
			}
		})
	}
}

// A key sees only its own kernels: another's is not found, in the API and
// on the websocket, and is not listed.
func TestKernelsAreTheirKeys(t *testing.T) {
	ts := newTestServer(t)
	k := ts.startKernel(t, aliceKey)
	if status := ts.call(t, "GET", "/api/kernels/"+k.ID, bobKey, "", nil); status != http.StatusNotFound {
		t.Errorf("bob's GET of alice's kernel: %d", status)
	}
	if _, status, err := ts.connect(t, k.ID, bobKey); err == nil || status != http.StatusNotFound {
		t.Errorf("bob's websocket to alice's kernel: %v (%d)", err, status)
	}
	var list []kernelModel
	if ts.call(t, "GET", "/api/kernels", bobKey, "", &list); len(list) != 0 {
		t.Errorf("bob lists %+v", list)
	}
	if ts.call(t, "GET", "/api/kernels", aliceKey, "", &list); len(list) != 1 || list[0].ID != k.ID {
		t.Errorf("alice lists %+v", list)
	}
	if status := ts.call(t, "GET", "/api/kernels", "wrong-key", "", nil); status != http.StatusUnauthorized {
		t.Errorf("a wrong token: %d", status)
	}
	// The other ways Jupyter's clients send the token.
	for _, h := range []string{"token " + aliceKey, "Bearer " + aliceKey} {
		req, _ := http.NewRequestWithContext(ctx(t), "GET", ts.URL+"/api/kernels/"+k.ID, nil)
		req.Header.Set("Authorization", h)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("Authorization: %s...: %d", h[:6], resp.StatusCode)
		}
	}
	if status := ts.call(t, "DELETE", "/api/kernels/"+k.ID, aliceKey, "", nil); status != http.StatusNoContent {
		t.Errorf("DELETE: %d", status)
	}
	if status := ts.call(t, "GET", "/api/kernels/"+k.ID, aliceKey, "", nil); status != http.StatusNotFound {
		t.Errorf("a deleted kernel: %d", status)
	}
}

// A session, as JupyterLab and VS Code make one, starts a kernel; deleting
// it shuts the kernel down. The contents show each kernel's files.
func TestSessionsAndContents(t *testing.T) {
	ts := newTestServer(t)
	var s sessionModel
	if status := ts.call(t, "POST", "/api/sessions", aliceKey, `{"path": "a.ipynb", "type": "notebook", "kernel": {"name": "python3"}}`, &s); status != http.StatusCreated || !isUUID(s.Kernel.ID) {
		t.Fatalf("POST /api/sessions: %d %+v", status, s)
	}
	body := `{"type": "file", "format": "text", "content": "a,b\n1,2\n"}`
	if status := ts.call(t, "PUT", "/api/contents/"+s.Kernel.ID+"/data.csv", aliceKey, body, nil); status != http.StatusCreated {
		t.Fatalf("PUT a file: %d", status)
	}
	c, _, err := ts.connect(t, s.Kernel.ID, aliceKey)
	if err != nil {
		t.Fatal(err)
	}
	if out := streamed(c.execute("import pandas as pd\nprint(pd.read_csv('/mnt/data/data.csv').b.sum())")); out["stdout"] != "2\n" {
		t.Errorf("the uploaded file read in the kernel: %q", out)
	}
	var dir contentModel
	ts.call(t, "GET", "/api/contents/"+s.Kernel.ID, aliceKey, "", &dir)
	if fmt.Sprint(dir.Content) == "" || !strings.Contains(fmt.Sprint(dir.Content), "data.csv") {
		t.Errorf("the kernel's directory: %+v", dir)
	}
	if status := ts.call(t, "GET", "/api/contents/"+s.Kernel.ID, bobKey, "", nil); status != http.StatusNotFound {
		t.Errorf("bob reads alice's kernel's files: %d", status)
	}
	if status := ts.call(t, "DELETE", "/api/sessions/"+s.ID, aliceKey, "", nil); status != http.StatusNoContent {
		t.Errorf("DELETE the session: %d", status)
	}
	if status := ts.call(t, "GET", "/api/kernels/"+s.Kernel.ID, aliceKey, "", nil); status != http.StatusNotFound {
		t.Errorf("the session's kernel after its end: %d", status)
	}
}

// terp enforces its per-run limit itself (Open WebUI's own timer measures
// only silence): a cell past it is interrupted with an error that says so,
// and the kernel keeps its state.
func TestExecutionTimeLimit(t *testing.T) {
	ts := newTestServer(t, func(c *serve.Config) { c.Settings.Timeout = 2 * time.Second })
	k := ts.startKernel(t, aliceKey)
	c, _, err := ts.connect(t, k.ID, aliceKey)
	if err != nil {
		t.Fatal(err)
	}
	c.execute("kept = 'yes'")
	rs := c.execute("import time\nwhile True:\n    time.sleep(0.1)")
	e := of(rs, "error")
	if len(e) != 1 || e[0].Content["ename"] != "TimeoutError" || !strings.Contains(e[0].Content["evalue"].(string), "limit") {
		t.Fatalf("a cell past the limit: %+v; want a TimeoutError that says so", e)
	}
	if s := streamed(c.execute("print(kept)")); s["stdout"] != "yes\n" {
		t.Errorf("after the limit, kept printed %q; want the state kept", s)
	}
}

// Password mode, as Open WebUI logs in to a Jupyter Server: the _xsrf
// cookie from GET /login, the form posted with it and a key as the
// password, then cookies; a change needs X-XSRFToken too, and a wrong
// password gets no cookie.
func TestPasswordLogin(t *testing.T) {
	ts := newTestServer(t)
	jar, _ := cookiejar.New(nil)
	hc := &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	do := func(method, path string, form url.Values, header http.Header) int {
		t.Helper()
		var body io.Reader
		if form != nil {
			body = strings.NewReader(form.Encode())
		}
		req, _ := http.NewRequestWithContext(ctx(t), method, ts.URL+path, body)
		if form != nil {
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		}
		for k, v := range header {
			req.Header[k] = v
		}
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if status := do("GET", "/login", nil, nil); status != http.StatusOK {
		t.Fatalf("GET /login: %d", status)
	}
	u, _ := url.Parse(ts.URL)
	xsrf := ""
	for _, c := range jar.Cookies(u) {
		if c.Name == xsrfCookie {
			xsrf = c.Value
		}
	}
	if xsrf == "" {
		t.Fatal("GET /login set no _xsrf cookie")
	}
	if status := do("POST", "/login", url.Values{"_xsrf": {xsrf}, "password": {"not-a-key"}}, nil); status != http.StatusUnauthorized {
		t.Errorf("a wrong password: %d", status)
	}
	if status := do("GET", "/api/kernels", nil, nil); status != http.StatusUnauthorized {
		t.Errorf("after a wrong password, the API: %d", status)
	}
	if status := do("POST", "/login", url.Values{"_xsrf": {"forged"}, "password": {aliceKey}}, nil); status != http.StatusForbidden {
		t.Errorf("a form whose _xsrf is not its cookie's: %d", status)
	}
	if status := do("POST", "/login", url.Values{"_xsrf": {xsrf}, "password": {aliceKey}}, nil); status != http.StatusFound {
		t.Fatalf("the right password: %d; want a redirect", status)
	}
	if status := do("GET", "/api/kernels", nil, nil); status != http.StatusOK {
		t.Errorf("logged in, GET /api/kernels: %d", status)
	}
	if status := do("POST", "/api/kernels", nil, nil); status != http.StatusUnauthorized {
		t.Errorf("logged in, a POST without X-XSRFToken: %d; want refused", status)
	}
	if status := do("POST", "/api/kernels", nil, http.Header{"X-Xsrftoken": {xsrf}}); status != http.StatusCreated {
		t.Errorf("logged in, a POST with X-XSRFToken: %d", status)
	}
}

// A kernel's sandbox has the egress the server's settings give: its
// clients cannot ask for one, as OpenAI's can.
func TestKernelNetworkIsTheServers(t *testing.T) {
	ts := newTestServer(t, func(c *serve.Config) {
		c.Settings.Network, c.Settings.NetworkAllow = "allowlist", []string{"pypi.org"}
	})
	k := ts.startKernel(t, aliceKey)
	rec, err := ts.srv.ContainerRecord(ctx(t), "alice", k.ID)
	if err != nil || rec.Network.Type != "allowlist" || len(rec.Network.AllowedDomains) != 1 || rec.Network.AllowedDomains[0] != "pypi.org" {
		t.Errorf("the kernel's network: %+v (%v); want the server's allowlist", rec.Network, err)
	}
}

// A kernel's hub (its connections and the loop that runs its requests)
// ends with its last connection, and the next connection gets a new one
// that runs code in the same kernel, its state kept.
func TestReconnectKeepsTheKernel(t *testing.T) {
	ts := newTestServer(t)
	k := ts.startKernel(t, aliceKey)
	for i, code := range []string{"x = 7", "print(x * 6)"} {
		c, _, err := ts.connect(t, k.ID, aliceKey)
		if err != nil {
			t.Fatal(err)
		}
		rs := c.execute(code)
		if i == 1 && streamed(rs)["stdout"] != "42\n" {
			t.Errorf("after a reconnect: %+v; want 42 from the variable the first connection set", rs)
		}
		_ = c.ws.Close(websocket.StatusNormalClosure, "")
		for deadline := time.Now().Add(10 * time.Second); ts.api.live(k.ID) != nil; time.Sleep(10 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatal("the hub outlived its last connection")
			}
		}
	}
}

// A kernel outlives terp serve's restart, as its container does: the
// restarted server lists it, and code run in it finds its files (Python
// itself started anew).
func TestKernelOutlivesARestart(t *testing.T) {
	dir := terptest.TempDir(t)
	first := newTestServerIn(t, dir)
	k := first.startKernel(t, aliceKey)
	c, _, err := first.connect(t, k.ID, aliceKey)
	if err != nil {
		t.Fatal(err)
	}
	c.execute("open('/mnt/data/kept.txt', 'w').write('still here')")
	_ = c.ws.Close(websocket.StatusNormalClosure, "")
	first.Close()
	first.srv.Close(ctx(t))

	second := newTestServerIn(t, dir)
	var list []kernelModel
	if second.call(t, "GET", "/api/kernels", aliceKey, "", &list); len(list) != 1 || list[0].ID != k.ID {
		t.Fatalf("after the restart the kernels are %+v; want %s", list, k.ID)
	}
	c, _, err = second.connect(t, k.ID, aliceKey)
	if err != nil {
		t.Fatal(err)
	}
	if s := streamed(c.execute("print(open('/mnt/data/kept.txt').read())")); s["stdout"] != "still here\n" {
		t.Errorf("after the restart the kernel's file reads %q", s)
	}
}
