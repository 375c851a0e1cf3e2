package cli

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"image/png"
	"maps"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	terpmcp "github.com/terpdev/terp/internal/mcp"
	"github.com/terpdev/terp/internal/terptest"
)

// These tests are an MCP client, the Go SDK's, against the terp binary on
// the real local sandbox: what a desktop assistant or an editor would do.

func mcpClient() *mcp.Client {
	return mcp.NewClient(&mcp.Implementation{Name: "terp-test", Version: "1"}, nil)
}

func mcpCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// client is an MCP client session and, once a result gave one, the handle
// of its sandbox, which it passes in every later call: what a client of
// the sessionless protocol (2026-07-28) over HTTP must do to keep its
// sandbox. Over an HTTP session no result gives one; over stdio the first
// result gives the handle that finds the sandbox after a restart.
type client struct {
	*mcp.ClientSession
	handle string
}

// call calls tool with args (and the handle, once known) and returns its
// result, failing on a protocol error.
func call(t *testing.T, c *client, tool string, args map[string]any) *mcp.CallToolResult {
	t.Helper()
	if _, named := args["sandbox"]; c.handle != "" && !named {
		args = maps.Clone(args)
		if args == nil {
			args = map[string]any{}
		}
		args["sandbox"] = c.handle
	}
	res, err := c.CallTool(mcpCtx(t), &mcp.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		t.Fatalf("%s %v: %v", tool, args, err)
	}
	if h, ok := res.Meta[terpmcp.MetaSandbox].(string); ok && c.handle == "" {
		c.handle = h
	}
	return res
}

// textOf is the result's text content, joined.
func textOf(res *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

// runCode runs code with the python tool and returns its result, failing
// on a tool error.
func runCode(t *testing.T, cs *client, code string) *mcp.CallToolResult {
	t.Helper()
	res := call(t, cs, "python", map[string]any{"code": code})
	if res.IsError {
		t.Fatalf("python %q is a tool error: %s", code, textOf(res))
	}
	return res
}

// exerciseSandbox is what every transport must do for a client.
func exerciseSandbox(t *testing.T, cs *client) {
	tools, err := cs.ListTools(mcpCtx(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tool := range tools.Tools {
		names = append(names, tool.Name)
	}
	for _, want := range []string{"python", "run_python", "upload_file", "list_files", "download_file", "reset"} {
		if !slices.Contains(names, want) {
			t.Errorf("tools = %v, want %s among them", names, want)
		}
	}
	if ins := cs.InitializeResult().Instructions; !strings.Contains(ins, "/work") || !strings.Contains(ins, "no network") {
		t.Errorf("instructions = %q, want /work and the network described", ins)
	}

	// The kernel persists between calls, under either name.
	runCode(t, cs, "x = 41")
	res := call(t, cs, "run_python", map[string]any{"code": "print(x + 1)"})
	if got := textOf(res); !strings.Contains(got, "42") || !strings.Contains(got, "[exit status 0]") {
		t.Errorf("the second call read %q, want 42 and exit status 0", got)
	}

	// A run error is a normal result; an invalid call is a tool error.
	res = call(t, cs, "python", map[string]any{"code": "1/0"})
	if res.IsError || !strings.Contains(textOf(res), "ZeroDivisionError") {
		t.Errorf("an exception: IsError %v, %q; want a normal result naming it", res.IsError, textOf(res))
	}
	res = call(t, cs, "python", map[string]any{})
	if !res.IsError || !strings.Contains(textOf(res), "code") {
		t.Errorf("a call without code: IsError %v, %q; want a tool error", res.IsError, textOf(res))
	}

	// A chart comes back as an image; another file as a link.
	res = runCode(t, cs, "import matplotlib\nmatplotlib.use('Agg')\nimport matplotlib.pyplot as plt\n"+
		"plt.figure(figsize=(4, 3), dpi=100)\nplt.plot([1, 2, 3])\nplt.savefig('/work/chart.png')\n"+
		"open('/work/notes.txt', 'w').write('hello')")
	var img *mcp.ImageContent
	var link *mcp.ResourceLink
	for _, c := range res.Content {
		switch c := c.(type) {
		case *mcp.ImageContent:
			img = c
		case *mcp.ResourceLink:
			link = c
		}
	}
	if img == nil || img.MIMEType != "image/png" {
		t.Fatalf("the chart's result has no PNG image: %+v", res.Content)
	}
	cfg, err := png.DecodeConfig(bytes.NewReader(img.Data))
	if err != nil || cfg.Width != 400 || cfg.Height != 300 {
		t.Errorf("the image is %dx%d (%v), want the 400x300 chart", cfg.Width, cfg.Height, err)
	}
	wantURI := "terp://work/notes.txt"
	if cs.handle != "" {
		wantURI += "?sandbox=" + cs.handle
	}
	if link == nil || link.URI != wantURI {
		t.Fatalf("the text file's result has no link: %+v", res.Content)
	}
	read, err := cs.ReadResource(mcpCtx(t), &mcp.ReadResourceParams{URI: link.URI})
	if err != nil || len(read.Contents) != 1 || read.Contents[0].Text != "hello" {
		t.Errorf("resources/read %s = %+v, %v; want hello", link.URI, read, err)
	}

	// Upload, then download, the same bytes.
	blob := []byte{0, 1, 2, 0xff, 'x'}
	res = call(t, cs, "upload_file", map[string]any{"name": "in.bin", "base64": base64.StdEncoding.EncodeToString(blob)})
	if res.IsError {
		t.Fatalf("upload_file: %s", textOf(res))
	}
	res = call(t, cs, "upload_file", map[string]any{"name": "in.csv", "text": "a,b\n1,2\n"})
	if res.IsError {
		t.Fatalf("upload_file: %s", textOf(res))
	}
	res = call(t, cs, "download_file", map[string]any{"path": "/work/in.bin"})
	if er, ok := res.Content[0].(*mcp.EmbeddedResource); res.IsError || !ok || !bytes.Equal(er.Resource.Blob, blob) {
		t.Errorf("download_file in.bin = %+v, want the uploaded bytes", res.Content)
	}
	res = call(t, cs, "download_file", map[string]any{"path": "in.csv"})
	if er, ok := res.Content[0].(*mcp.EmbeddedResource); res.IsError || !ok || er.Resource.Text != "a,b\n1,2\n" {
		t.Errorf("download_file in.csv = %+v, want the uploaded text", res.Content)
	}
	if got := textOf(runCode(t, cs, "print(open('/work/in.csv').read().split()[1])")); !strings.Contains(got, "1,2") {
		t.Errorf("the code read the upload as %q", got)
	}
	res = call(t, cs, "download_file", map[string]any{"path": "missing.txt"})
	if !res.IsError {
		t.Errorf("download_file of a missing file: %+v, want a tool error", res.Content)
	}
	if got := textOf(call(t, cs, "list_files", nil)); !strings.Contains(got, "/work/in.csv\t8 bytes") || !strings.Contains(got, "/work/chart.png") {
		t.Errorf("list_files = %q", got)
	}

	// reset: variables gone, files kept.
	if res := call(t, cs, "reset", nil); res.IsError {
		t.Fatalf("reset: %s", textOf(res))
	}
	got := textOf(runCode(t, cs, "import os\nprint('x' in globals(), os.path.exists('/work/in.csv'))"))
	if !strings.Contains(got, "False True") {
		t.Errorf("after reset: %q, want no x and the files kept", got)
	}
}

// mcpStdio connects to terp mcp over stdio, as a client that starts it,
// with env and args after "mcp"; the test fails if terp said anything on
// stderr.
func mcpStdio(t *testing.T, env map[string]string, args ...string) *client {
	cmd := exec.Command(terptest.Binary(t), append([]string{"mcp"}, args...)...)
	for k, v := range homeEnv(t, env) {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	cmd.Env = append(cmd.Env, "PATH="+os.Getenv("PATH"))
	var stderr lockedBuffer
	cmd.Stderr = &stderr
	cs, err := mcpClient().Connect(mcpCtx(t), &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatalf("connect: %v\n%s", err, stderr.String())
	}
	t.Cleanup(func() {
		if err := cs.Close(); err != nil {
			t.Errorf("close: %v\n%s", err, stderr.String())
		}
		if s := stderr.String(); s != "" {
			t.Errorf("terp mcp said on stderr:\n%s", s)
		}
	})
	return &client{ClientSession: cs}
}

func TestMCPOverStdio(t *testing.T) {
	c := mcpStdio(t, nil)
	// The SDK's client asks for the newest protocol, sessionless; over
	// stdio the process is the session, and its sandbox's handle, which
	// the first result gives, is for a terp mcp started again (see
	// TestMCPStdioSandboxOutlivesARestart).
	if v := c.InitializeResult().ProtocolVersion; v != "2026-07-28" {
		t.Errorf("protocol version %s, want 2026-07-28", v)
	}
	exerciseSandbox(t, c)
	if c.handle == "" {
		t.Error("over stdio no result gave the sandbox's handle")
	}
}

// On the Docker backend, and on a remote one (terp sandbox serve, through
// the cpuos client), an MCP client gets the same.
func TestMCPDocker(t *testing.T) {
	exerciseSandbox(t, mcpStdio(t, map[string]string{"TERP_SANDBOX": "docker", "TERP_DOCKER_IMAGE": terptest.DockerImage(t)}))
}

func TestMCPCpuos(t *testing.T) {
	const token = "sandbox-token-0123456789"
	sandboxes := startProcess(t, homeEnv(t, map[string]string{"CPUOS_API_KEY": token}),
		`serving sandboxes on (http://\S+)`, "sandbox", "serve", "--listen", "127.0.0.1:0")
	exerciseSandbox(t, mcpStdio(t, map[string]string{"TERP_SANDBOX": "cpuos", "TERP_CPUOS_URL": sandboxes.base, "CPUOS_API_KEY": token}))
}

// authorized adds the bearer token to every request.
type authorized struct{ token string }

func (a authorized) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+a.token)
	return http.DefaultTransport.RoundTrip(r)
}

// Over Streamable HTTP, a client of the sessionless protocol does all it
// does over stdio by passing the handle the first result gave, and a
// client of the older protocol by its session; two handles, or two
// sessions, get two sandboxes; so does an SSE session.
func TestMCPOverHTTP(t *testing.T) {
	const token = "mcp-test-0123456789abcdef"
	p := startProcess(t, homeEnv(t, map[string]string{"TERP_MCP_TOKEN": token}), `serving MCP on (http://\S+/mcp)`, "mcp", "--http", "127.0.0.1:0")
	connect := func(tok, version string) (*client, error) {
		tr := &mcp.StreamableClientTransport{Endpoint: p.base, HTTPClient: &http.Client{Transport: authorized{tok}}}
		cs, err := mcpClient().Connect(mcpCtx(t), tr, &mcp.ClientSessionOptions{ProtocolVersion: version})
		if err != nil {
			return nil, err
		}
		if v := cs.InitializeResult().ProtocolVersion; version != "" && v != version {
			t.Errorf("asked for protocol %s, got %s", version, v)
		}
		t.Cleanup(func() { _ = cs.Close() })
		return &client{ClientSession: cs}, nil
	}
	if _, err := connect("wrong", ""); err == nil {
		t.Error("a client with the wrong token connected")
	}

	// Sessionless: the handle keeps the sandbox.
	one, err := connect(token, "")
	if err != nil {
		t.Fatalf("connect: %v\n%s", err, p.log)
	}
	if v := one.InitializeResult().ProtocolVersion; v != "2026-07-28" {
		t.Fatalf("the SDK's client negotiated %s, want the sessionless 2026-07-28", v)
	}
	if res := call(t, one, "list_files", nil); !res.IsError || !strings.Contains(textOf(res), `pass "sandbox"`) {
		t.Errorf("list_files naming no sandbox: IsError %v, %q; want a tool error asking for the handle", res.IsError, textOf(res))
	}
	res := runCode(t, one, "print(1)")
	if one.handle == "" || !strings.Contains(textOf(res), `pass "sandbox": "`+one.handle+`"`) {
		t.Fatalf("the first call's result gave no handle: %q, _meta %v", textOf(res), res.Meta)
	}
	exerciseSandbox(t, one)
	other, err := connect(token, "")
	if err != nil {
		t.Fatal(err)
	}
	runCode(t, one, "secret = 'one'")
	got := textOf(runCode(t, other, "import os\nprint('secret' in globals(), os.path.exists('/work/in.csv'))"))
	if !strings.Contains(got, "False False") || other.handle == "" || other.handle == one.handle {
		t.Errorf("a second client (handle %q) saw %q of the first's sandbox (%q), want neither its variable nor its files",
			other.handle, got, one.handle)
	}
	// The first's handle works from any connection; a made-up one does not.
	third, err := connect(token, "")
	if err != nil {
		t.Fatal(err)
	}
	third.handle = one.handle
	if got := textOf(runCode(t, third, "print(secret)")); !strings.Contains(got, "one\n") {
		t.Errorf("another connection with the first's handle read %q, want its variable", got)
	}
	res = call(t, third, "python", map[string]any{"code": "print(1)", "sandbox": "sbx_nosuchsandbox"})
	if !res.IsError || !strings.Contains(textOf(res), "no sandbox sbx_nosuchsandbox") {
		t.Errorf("an unknown handle: IsError %v, %q; want a tool error", res.IsError, textOf(res))
	}

	// With sessions (2025-11-25): the session keeps the sandbox.
	legacy, err := connect(token, "2025-11-25")
	if err != nil {
		t.Fatalf("connect: %v\n%s", err, p.log)
	}
	exerciseSandbox(t, legacy)
	if legacy.handle != "" {
		t.Errorf("a client with a session was given the handle %s", legacy.handle)
	}
	legacy2, err := connect(token, "2025-11-25")
	if err != nil {
		t.Fatal(err)
	}
	runCode(t, legacy, "secret = 'legacy'")
	if got := textOf(runCode(t, legacy2, "import os\nprint('secret' in globals(), os.path.exists('/work/in.csv'))")); !strings.Contains(got, "False False") {
		t.Errorf("the second session saw %q of the first's sandbox, want neither its variable nor its files", got)
	}
	if got := textOf(runCode(t, legacy, "print(secret)")); !strings.Contains(got, "legacy") {
		t.Errorf("the first session lost its variable: %q", got)
	}

	// The legacy SSE transport, as vLLM's tool server client speaks it,
	// is a session, and a sandbox, of its own too.
	sse, err := mcpClient().Connect(mcpCtx(t), &mcp.SSEClientTransport{
		Endpoint: strings.TrimSuffix(p.base, "/mcp") + "/sse", HTTPClient: &http.Client{Transport: authorized{token}}}, nil)
	if err != nil {
		t.Fatalf("connect to /sse: %v\n%s", err, p.log)
	}
	defer func() { _ = sse.Close() }()
	sc := &client{ClientSession: sse}
	runCode(t, sc, "y = 6 * 7")
	if got := textOf(runCode(t, sc, "print(y, 'secret' in globals())")); !strings.Contains(got, "42 False") {
		t.Errorf("over SSE: %q, want the variable kept and the other sessions' unseen", got)
	}
}

// A sandbox that a handle names is closed once unused for --expire-after;
// its handle is then refused, saying why.
func TestMCPHandleExpires(t *testing.T) {
	p := startProcess(t, homeEnv(t, nil), `serving MCP on (http://\S+/mcp)`, "mcp", "--http", "127.0.0.1:0", "--expire-after", "1s")
	cs, err := mcpClient().Connect(mcpCtx(t), &mcp.StreamableClientTransport{Endpoint: p.base}, nil)
	if err != nil {
		t.Fatalf("connect: %v\n%s", err, p.log)
	}
	defer func() { _ = cs.Close() }()
	c := &client{ClientSession: cs}
	runCode(t, c, "x = 1")
	if c.handle == "" {
		t.Fatal("no handle")
	}
	waitFor(t, func() bool { return strings.Contains(p.log.String(), "expired a sandbox") }, "the sandbox to expire")
	res := call(t, c, "python", map[string]any{"code": "print(x)"})
	if !res.IsError || !strings.Contains(textOf(res), "expired after 1s") {
		t.Errorf("the expired handle: IsError %v, %q; want a tool error saying it expired", res.IsError, textOf(res))
	}
}

// vllmClient adds what vLLM's tool server client sends with every
// request: the bearer token and the x-session-id naming its sandbox.
type vllmClient struct{ token, session string }

func (v vllmClient) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+v.token)
	r.Header.Set("x-session-id", v.session)
	return http.DefaultTransport.RoundTrip(r)
}

// A client shaped like vLLM's tool server client (connect /sse,
// initialise, list tools, call python with x-session-id) finds its
// variables again when it reconnects with the same session id, and a
// client with another id gets a sandbox of its own; so does a Streamable
// HTTP client with the header.
func TestMCPSessionIDHeader(t *testing.T) {
	const token = "mcp-test-0123456789abcdef"
	// As vLLM is told to run it: --name python, which vLLM takes as the
	// namespace of gpt-oss's built-in python tool.
	p := startProcess(t, homeEnv(t, map[string]string{"TERP_MCP_TOKEN": token}), `serving MCP on (http://\S+/mcp)`, "mcp", "--http", "127.0.0.1:0", "--name", "python")
	sse := func(id string) *client {
		t.Helper()
		cs, err := mcpClient().Connect(mcpCtx(t), &mcp.SSEClientTransport{
			Endpoint: strings.TrimSuffix(p.base, "/mcp") + "/sse", HTTPClient: &http.Client{Transport: vllmClient{token, id}}}, nil)
		if err != nil {
			t.Fatalf("connect to /sse as %s: %v\n%s", id, err, p.log)
		}
		t.Cleanup(func() { _ = cs.Close() })
		return &client{ClientSession: cs}
	}
	first := sse("A")
	if name := first.InitializeResult().ServerInfo.Name; name != "python" {
		t.Errorf("serverInfo.name = %q, want python: vLLM registers the tools under it", name)
	}
	tools, err := first.ListTools(mcpCtx(t), nil)
	if err != nil || !slices.ContainsFunc(tools.Tools, func(tl *mcp.Tool) bool { return tl.Name == "python" }) {
		t.Fatalf("list tools: %v, %v", tools, err)
	}
	if res := call(t, first, "python", map[string]any{"code": "x = 41"}); res.IsError {
		t.Fatalf("x = 41: %s", textOf(res))
	}
	if err := first.Close(); err != nil {
		t.Error(err)
	}
	if got := textOf(call(t, sse("A"), "python", map[string]any{"code": "print(x + 1)"})); !strings.Contains(got, "42\n") {
		t.Errorf("a reconnect with session id A got %q, want x kept (42)", got)
	}
	if got := textOf(call(t, sse("B"), "python", map[string]any{"code": "print('x' in globals())"})); !strings.Contains(got, "False") {
		t.Errorf("session id B got %q, want A's x unseen", got)
	}
	// Over Streamable HTTP, sessionless or not, the header names the same
	// sandbox, and no handle is minted.
	cs, err := mcpClient().Connect(mcpCtx(t), &mcp.StreamableClientTransport{
		Endpoint: p.base, HTTPClient: &http.Client{Transport: vllmClient{token, "A"}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cs.Close() }()
	if got := textOf(call(t, &client{ClientSession: cs}, "python", map[string]any{"code": "print(x * 10)"})); !strings.Contains(got, "410\n") {
		t.Errorf("Streamable HTTP with session id A got %q, want A's x (410)", got)
	}
}

// Off loopback, terp mcp --http refuses to start without a token.
func TestMCPNeedsATokenOffLoopback(t *testing.T) {
	r := terp(t, nil, "", "mcp", "--http", "0.0.0.0:8765")
	if r.code != exitUsage || !strings.Contains(r.stderr, "TERP_MCP_TOKEN") {
		t.Errorf("exit %d, stderr:\n%s\nwant exit 2 naming TERP_MCP_TOKEN", r.code, r.stderr)
	}
}

// An upload travels in the HTTP request as base64: one within
// --max-request-size lands whole (past the SDK's own default of 4 MiB), a
// larger request is refused with 413 (the SDK's client then closes), and
// the sandbox keeps what it had.
func TestMCPUploadSize(t *testing.T) {
	p := startProcess(t, homeEnv(t, nil), `serving MCP on (http://\S+/mcp)`, "mcp", "--http", "127.0.0.1:0", "--max-request-size", "8MiB")
	connect := func() *client {
		cs, err := mcpClient().Connect(mcpCtx(t), &mcp.StreamableClientTransport{Endpoint: p.base}, nil)
		if err != nil {
			t.Fatalf("connect: %v\n%s", err, p.log)
		}
		t.Cleanup(func() { _ = cs.Close() })
		return &client{ClientSession: cs}
	}
	c := connect()
	blob := bytes.Repeat([]byte{0, 1, 2, 3, 0xfe, 0xff}, 5<<20/6) // 5 MiB: 6.7 MiB as base64
	if res := call(t, c, "upload_file", map[string]any{"name": "big.bin", "base64": base64.StdEncoding.EncodeToString(blob)}); res.IsError {
		t.Fatalf("upload of 5 MiB: %s", textOf(res))
	}
	got := textOf(runCode(t, c, "import hashlib\nprint(len(open('/work/big.bin','rb').read()), hashlib.sha256(open('/work/big.bin','rb').read()).hexdigest())"))
	if want := fmt.Sprintf("%d %x", len(blob), sha256.Sum256(blob)); !strings.Contains(got, want) {
		t.Errorf("the sandbox read %q, want %q", got, want)
	}
	_, err := c.CallTool(mcpCtx(t), &mcp.CallToolParams{Name: "upload_file",
		Arguments: map[string]any{"name": "bigger.bin", "base64": base64.StdEncoding.EncodeToString(append(blob, blob...))}})
	if err == nil || !strings.Contains(err.Error(), "Request Entity Too Large") {
		t.Errorf("an upload of 10 MiB (13 MiB as base64) over an 8 MiB limit: %v, want a 413", err)
	}
	again := connect()
	again.handle = c.handle
	if got := textOf(call(t, again, "list_files", nil)); !strings.Contains(got, "/work/big.bin") || strings.Contains(got, "bigger") {
		t.Errorf("after the refused upload, list_files = %q, want big.bin alone", got)
	}
}
