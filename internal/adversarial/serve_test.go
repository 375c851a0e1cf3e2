package adversarial

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
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

// These cases attack `terp serve` from the outside: the real binary, on the
// real local sandbox, under a home of the test's own, in front of a
// scripted model, with two keys (alice and bob) in a keys file. They speak
// HTTP only, with the official Go SDK where a client would and raw requests
// where an attacker would not, so they hold whatever the server keeps
// inside.

// gateway is a running `terp serve`.
type gateway struct {
	base       string // http://127.0.0.1:PORT/v1
	home       string
	data       string // $XDG_DATA_HOME/terp: everything the server may write
	keysFile   string
	alice, bob string // the keys
	model      *llmtest.Server
	args       []string // the flags besides --listen and --keys-file

	cmd  *exec.Cmd
	done chan struct{}
	log  *serveLog
}

// serveLog is the server's stderr, written by one goroutine while a test
// reads it.
type serveLog struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *serveLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *serveLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// startServe starts terp serve on a new home in front of model, with args
// besides its keys; it is stopped when the test ends.
func startServe(t *testing.T, model *llmtest.Server, args ...string) *gateway {
	t.Helper()
	home := terptest.TempDir(t)
	g := &gateway{home: home, data: filepath.Join(home, "data", "terp"), model: model, args: args,
		keysFile: filepath.Join(t.TempDir(), "keys"),
		alice:    "sk-alice-" + randomHex() + randomHex(), bob: "sk-bob-" + randomHex() + randomHex()}
	keys := "# the test's keys\nalice " + g.alice + "\nbob " + g.bob + "\n"
	if err := os.WriteFile(g.keysFile, []byte(keys), 0o600); err != nil {
		t.Fatal(err)
	}
	g.start(t)
	t.Cleanup(func() { g.stop(t) })
	return g
}

// start runs the binary on g's home and waits until it says where it
// serves.
func (g *gateway) start(t *testing.T) {
	t.Helper()
	g.cmd = exec.Command(terptest.Binary(t), append([]string{"serve", "--listen", "127.0.0.1:0", "--keys-file", g.keysFile}, g.args...)...)
	g.cmd.Env = []string{
		"PATH=" + os.Getenv("PATH"),
		"HOME=" + g.home,
		"XDG_DATA_HOME=" + filepath.Join(g.home, "data"),
		"XDG_CONFIG_HOME=" + filepath.Join(g.home, "config"),
		"TERP_BASE_URL=" + g.model.BaseURL(),
		"TERP_MODEL=test-model",
		"TERP_SANDBOX=local",
		// The upstream key is the host's secret: no answer may hold it.
		"TERP_API_KEY=" + host.apiKey,
	}
	stderr, err := g.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := g.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	g.log, g.done = &serveLog{}, make(chan struct{})
	found := make(chan string, 1)
	go func() {
		defer close(g.done)
		addr := regexp.MustCompile(`serving the OpenAI API on (http://\S+/v1)`)
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			fmt.Fprintln(g.log, sc.Text())
			if m := addr.FindStringSubmatch(sc.Text()); m != nil {
				found <- m[1]
			}
		}
		_, _ = io.Copy(g.log, stderr)
		_ = g.cmd.Wait()
	}()
	select {
	case g.base = <-found:
	case <-g.done:
		t.Fatalf("terp serve exited before serving:\n%s", g.log)
	case <-time.After(time.Minute):
		_ = g.cmd.Process.Kill()
		t.Fatalf("terp serve did not say where it serves in a minute:\n%s", g.log)
	}
}

// stop interrupts the server, as Ctrl+C does, and fails the test unless it
// exits cleanly.
func (g *gateway) stop(t *testing.T) {
	t.Helper()
	if g.cmd == nil {
		return
	}
	_ = g.cmd.Process.Signal(syscall.SIGINT)
	select {
	case <-g.done:
	case <-time.After(time.Minute):
		_ = g.cmd.Process.Kill()
		<-g.done
		t.Errorf("terp serve did not stop in a minute after SIGINT:\n%s", g.log)
	}
	if code := g.cmd.ProcessState.ExitCode(); code != 0 {
		t.Errorf("terp serve exited %d:\n%s", code, g.log)
	}
	g.cmd = nil
}

// client is the official SDK with key.
func (g *gateway) client(key string) openai.Client {
	return openai.NewClient(option.WithBaseURL(g.base), option.WithAPIKey(key), option.WithMaxRetries(0))
}

// call is a raw request, as a hostile client writes it.
type call struct {
	method string
	path   string // below the server's root: "/v1/..."; sent as written
	body   string
	// contentType defaults to JSON when there is a body.
	contentType string
	header      map[string]string
}

// reply is what an attacker sees of an answer.
type reply struct {
	status int
	header http.Header
	body   string
}

// noRedirects does not follow a redirect: where it points is the answer.
var noRedirects = &http.Client{
	Timeout:       2 * time.Minute,
	CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
}

// do sends c with each of auth as an Authorization header, as written.
// No answer may hold the upstream model server's key.
func (g *gateway) do(t *testing.T, c call, auth ...string) reply {
	t.Helper()
	root := strings.TrimSuffix(g.base, "/v1")
	req, err := http.NewRequestWithContext(t.Context(), c.method, root+c.path, strings.NewReader(c.body))
	if err != nil {
		t.Fatalf("%s %s: %v", c.method, c.path, err)
	}
	for _, a := range auth {
		req.Header.Add("Authorization", a)
	}
	if c.body != "" {
		ct := c.contentType
		if ct == "" {
			ct = "application/json"
		}
		req.Header.Set("Content-Type", ct)
	}
	for k, v := range c.header {
		req.Header.Set(k, v)
	}
	resp, err := noRedirects.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", c.method, c.path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: reading the answer: %v", c.method, c.path, err)
	}
	r := reply{status: resp.StatusCode, header: resp.Header, body: string(b)}
	if hasSecret(r.body) || hasSecret(fmt.Sprint(r.header)) {
		t.Errorf("%s %s answers with the upstream model server's key:\n%s", c.method, c.path, r.body)
	}
	return r
}

// as sends c with key as a bearer key.
func (g *gateway) as(t *testing.T, key string, c call) reply {
	t.Helper()
	return g.do(t, c, "Bearer "+key)
}

// apiError is the error object of an answer, or ok false when the answer
// is not OpenAI's error shape.
func (r reply) apiError() (e struct {
	Message string  `json:"message"`
	Type    string  `json:"type"`
	Param   *string `json:"param"`
	Code    *string `json:"code"`
}, ok bool) {
	var body struct {
		Error *struct {
			Message string  `json:"message"`
			Type    string  `json:"type"`
			Param   *string `json:"param"`
			Code    *string `json:"code"`
		} `json:"error"`
	}
	if json.Unmarshal([]byte(r.body), &body) != nil || body.Error == nil || body.Error.Message == "" {
		return e, false
	}
	return *body.Error, true
}

// jsonBody is v as a request body.
func jsonBody(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(b)
}

// multipartFile is a multipart/form-data body with one part, field file,
// whose Content-Disposition is disposition byte for byte: a hostile client
// writes what it likes there, NULs and newlines included.
func multipartFile(disposition, content string) (body, contentType string) {
	const boundary = "terp-adversarial-boundary-7f3a"
	body = "--" + boundary + "\r\nContent-Disposition: " + disposition + "\r\nContent-Type: application/octet-stream\r\n\r\n" +
		content + "\r\n--" + boundary + "--\r\n"
	return body, "multipart/form-data; boundary=" + boundary
}

// upload is a multipart upload of content named name, as written.
func upload(path, name, content string) call {
	body, ct := multipartFile(`form-data; name="file"; filename="`+name+`"`, content)
	return call{method: "POST", path: path, body: body, contentType: ct}
}

// serveStep is the scripted model for every serve case, which run in
// parallel on one server: it runs code when the question says "run code"
// (saving out.txt, so there is a file the code made), and answers "ok" to
// anything else.
func serveStep(req llmtest.Request) llmtest.Reply {
	last := req.Messages[len(req.Messages)-1]
	if last.Role == "user" && strings.Contains(last.Content, "run code") {
		return llmtest.RunPython("open('/work/out.txt', 'w').write('made by the code')\nprint('ran')")
	}
	return llmtest.Answer("ok")
}

// serveModel is a scripted model that answers serveStep up to n times.
func serveModel(t *testing.T, n int) *llmtest.Server {
	steps := make([]llmtest.Step, n)
	for i := range steps {
		steps[i] = serveStep
	}
	return llmtest.New(t, steps...)
}

func sdkContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// serveFixture is what alice and bob made before the cases start: alice's
// objects are what bob goes after.
type serveFixture struct {
	g *gateway
	// alice's container (with her file, an upload and a file the code
	// made), file and response.
	container, containerFile, madeFile, file, response string
	// secret is the content of alice's uploads.
	secret string
	// deleted is a container alice made, used (a file, a response) and
	// deleted; deletedFile and deletedResponse were in it, deletedSecret
	// was the file's content.
	deleted, deletedFile, deletedResponse, deletedSecret string
	// bob's own container and file.
	bobContainer, bobFile string
	// ids are every id the server gave out, with the prefix of its kind.
	ids []servedID
}

// servedID is an id the server gave out: whose object it names, what kind
// of object, and the prefix of that kind.
type servedID struct{ owner, what, prefix, id string }

// newServeFixture makes the objects through the official SDK, as a client
// would.
func newServeFixture(t *testing.T, g *gateway) *serveFixture {
	t.Helper()
	ctx := sdkContext(t)
	alice, bob := g.client(g.alice), g.client(g.bob)
	fx := &serveFixture{g: g, secret: "alice's data " + randomHex(), deletedSecret: "deleted data " + randomHex()}
	must := func(what string, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v\n%s", what, err, g.log)
		}
	}
	f, err := alice.Files.New(ctx, openai.FileNewParams{File: openai.File(strings.NewReader(fx.secret), "alice.csv", "text/csv"),
		Purpose: openai.FilePurposeUserData})
	must("alice uploads a file", err)
	c, err := alice.Containers.New(ctx, openai.ContainerNewParams{Name: "alice's", FileIDs: []string{f.ID}})
	must("alice makes a container", err)
	cf, err := alice.Containers.Files.New(ctx, c.ID, openai.ContainerFileNewParams{
		File: openai.File(strings.NewReader(fx.secret), "notes.txt", "text/plain")})
	must("alice uploads into her container", err)
	r, err := alice.Responses.New(ctx, responses.ResponseNewParams{Model: "test-model",
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("run code")},
		Tools: []responses.ToolUnionParam{responses.ToolParamOfCodeInterpreter(c.ID)}})
	must("alice runs a response in her container", err)
	fx.container, fx.containerFile, fx.file, fx.response = c.ID, cf.ID, f.ID, r.ID
	fx.ids = append(fx.ids, servedID{"alice", "container", "cntr_", c.ID}, servedID{"alice", "container file", "cfile_", cf.ID},
		servedID{"alice", "file", "file-", f.ID}, servedID{"alice", "response", "resp_", r.ID})
	for _, item := range r.Output {
		switch item.Type {
		case "code_interpreter_call":
			fx.ids = append(fx.ids, servedID{"alice", "code_interpreter_call", "ci_", item.ID})
		case "message":
			fx.ids = append(fx.ids, servedID{"alice", "message", "msg_", item.ID})
			for _, part := range item.AsMessage().Content {
				for _, a := range part.Annotations {
					if a.Type == "container_file_citation" {
						fx.madeFile = a.AsContainerFileCitation().FileID
					}
				}
			}
		}
	}
	if fx.madeFile == "" || len(fx.ids) != 6 {
		t.Fatalf("alice's response ran no code or cited no file: %+v\n%s", r.Output, g.log)
	}
	fx.ids = append(fx.ids, servedID{"alice", "container file the code made", "cfile_", fx.madeFile})

	chat := g.as(t, g.alice, call{method: "POST", path: "/v1/chat/completions", body: `{"model": "test-model",
		"tools": [{"type": "code_interpreter"}], "messages": [{"role": "user", "content": "hello"}]}`})
	var completion struct{ ID string }
	if chat.status != http.StatusOK || json.Unmarshal([]byte(chat.body), &completion) != nil || chat.header.Get("X-Terp-Container") == "" {
		t.Fatalf("alice's chat completion: %d %s", chat.status, chat.body)
	}
	fx.ids = append(fx.ids, servedID{"alice", "chat completion", "chatcmpl-", completion.ID},
		servedID{"alice", "chat completion's container", "cntr_", chat.header.Get("X-Terp-Container")})

	d, err := alice.Containers.New(ctx, openai.ContainerNewParams{Name: "to delete"})
	must("alice makes a second container", err)
	df, err := alice.Containers.Files.New(ctx, d.ID, openai.ContainerFileNewParams{
		File: openai.File(strings.NewReader(fx.deletedSecret), "gone.txt", "text/plain")})
	must("alice uploads into the second container", err)
	rd, err := alice.Responses.New(ctx, responses.ResponseNewParams{Model: "test-model",
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("hello")},
		Tools: []responses.ToolUnionParam{responses.ToolParamOfCodeInterpreter(d.ID)}})
	must("alice runs a response in the second container", err)
	must("alice deletes the second container", alice.Containers.Delete(ctx, d.ID))
	fx.deleted, fx.deletedFile, fx.deletedResponse = d.ID, df.ID, rd.ID
	fx.ids = append(fx.ids, servedID{"alice", "deleted container", "cntr_", d.ID}, servedID{"alice", "deleted container's file", "cfile_", df.ID},
		servedID{"alice", "deleted container's response", "resp_", rd.ID})

	bf, err := bob.Files.New(ctx, openai.FileNewParams{File: openai.File(strings.NewReader("bob's data"), "bob.csv", "text/csv"),
		Purpose: openai.FilePurposeUserData})
	must("bob uploads a file", err)
	bc, err := bob.Containers.New(ctx, openai.ContainerNewParams{Name: "bob's"})
	must("bob makes a container", err)
	fx.bobFile, fx.bobContainer = bf.ID, bc.ID
	fx.ids = append(fx.ids, servedID{"bob", "file", "file-", bf.ID}, servedID{"bob", "container", "cntr_", bc.ID})
	return fx
}

// TestServe attacks one running terp serve: one key going after another's
// objects, a request with no valid key, hostile file names and paths, a
// deleted container's id, and the ids themselves; then, after a restart on
// the same data, what a restart must not bring back.
func TestServe(t *testing.T) {
	t.Parallel()
	g := startServe(t, serveModel(t, 200))
	fx := newServeFixture(t, g)
	t.Run("attacks", func(t *testing.T) {
		t.Run("bob after alice's objects", func(t *testing.T) { t.Parallel(); serveOtherKey(t, fx) })
		t.Run("bob lists", func(t *testing.T) { t.Parallel(); serveListsOwn(t, fx) })
		t.Run("no valid key", func(t *testing.T) { t.Parallel(); serveBadKeys(t, fx) })
		t.Run("file names", func(t *testing.T) { t.Parallel(); serveFileNames(t, g) })
		t.Run("deleted container", func(t *testing.T) { t.Parallel(); serveDeletedContainer(t, fx) })
		t.Run("ids", func(t *testing.T) { t.Parallel(); serveIDs(t, fx) })
	})
	t.Run("alice's objects are intact", func(t *testing.T) { serveIntact(t, fx) })
	g.stop(t)
	g.start(t)
	t.Run("after a restart", func(t *testing.T) {
		t.Run("bob after alice's objects", func(t *testing.T) { serveOtherKey(t, fx) })
		t.Run("bob lists", func(t *testing.T) { serveListsOwn(t, fx) })
		t.Run("deleted container", func(t *testing.T) { serveDeletedContainer(t, fx) })
		t.Run("alice's file is still hers", func(t *testing.T) {
			// Uploaded files are kept on disk: bob's 404 above is not
			// that of a server that forgot everything.
			alice := g.client(g.alice)
			resp, err := alice.Files.Content(sdkContext(t), fx.file)
			if err != nil {
				t.Fatalf("alice's file after the restart: %v", err)
			}
			b, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if err != nil || string(b) != fx.secret {
				t.Errorf("alice's file after the restart holds %q (%v), want %q", b, err, fx.secret)
			}
		})
	})
}

// idShape is an id as the server must give it out: its kind's prefix and
// 128 random bits in hex, so that no id can be guessed from another.
var idShape = regexp.MustCompile(`^(cntr_|cfile_|file-|resp_|ci_|msg_|chatcmpl-)[0-9a-f]{32}$`)

// serveIDs checks the shape of every id the server gave out; a count or
// a timestamp would show in it, randomness statistics would not.
func serveIDs(t *testing.T, fx *serveFixture) {
	seen := map[string]string{}
	for _, id := range fx.ids {
		if !idShape.MatchString(id.id) || !strings.HasPrefix(id.id, id.prefix) {
			t.Errorf("the id of %s's %s, %q, is not %s and 32 hex digits (128 random bits)", id.owner, id.what, id.id, id.prefix)
		}
		what := id.owner + "'s " + id.what
		if other, ok := seen[id.id]; ok {
			t.Errorf("%s and %s have the same id %s", what, other, id.id)
		}
		seen[id.id] = what
	}
}

// like is a made-up id of the same shape as id: the same prefix and
// length, other random hex.
func like(id string) string {
	if len(id) < 32 {
		return id + "0"
	}
	return id[:len(id)-32] + randomHex() + randomHex()
}
