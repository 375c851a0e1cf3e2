package openaiapi

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"

	"github.com/terpdev/terp/internal/config"
	"github.com/terpdev/terp/internal/llm/llmtest"
	"github.com/terpdev/terp/internal/serve"
	"github.com/terpdev/terp/internal/serve/servetest"
	"github.com/terpdev/terp/internal/serve/state"
	"github.com/terpdev/terp/internal/terptest"
)

// newLimitServer is terp serve in front of the scripted model s, on the
// in-memory sandbox: no turn of these tests runs code, and the limits sit
// in front of the sandbox.
func newLimitServer(t *testing.T, s *llmtest.Server, change func(*serve.Config)) *testServer {
	t.Helper()
	sc, st := servetest.Config(t, terptest.TempDir(t), servetest.Options{ModelURL: s.BaseURL(), Sandbox: servetest.Memory,
		Settings: func(cfg *config.Config) { cfg.IdlePause = 0 }})
	if change != nil {
		change(&sc)
	}
	hs, srv := servetest.Start(t, sc, func(srv *serve.Server) { Register(srv, Options{}) })
	return &testServer{Server: hs, srv: srv, store: st}
}

// limit sets the limits of the key named name.
func limit(c *serve.Config, name string, l serve.Limits) {
	for k, key := range c.Keys {
		if key.Name == name {
			c.Keys[k] = serve.Principal{Name: name, Limits: l}
		}
	}
}

// refusal is what a client is told of a limit: the SDK's error and the
// headers it came with.
type refusal struct {
	status          int
	typ, code, msg  string
	retryAfter      int
	retryAfterMs    int
	shouldRetryFlag string
}

// refused reads err as the SDK's error for a refused request.
func refused(t *testing.T, err error) refusal {
	t.Helper()
	var apiErr *openai.Error
	if !errorsAs(err, &apiErr) {
		t.Fatalf("want an API error, got %v", err)
	}
	h := apiErr.Response.Header
	ra, _ := strconv.Atoi(h.Get("Retry-After"))
	ms, _ := strconv.Atoi(h.Get("Retry-After-Ms"))
	return refusal{status: apiErr.StatusCode, typ: apiErr.Type, code: apiErr.Code, msg: apiErr.Message,
		retryAfter: ra, retryAfterMs: ms, shouldRetryFlag: h.Get("X-Should-Retry")}
}

func listContainers(c openai.Client, t *testing.T) error {
	_, err := c.Containers.List(ctx(t), openai.ContainerListParams{})
	return err
}

// A key over its requests per minute gets OpenAI's rate-limit error, a
// 429 the SDK reads as one, with the seconds until a request is back in
// Retry-After; another key is not held to it.
func TestLimitRequestsPerMinute(t *testing.T) {
	ts := newLimitServer(t, llmtest.New(t), func(c *serve.Config) { limit(c, "alice", serve.Limits{RPM: 2}) })
	alice, bob := ts.client(aliceKey), ts.client(bobKey)
	for i := range 2 {
		if err := listContainers(alice, t); err != nil {
			t.Fatalf("request %d of 2 a minute: %v", i+1, err)
		}
	}
	got := refused(t, listContainers(alice, t))
	// Two a minute: one is back 30 s after the last was spent.
	if got.status != http.StatusTooManyRequests || got.typ != "requests" || got.code != "rate_limit_exceeded" ||
		got.retryAfter < 25 || got.retryAfter > 30 || got.retryAfterMs > got.retryAfter*1000 || got.retryAfterMs < (got.retryAfter-1)*1000 {
		t.Errorf("the third request: %+v; want a 429 rate_limit_exceeded of type requests, to retry in 30 s", got)
	}
	if !strings.Contains(got.msg, "requests per min") {
		t.Errorf("the message %q does not say which limit", got.msg)
	}
	for range 5 {
		if err := listContainers(bob, t); err != nil {
			t.Fatalf("bob is held to alice's limit: %v", err)
		}
	}
}

// The official SDK, with its retries on, waits out the Retry-After of a
// 429 and succeeds: a client over its rate slows down by itself.
func TestLimitSDKRetriesAfterRetryAfter(t *testing.T) {
	ts := newLimitServer(t, llmtest.New(t), func(c *serve.Config) { limit(c, "alice", serve.Limits{RPM: 30}) })
	spent := 0
	for ; spent < 100; spent++ {
		if err := listContainers(ts.client(aliceKey), t); err != nil {
			if got := refused(t, err); got.status != http.StatusTooManyRequests {
				t.Fatalf("spending the bucket: %+v", got)
			}
			break
		}
	}
	// A bucket of 30 spent in far less than the 2 s that refills one.
	if spent < 30 || spent > 32 {
		t.Fatalf("%d requests passed before the first refusal; want the bucket's 30", spent)
	}
	var mu sync.Mutex
	var statuses []string
	record := func(req *http.Request, next option.MiddlewareNext) (*http.Response, error) {
		resp, err := next(req)
		if err == nil {
			mu.Lock()
			statuses = append(statuses, fmt.Sprintf("%d (Retry-After %s)", resp.StatusCode, resp.Header.Get("Retry-After")))
			mu.Unlock()
		}
		return resp, err
	}
	client := openai.NewClient(option.WithBaseURL(ts.URL+"/v1"), option.WithAPIKey(aliceKey),
		option.WithMaxRetries(2), option.WithMiddleware(record))
	if err := listContainers(client, t); err != nil {
		t.Fatalf("the SDK did not get through on its retries: %v (it saw %q)", err, statuses)
	}
	if len(statuses) != 2 || statuses[0] != "429 (Retry-After 2)" || !strings.HasPrefix(statuses[1], "200") {
		t.Errorf("the SDK saw %q; want a 429 to retry in 2 s, then 200", statuses)
	}
}

// A key that used its tokens for the day is refused its next turn until
// midnight UTC, in Retry-After, and told not to retry before; the count
// comes from the usage the model server reported, kept in Config.State.
func TestLimitTokensPerDay(t *testing.T) {
	answer := llmtest.Fixed(llmtest.Reply{Content: "done", PromptTokens: 80, CompletionTokens: 40})
	var usage *recordedUsage
	ts := newLimitServer(t, llmtest.New(t, answer, answer), func(c *serve.Config) {
		limit(c, "alice", serve.Limits{TokensPerDay: 100})
		st, err := state.OpenDir(c.DataDir)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		usage = &recordedUsage{State: st}
		c.State = usage
	})
	ask := func(key string) error {
		client := ts.client(key)
		_, err := client.Responses.New(ctx(t), responses.ResponseNewParams{Model: "test-model",
			Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("hello")},
			Tools: []responses.ToolUnionParam{codeInterpreter()}})
		return err
	}
	// Under the limit when it starts, the turn runs to its end, past it.
	if err := ask(aliceKey); err != nil {
		t.Fatal(err)
	}
	if want := fmt.Sprintf("alice %s 120", time.Now().UTC().Format(time.DateOnly)); usage.added() != want {
		t.Errorf("Config.State was told %q; want %q", usage.added(), want)
	}
	// Measured before the refusal: the wait the server computed after it
	// is no longer, however slow the machine.
	now := time.Now().UTC()
	midnight := int(time.Date(now.Year(), now.Month(), now.Day()+1, 0, 0, 0, 0, time.UTC).Sub(now).Seconds()) + 1
	got := refused(t, ask(aliceKey))
	if got.status != http.StatusTooManyRequests || got.typ != "tokens" || got.code != "rate_limit_exceeded" ||
		got.retryAfter < midnight-60 || got.retryAfter > midnight+1 || got.shouldRetryFlag != "false" {
		t.Errorf("the next turn: %+v; want a 429 of type tokens until midnight (%d s), not to be retried", got, midnight)
	}
	if !strings.Contains(got.msg, "used 120") || !strings.Contains(got.msg, "midnight UTC") {
		t.Errorf("the message %q does not say what was used and when it resets", got.msg)
	}
	// Chat completions draw on the same tokens, with the tool or without.
	for _, body := range []string{
		`{"model": "test-model", "tools": [{"type": "code_interpreter"}], "messages": [{"role": "user", "content": "hi"}]}`,
		`{"model": "test-model", "messages": [{"role": "user", "content": "hi"}]}`,
	} {
		if resp := post(t, ts.URL+"/v1/chat/completions", aliceKey, body); resp.StatusCode != http.StatusTooManyRequests {
			t.Errorf("a chat completion over the day's tokens: %d %s; want 429", resp.StatusCode, resp.body)
		}
	}
	if err := ask(bobKey); err != nil {
		t.Errorf("bob is held to alice's tokens: %v", err)
	}
}

// Chat completions count towards the key's tokens of the day: those that
// run the code interpreter by the turn's usage, those passed through to the
// model server by the usage it reports, streamed or not.
func TestLimitTokensChat(t *testing.T) {
	answer := llmtest.Fixed(llmtest.Reply{Content: "hi", PromptTokens: 30, CompletionTokens: 20})
	for _, tt := range []struct{ name, body string }{
		{"passed through", `{"model": "test-model", "messages": [{"role": "user", "content": "hi"}]}`},
		{"passed through, streamed", `{"model": "test-model", "stream": true, "messages": [{"role": "user", "content": "hi"}]}`},
		{"with the tool", `{"model": "test-model", "tools": [{"type": "code_interpreter"}], "messages": [{"role": "user", "content": "hi"}]}`},
		{"by the alias, streamed", `{"model": "test-model+python", "stream": true, "messages": [{"role": "user", "content": "hi"}]}`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ts := newLimitServer(t, llmtest.New(t, answer, answer), func(c *serve.Config) { limit(c, "alice", serve.Limits{TokensPerDay: 100}) })
			for i := range 2 {
				if resp := post(t, ts.URL+"/v1/chat/completions", aliceKey, tt.body); resp.StatusCode != http.StatusOK {
					t.Fatalf("completion %d: %d %s", i+1, resp.StatusCode, resp.body)
				}
			}
			if resp := post(t, ts.URL+"/v1/chat/completions", aliceKey, tt.body); resp.StatusCode != http.StatusTooManyRequests {
				t.Errorf("after 100 tokens of 100: %d %s; want 429", resp.StatusCode, resp.body)
			}
		})
	}
}

// Replicas that share a state share a key's tokens of the day and its
// containers: what the key used or made on one is held against it on the
// other.
func TestLimitsAcrossReplicas(t *testing.T) {
	shared, err := state.OpenDir(terptest.TempDir(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { shared.Close() })
	s := llmtest.New(t, llmtest.Fixed(llmtest.Reply{Content: "done", PromptTokens: 80, CompletionTokens: 40}))
	replica := func() *testServer {
		return newLimitServer(t, s, func(c *serve.Config) {
			limit(c, "alice", serve.Limits{TokensPerDay: 100, Containers: 1})
			c.State = shared
		})
	}
	a, b := replica(), replica()
	ca, cb := a.client(aliceKey), b.client(aliceKey)
	if _, err := ca.Responses.New(ctx(t), responses.ResponseNewParams{Model: "test-model",
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("hello")},
		Tools: []responses.ToolUnionParam{codeInterpreter()}}); err != nil {
		t.Fatal(err)
	}
	_, err = cb.Responses.New(ctx(t), responses.ResponseNewParams{Model: "test-model",
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("hello")},
		Tools: []responses.ToolUnionParam{codeInterpreter()}})
	if got := refused(t, err); got.status != http.StatusTooManyRequests || got.typ != "tokens" {
		t.Errorf("on the other replica, after the day's tokens: %+v; want a 429 of type tokens", got)
	}
	_, err = cb.Containers.New(ctx(t), openai.ContainerNewParams{Name: "second"})
	if got := refused(t, err); got.status != http.StatusTooManyRequests || got.typ != "containers" {
		t.Errorf("on the other replica, a container past the key's one: %+v; want a 429 of type containers", got)
	}
}

// Replicas that share a state share a key's requests per minute: ten a
// minute, sent to two replicas in turn, let ten through, and the eleventh
// is refused as on one server, whichever replica it reaches.
func TestLimitRequestsAcrossReplicas(t *testing.T) {
	shared, err := state.OpenDir(terptest.TempDir(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { shared.Close() })
	replica := func() *testServer {
		return newLimitServer(t, llmtest.New(t), func(c *serve.Config) {
			limit(c, "alice", serve.Limits{RPM: 10})
			c.State = shared
		})
	}
	a, b := replica(), replica()
	clients := []openai.Client{a.client(aliceKey), b.client(aliceKey)}
	for i := range 20 {
		err := listContainers(clients[i%2], t)
		if i < 10 {
			if err != nil {
				t.Fatalf("request %d of 10 a minute, to replica %c: %v", i+1, 'a'+i%2, err)
			}
			continue
		}
		if got := refused(t, err); got.status != http.StatusTooManyRequests || got.typ != "requests" || got.retryAfter < 1 || got.retryAfter > 6 {
			t.Fatalf("request %d of 10 a minute, to replica %c: %+v; want a 429 of type requests, to retry within 6 s", i+1, 'a'+i%2, got)
		}
	}
}

// A key holds at most its containers, the server at most its caps, even
// when they are asked for all at once; a place comes back when a container
// is deleted. Over either, a client is told which limit, with a 429.
func TestLimitContainers(t *testing.T) {
	ts := newLimitServer(t, llmtest.New(t), func(c *serve.Config) {
		limit(c, "alice", serve.Limits{Containers: 3})
		c.Caps.Containers = 4
	})
	alice, bob := ts.client(aliceKey), ts.client(bobKey)
	// atOnce asks for n of alice's containers at once, and says how many
	// were made; every other must be refused for the key's limit.
	atOnce := func(n int) int {
		t.Helper()
		var wg sync.WaitGroup
		errs := make(chan error, n)
		for range n {
			wg.Go(func() {
				_, err := alice.Containers.New(ctx(t), openai.ContainerNewParams{Name: "c"})
				errs <- err
			})
		}
		wg.Wait()
		close(errs)
		made := 0
		for err := range errs {
			if err == nil {
				made++
				continue
			}
			if got := refused(t, err); got.status != http.StatusTooManyRequests || got.typ != "containers" ||
				got.retryAfter == 0 || !strings.Contains(got.msg, "delete some") {
				t.Errorf("a container over the key's limit: %+v", got)
			}
		}
		return made
	}
	if made := atOnce(8); made != 3 {
		t.Errorf("8 asked for at once made %d containers; the key may hold 3", made)
	}
	if _, err := bob.Containers.New(ctx(t), openai.ContainerNewParams{Name: "bob's"}); err != nil {
		t.Fatalf("bob's first container: %v", err)
	}
	_, err := bob.Containers.New(ctx(t), openai.ContainerNewParams{Name: "bob's fifth of the server's"})
	if got := refused(t, err); got.status != http.StatusTooManyRequests || got.typ != "containers" || !strings.Contains(got.msg, "--max-containers") {
		t.Errorf("a container over the server's cap: %+v", got)
	}
	// A response that needs a new container is refused the same way.
	_, err = bob.Responses.New(ctx(t), responses.ResponseNewParams{Model: "test-model",
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("hello")},
		Tools: []responses.ToolUnionParam{codeInterpreter()}})
	if got := refused(t, err); got.status != http.StatusTooManyRequests || got.typ != "containers" {
		t.Errorf("a response over the server's cap: %+v", got)
	}
	list, err := alice.Containers.List(ctx(t), openai.ContainerListParams{})
	if err != nil || len(list.Data) != 3 {
		t.Fatalf("alice lists %d containers (%v)", len(list.Data), err)
	}
	if err := alice.Containers.Delete(ctx(t), list.Data[0].ID); err != nil {
		t.Fatal(err)
	}
	freed, err := bob.Containers.New(ctx(t), openai.ContainerNewParams{Name: "in the place freed"})
	if err != nil {
		t.Fatalf("after a delete: %v", err)
	}
	// Alice holds 2 of her 3: of many asked for at once, one is made.
	if err := bob.Containers.Delete(ctx(t), freed.ID); err != nil {
		t.Fatal(err)
	}
	if made := atOnce(12); made != 1 {
		t.Errorf("12 asked for at once, with 2 of the key's 3 held, made %d containers; want 1", made)
	}
}

// Each refusal reaches an OpenAI client as OpenAI's own would: the status,
// the error's type and code its SDKs read, and when to retry.
func TestRefusalOpenAI(t *testing.T) {
	tokens := rateLimited(serve.RefusedTokens, 3*time.Hour+1500*time.Millisecond, "tokens used")
	tokens.Final = true
	for _, tt := range []struct {
		name    string
		refusal *serve.Refusal
		status  int
		header  http.Header
		body    string
	}{
		{"requests", rateLimited(serve.RefusedRequests, 29500*time.Millisecond, "too many requests"), 429,
			http.Header{"Retry-After": {"30"}, "Retry-After-Ms": {"29500"}},
			`{"error":{"message":"too many requests","type":"requests","param":null,"code":"rate_limit_exceeded"}}`},
		{"tokens", tokens, 429,
			http.Header{"Retry-After": {"10802"}, "Retry-After-Ms": {"10801500"}, "X-Should-Retry": {"false"}},
			`{"error":{"message":"tokens used","type":"tokens","param":null,"code":"rate_limit_exceeded"}}`},
		{"containers", rateLimited(serve.RefusedContainers, 5*time.Second, "too many containers"), 429,
			http.Header{"Retry-After": {"5"}, "Retry-After-Ms": {"5000"}},
			`{"error":{"message":"too many containers","type":"containers","param":null,"code":"rate_limit_exceeded"}}`},
		{"runs", rateLimited(serve.RefusedRuns, 5*time.Second, "too many turns"), 429,
			http.Header{"Retry-After": {"5"}, "Retry-After-Ms": {"5000"}},
			`{"error":{"message":"too many turns","type":"runs","param":null,"code":"rate_limit_exceeded"}}`},
		{"size", serve.TooLarge("the upload", 4<<10, "--max-upload"), 413, http.Header{},
			`{"error":{"message":"the upload is over 4.0 KiB, the most this server takes (terp serve --max-upload); send less","type":"invalid_request_error","param":null,"code":"request_too_large"}}`},
		{"timeout", &serve.Refusal{Status: 408, Kind: serve.RefusedTimeout, Message: "the request body came too slowly and the server stopped waiting for it (terp serve --body-timeout); send it again"}, 408, http.Header{},
			`{"error":{"message":"the request body came too slowly and the server stopped waiting for it (terp serve --body-timeout); send it again","type":"invalid_request_error","param":null,"code":"request_timeout"}}`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			w := httptest.NewRecorder()
			answerRefusal(w, tt.refusal)
			if w.Code != tt.status {
				t.Errorf("status %d, want %d", w.Code, tt.status)
			}
			tt.header.Set("Content-Type", "application/json")
			if !reflect.DeepEqual(w.Header(), tt.header) {
				t.Errorf("headers %v, want %v", w.Header(), tt.header)
			}
			if got := strings.TrimSpace(w.Body.String()); got != tt.body {
				t.Errorf("body\n%s\nwant\n%s", got, tt.body)
			}
		})
	}
	if serve.AsRefusal(fmt.Errorf("a wrapped %w", tokens)) != tokens {
		t.Error("serve.AsRefusal does not find a wrapped refusal")
	}
	if serve.AsRefusal(io.ErrUnexpectedEOF) != nil {
		t.Error("serve.AsRefusal takes an error that is no refusal for one")
	}
}

// The server runs at most its cap of turns at once: one more, a response
// or a chat completion with the code interpreter, is refused at once with
// a 429, and the place comes back when the turn ends.
func TestLimitRuns(t *testing.T) {
	started, release := make(chan struct{}), make(chan struct{})
	slow := func(llmtest.Request) llmtest.Reply {
		close(started)
		<-release
		return llmtest.Answer("slow")
	}
	ts := newLimitServer(t, llmtest.New(t, slow, llmtest.Fixed(llmtest.Answer("next"))), func(c *serve.Config) { c.Caps.Runs = 1 })
	ask := func(key string) (*responses.Response, error) {
		client := ts.client(key)
		return client.Responses.New(ctx(t), responses.ResponseNewParams{Model: "test-model",
			Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("hello")},
			Tools: []responses.ToolUnionParam{codeInterpreter()}})
	}
	first := make(chan error, 1)
	go func() {
		_, err := ask(aliceKey)
		first <- err
	}()
	<-started
	got := refused(t, func() error { _, err := ask(bobKey); return err }())
	if got.status != http.StatusTooManyRequests || got.typ != "runs" || got.retryAfter == 0 || !strings.Contains(got.msg, "--max-runs") {
		t.Errorf("a second turn at once: %+v; want a 429 of type runs", got)
	}
	chat := post(t, ts.URL+"/v1/chat/completions", bobKey, `{"model": "test-model+python", "messages": [{"role": "user", "content": "hi"}]}`)
	if chat.StatusCode != http.StatusTooManyRequests || chat.Header.Get("Retry-After") == "" {
		t.Errorf("a chat completion with the code interpreter at once: %d %s", chat.StatusCode, chat.body)
	}
	close(release)
	if err := <-first; err != nil {
		t.Fatalf("the first turn: %v", err)
	}
	if r, err := ask(bobKey); err != nil || r.OutputText() != "next" {
		t.Errorf("a turn after the first ended: %v", err)
	}
}

// A body over its cap is refused with a 413 in OpenAI's shape, whether
// its size was declared or not, and nothing of an upload over it is kept.
func TestLimitSizes(t *testing.T) {
	ts := newLimitServer(t, llmtest.New(t), func(c *serve.Config) { c.Caps = serve.Caps{Request: 1 << 10, Upload: 4 << 10} })
	client := ts.client(aliceKey)
	tooLarge := func(what string, err error, flag string) {
		t.Helper()
		if got := refused(t, err); got.status != http.StatusRequestEntityTooLarge || got.code != "request_too_large" || !strings.Contains(got.msg, flag) {
			t.Errorf("%s: %+v; want a 413 naming %s", what, got, flag)
		}
	}
	_, err := client.Containers.New(ctx(t), openai.ContainerNewParams{Name: strings.Repeat("x", 2<<10)})
	tooLarge("a JSON body of 2 KiB", err, "--max-request-size")
	_, err = client.Chat.Completions.New(ctx(t), openai.ChatCompletionNewParams{Model: "test-model",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage(strings.Repeat("x", 2<<10))}})
	tooLarge("a chat completion of 2 KiB", err, "--max-request-size")
	_, err = client.Files.New(ctx(t), openai.FileNewParams{File: openai.File(bytes.NewReader(make([]byte, 5<<10)), "big.bin", "application/octet-stream"),
		Purpose: openai.FilePurposeUserData})
	tooLarge("an upload of 5 KiB", err, "--max-upload")

	// Sent in chunks, the size is known only once read.
	resp := postUpload(t, ts.URL+"/v1/files", make([]byte, 4<<10+1))
	if resp.StatusCode != http.StatusRequestEntityTooLarge || !strings.Contains(resp.body, `"request_too_large"`) {
		t.Errorf("a chunked upload of 4 KiB and a byte: %d %s", resp.StatusCode, resp.body)
	}
	c, err := client.Containers.New(ctx(t), openai.ContainerNewParams{Name: "c"})
	if err != nil {
		t.Fatal(err)
	}
	resp = postUpload(t, ts.URL+"/v1/containers/"+c.ID+"/files", make([]byte, 4<<10+1))
	if resp.StatusCode != http.StatusRequestEntityTooLarge {
		t.Errorf("a chunked upload of 4 KiB and a byte to a container: %d %s", resp.StatusCode, resp.body)
	}
	if files, err := client.Files.List(ctx(t), openai.FileListParams{}); err != nil || len(files.Data) != 0 {
		t.Errorf("uploads refused left %d files (%v)", len(files.Data), err)
	}
	if files, err := client.Containers.Files.List(ctx(t), c.ID, openai.ContainerFileListParams{}); err != nil || len(files.Data) != 0 {
		t.Errorf("an upload refused left %d files in the container (%v)", len(files.Data), err)
	}
	// At the cap, it is taken.
	if resp := postUpload(t, ts.URL+"/v1/files", make([]byte, 4<<10)); resp.StatusCode != http.StatusOK {
		t.Errorf("an upload of 4 KiB: %d %s", resp.StatusCode, resp.body)
	}
}

// answer is a response read whole.
type answer struct {
	*http.Response
	body string
}

func post(t *testing.T, url, key, body string) answer {
	t.Helper()
	req, _ := http.NewRequestWithContext(ctx(t), "POST", url, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Content-Type", "application/json")
	return do(t, req)
}

// postUpload sends data as a multipart upload of alice's, in chunks: the
// request does not say its length.
func postUpload(t *testing.T, url string, data []byte) answer {
	t.Helper()
	pr, pw := io.Pipe()
	mw := multipart.NewWriter(pw)
	go func() {
		_ = mw.WriteField("purpose", "user_data")
		part, _ := mw.CreateFormFile("file", "data.bin")
		_, _ = part.Write(data)
		pw.CloseWithError(mw.Close())
	}()
	req, _ := http.NewRequestWithContext(ctx(t), "POST", url, pr)
	req.Header.Set("Authorization", "Bearer "+aliceKey)
	req.Header.Set("Content-Type", mw.FormDataContentType())
	return do(t, req)
}

func do(t *testing.T, req *http.Request) answer {
	t.Helper()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return answer{Response: resp, body: string(b)}
}

// recordedUsage is a state that remembers the usage it was told.
type recordedUsage struct {
	state.State
	mu   sync.Mutex
	adds []string
}

func (r *recordedUsage) AddUsage(ctx context.Context, owner, day string, tokens int64) (int64, error) {
	r.mu.Lock()
	r.adds = append(r.adds, fmt.Sprintf("%s %s %d", owner, day, tokens))
	r.mu.Unlock()
	return r.State.AddUsage(ctx, owner, day, tokens)
}

func (r *recordedUsage) added() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return strings.Join(r.adds, "; ")
}

// The meter reads the usage of a completion, or of the chunk of a stream
// that carries it, however the stream is cut.
func TestLimitTokenMeter(t *testing.T) {
	whole := `{"id":"x","choices":[{"message":{"content":"hi"}}],"usage":{"prompt_tokens":30,"completion_tokens":20,"total_tokens":50}}`
	stream := "data: {\"choices\":[{\"delta\":{\"content\":\"hi\"}}]}\n\n" +
		"data: {\"choices\":[],\"usage\":{\"prompt_tokens\":7,\"completion_tokens\":5,\"total_tokens\":12}}\n\ndata: [DONE]\n\n"
	for _, tt := range []struct {
		name, contentType, body string
		want                    int64
	}{
		{"completion", "application/json", whole, 50},
		{"stream", "text/event-stream", stream, 12},
		{"stream without usage", "text/event-stream", "data: {\"choices\":[]}\n\ndata: [DONE]\n\n", 0},
		{"not JSON", "application/json", "<html>", 0},
	} {
		for _, cut := range []int{1, 3, 64, 1 << 20} {
			m := newTokenMeter(tt.contentType)
			for b := tt.body; b != ""; {
				n := min(cut, len(b))
				_, _ = m.Write([]byte(b[:n]))
				b = b[n:]
			}
			if got := m.tokens(); got != tt.want {
				t.Errorf("%s in pieces of %d: %d tokens, want %d", tt.name, cut, got, tt.want)
			}
		}
	}
}

// A slow state holds up only the request that waits on it: while one key's
// new container is being counted (a PostgreSQL query, with --store
// postgres), another key's requests are admitted under its rate and its
// turns start under the server's cap.
func TestLimitSlowStateHoldsUpNoOneElse(t *testing.T) {
	var slow *slowContainers
	ts := newLimitServer(t, llmtest.New(t, llmtest.Fixed(llmtest.Answer("done"))), func(c *serve.Config) {
		limit(c, "alice", serve.Limits{Containers: 2})
		limit(c, "bob", serve.Limits{RPM: 60})
		c.Caps.Runs = 4
		st, err := state.OpenDir(c.DataDir)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		slow = newSlowContainers(st, "alice")
		c.State = slow
	})
	// Let the count go before the server closes, which waits for it.
	t.Cleanup(slow.let)
	made := make(chan error, 1)
	go func() {
		client := ts.client(aliceKey)
		_, err := client.Containers.New(ctx(t), openai.ContainerNewParams{Name: "counted slowly"})
		made <- err
	}()
	select {
	case <-slow.counting:
	case <-time.After(time.Minute):
		t.Fatal("alice's new container was never counted")
	}

	bob := ts.client(bobKey)
	for _, tt := range []struct {
		what string
		do   func(context.Context) error
	}{
		{"bob's request under his rate", func(c context.Context) error {
			_, err := bob.Files.List(c, openai.FileListParams{})
			return err
		}},
		{"bob's turn under the server's cap", func(c context.Context) error {
			r, err := bob.Responses.New(c, responses.ResponseNewParams{Model: "test-model",
				Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("hello")},
				Tools: []responses.ToolUnionParam{codeInterpreter()}})
			if err == nil && r.OutputText() != "done" {
				err = fmt.Errorf("answered %q", r.OutputText())
			}
			return err
		}},
	} {
		c, cancel := context.WithTimeout(ctx(t), 30*time.Second)
		err := tt.do(c)
		cancel()
		if err != nil {
			t.Errorf("%s, while alice's container was being counted: %v", tt.what, err)
		}
	}

	slow.let()
	select {
	case err := <-made:
		if err != nil {
			t.Errorf("alice's container, once counted: %v", err)
		}
	case <-time.After(time.Minute):
		t.Error("alice's container was not made once counted")
	}
}

// slowContainers is a state whose count of one owner's containers, as a
// new one's place is held, waits until the test lets it go.
type slowContainers struct {
	state.State
	owner    string
	counting chan struct{} // closed when the owner's containers are first counted
	release  chan struct{} // closed by let
	entered  sync.Once
	released sync.Once
}

func newSlowContainers(st state.State, owner string) *slowContainers {
	return &slowContainers{State: st, owner: owner, counting: make(chan struct{}), release: make(chan struct{})}
}

func (s *slowContainers) HoldPlace(ctx context.Context, owner, id string, most state.Most, now time.Time) error {
	if owner == s.owner {
		s.entered.Do(func() { close(s.counting) })
		select {
		case <-s.release:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return s.State.HoldPlace(ctx, owner, id, most, now)
}

// let lets every count go, now and from now on.
func (s *slowContainers) let() { s.released.Do(func() { close(s.release) }) }

// A deadline that is not the client's body (the sandbox's, the state's)
// is terp's failure, never a 408 that blames the client.

// rateLimited is a 429 refusal of kind, as the host's limits give it.
func rateLimited(kind string, retry time.Duration, message string) *serve.Refusal {
	return &serve.Refusal{Status: http.StatusTooManyRequests, Kind: kind, Message: message, RetryAfter: retry}
}
