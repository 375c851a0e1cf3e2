package openaiapi_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/packages/respjson"

	"github.com/terpdev/terp/internal/config"
	"github.com/terpdev/terp/internal/llm/llmtest"
	"github.com/terpdev/terp/internal/serve"
	"github.com/terpdev/terp/internal/serve/openaiapi"
	"github.com/terpdev/terp/internal/serve/servetest"
	"github.com/terpdev/terp/internal/terptest"
)

// These tests reach terp serve's chat completions over real HTTP with
// OpenAI's own Go client, so that what terp sends is parsed as a real
// client parses it; upstream is a scripted model (llmtest). Each behaviour
// runs on the in-memory sandbox, fast, and on the real local one.

// Keys of the two owners every test server accepts, and the key terp
// sends upstream.
const (
	aliceKey    = servetest.AliceKey
	bobKey      = servetest.BobKey
	upstreamKey = "upstream-secret-key"
)

// chatSandbox is a backend the tests run on, with the code it runs written
// in its language: Python for the local sandbox, memory's stand-in line
// language for the memory one.
type chatSandbox struct {
	name string
	// kernel is set when the sandbox keeps variables between runs.
	kernel bool
	// print is code that prints text; save code that writes text to the
	// file name in /work.
	print func(text string) string
	save  func(name, text string) string
}

func chatSandboxes() []chatSandbox {
	return []chatSandbox{
		{name: servetest.Memory,
			print: func(text string) string { return "print " + text },
			save:  func(name, text string) string { return "write " + name + " " + text }},
		{name: servetest.Local, kernel: true,
			print: func(text string) string { return "print(" + strconv.Quote(text) + ")" },
			save: func(name, text string) string {
				return fmt.Sprintf("open(%q, 'w').write(%q)", "/work/"+name, text)
			}},
	}
}

// chatEnv is one terp serve in front of a scripted model, on one sandbox.
type chatEnv struct {
	t        *testing.T
	sb       chatSandbox
	upstream *llmtest.Server
	settings *config.Config
	srv      *serve.Server
	http     *httptest.Server
	// sent are the requests terp serve sent upstream itself (passthrough,
	// the model list), not the loop's.
	sent *recorder
}

// chatOptions change a chatEnv before its server starts.
type chatOptions struct {
	api      openaiapi.Options
	settings func(*config.Config)
}

func newChatEnv(t *testing.T, sb chatSandbox, upstream *llmtest.Server, opts chatOptions) *chatEnv {
	t.Helper()
	t.Setenv("TERP_CHAT_TEST_UPSTREAM_KEY", upstreamKey)
	var settings *config.Config
	sc, _ := servetest.Config(t, terptest.TempDir(t), servetest.Options{ModelURL: upstream.BaseURL(), Sandbox: sb.name,
		Settings: func(cfg *config.Config) {
			cfg.APIKeyEnv = "TERP_CHAT_TEST_UPSTREAM_KEY"
			cfg.IdlePause = 0
			if opts.settings != nil {
				opts.settings(cfg)
			}
			settings = cfg
		}})
	sent := &recorder{next: http.DefaultTransport}
	sc.Upstream = &http.Client{Transport: sent}
	hs, srv := servetest.Start(t, sc, func(srv *serve.Server) { openaiapi.Register(srv, opts.api) })
	return &chatEnv{t: t, sb: sb, upstream: upstream, settings: settings, srv: srv, http: hs, sent: sent}
}

// client is OpenAI's client for key, on this server, without retries: a
// retried request would hide what the first answer was.
func (e *chatEnv) client(key string, opts ...option.RequestOption) openai.Client {
	return openai.NewClient(append([]option.RequestOption{option.WithBaseURL(e.http.URL + "/v1"),
		option.WithAPIKey(key), option.WithMaxRetries(0)}, opts...)...)
}

// get is a GET of path on the server with key, its status and body.
func (e *chatEnv) get(key, url string) (int, []byte) {
	e.t.Helper()
	req, err := http.NewRequestWithContext(e.t.Context(), http.MethodGet, url, nil)
	if err != nil {
		e.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

// post sends body to path with key as it is, for what the SDK cannot send.
func (e *chatEnv) post(key, path, body string, header map[string]string) (int, []byte) {
	e.t.Helper()
	req, err := http.NewRequestWithContext(e.t.Context(), http.MethodPost, e.http.URL+path, strings.NewReader(body))
	if err != nil {
		e.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Content-Type", "application/json")
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

// sentRequest is one request as it left for upstream.
type sentRequest struct {
	method, url string
	header      http.Header
	body        []byte
}

// recorder is a transport that keeps the requests it carries.
type recorder struct {
	next http.RoundTripper
	mu   sync.Mutex
	reqs []sentRequest
}

func (r *recorder) RoundTrip(req *http.Request) (*http.Response, error) {
	var body []byte
	if req.Body != nil {
		body, _ = io.ReadAll(req.Body)
		req.Body.Close()
		req.Body = io.NopCloser(bytes.NewReader(body))
	}
	r.mu.Lock()
	r.reqs = append(r.reqs, sentRequest{method: req.Method, url: req.URL.String(), header: req.Header.Clone(), body: body})
	r.mu.Unlock()
	return r.next.RoundTrip(req)
}

func (r *recorder) requests() []sentRequest {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]sentRequest(nil), r.reqs...)
}

// codeInterpreter is the tool as LiteLLM sends it.
var codeInterpreter = option.WithJSONSet("tools", []map[string]string{{"type": "code_interpreter"}})

// userMessages are chat messages, all the user's.
func userMessages(texts ...string) []openai.ChatCompletionMessageParamUnion {
	var out []openai.ChatCompletionMessageParamUnion
	for _, t := range texts {
		out = append(out, openai.UserMessage(t))
	}
	return out
}

// reasoning is a message's or delta's reasoning_content, which OpenAI's
// client keeps among the fields it does not know.
func reasoning(extra map[string]respjson.Field) string {
	var s string
	if f, ok := extra["reasoning_content"]; ok {
		_ = json.Unmarshal([]byte(f.Raw()), &s)
	}
	return s
}
