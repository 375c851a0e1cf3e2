package openaiapi

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"

	"github.com/terpdev/terp/internal/agent"
	"github.com/terpdev/terp/internal/config"
	"github.com/terpdev/terp/internal/conversation"
	"github.com/terpdev/terp/internal/llm"
	"github.com/terpdev/terp/internal/llm/llmtest"
	"github.com/terpdev/terp/internal/sandbox"
	"github.com/terpdev/terp/internal/sandbox/local"
	"github.com/terpdev/terp/internal/serve"
	"github.com/terpdev/terp/internal/serve/state"
	"github.com/terpdev/terp/internal/store"
	"github.com/terpdev/terp/internal/terptest"
)

// replica is one of several servers that share a state and a
// conversation store, as replicas on PostgreSQL do.
type replica struct {
	hs  *httptest.Server
	srv *serve.Server
}

// newReplicas starts n servers sharing one state, one conversation store
// and one sandbox backend (the one machine stands for remote sandboxes),
// each with its Config changed by change.
func newReplicas(t *testing.T, s *llmtest.Server, n int, change ...func(*serve.Config)) ([]*replica, state.State) {
	t.Helper()
	dir := terptest.TempDir(t)
	st, err := store.Open(filepath.Join(dir, "data"))
	if err != nil {
		t.Fatal(err)
	}
	shared, err := state.OpenDir(filepath.Join(dir, "serve"))
	if err != nil {
		t.Fatal(err)
	}
	backend, err := local.New(local.Config{Root: filepath.Join(dir, "sandboxes")})
	if err != nil {
		t.Fatal(err)
	}
	var out []*replica
	for range n {
		cfg := config.Default()
		cfg.BaseURL, cfg.Model, cfg.Sandbox, cfg.ExecMode = s.BaseURL(), "test-model", "local", "kernel"
		svc := conversation.New(conversation.Deps{
			Store:      st,
			NewBackend: func(*config.Config) (sandbox.Backend, error) { return backend, nil },
			NewModel: func(c *config.Config) agent.Completer {
				return llm.New(llm.Config{BaseURL: c.BaseURL, Stream: c.Stream})
			},
		})
		hs := httptest.NewUnstartedServer(nil)
		hs.Start()
		sc := serve.Config{Conversations: svc, Settings: cfg, State: shared, Replica: hs.URL,
			Keys: map[string]serve.Principal{aliceKey: {Name: "alice"}, bobKey: {Name: "bob"}}}
		for _, f := range change {
			f(&sc)
		}
		srv, err := serve.New(sc)
		if err != nil {
			t.Fatal(err)
		}
		Register(srv, Options{})
		hs.Config.Handler = srv.Handler()
		r := &replica{hs: hs, srv: srv}
		t.Cleanup(func() { r.stop() })
		out = append(out, r)
	}
	return out, shared
}

// stop closes the replica's listener and pauses its containers.
func (r *replica) stop() {
	r.hs.Close()
	r.srv.Close(context.Background())
}

func (r *replica) client(key string) openai.Client {
	return openai.NewClient(option.WithBaseURL(r.hs.URL+"/v1"), option.WithAPIKey(key), option.WithMaxRetries(0))
}

// A container is open in one replica; the others forward its requests
// there, streamed ones too, so the kernel keeps its variables whichever
// replica the client reaches. When that replica is gone, another opens the
// container: files and history go on, and the model is told Python
// restarted.
func TestReplicasShareContainers(t *testing.T) {
	restarted := func(req llmtest.Request) bool { return strings.Contains(req.LastUser(), "Python was restarted") }
	s := llmtest.New(t,
		llmtest.Fixed(llmtest.RunPython("x = 41\nopen('/work/note.txt', 'w').write('kept')\nprint(x)")),
		answerFromTool("x is "),
		// On b, forwarded to a: the variable is there.
		func(req llmtest.Request) llmtest.Reply {
			if restarted(req) {
				t.Error("a forwarded request restarted Python")
			}
			return llmtest.RunPython("print(x + 1)")
		},
		answerFromTool("x+1 is "),
		// Streamed, on b.
		llmtest.Fixed(llmtest.RunPython("print(x + 2)")),
		answerFromTool("x+2 is "),
		// After a is gone, on b.
		func(req llmtest.Request) llmtest.Reply {
			if !restarted(req) {
				t.Errorf("the model was not told Python restarted: %q", req.LastUser())
			}
			return llmtest.RunPython("print(open('/work/note.txt').read())")
		},
		answerFromTool("the note says "),
	)
	reps, shared := newReplicas(t, s, 2)
	a, b := reps[0], reps[1]
	ask := func(r *replica, prev, q string) *responses.Response {
		t.Helper()
		p := responses.ResponseNewParams{Model: "test-model", Input: responses.ResponseNewParamsInputUnion{OfString: openai.String(q)},
			Tools: []responses.ToolUnionParam{codeInterpreter()}}
		if prev != "" {
			p.PreviousResponseID = openai.String(prev)
		}
		c := r.client(aliceKey)
		resp, err := c.Responses.New(ctx(t), p)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	first := ask(a, "", "Set x.")
	cntr := first.Output[0].AsCodeInterpreterCall().ContainerID
	if got := ask(b, first.ID, "And x+1?"); got.OutputText() != "x+1 is 42" {
		t.Fatalf("through b: %q", got.OutputText())
	}
	if b.srv.IsOpen(cntr) || !a.srv.IsOpen(cntr) {
		t.Fatal("the container moved to b instead of being forwarded to a")
	}
	bc := b.client(aliceKey)
	stream := bc.Responses.NewStreaming(ctx(t), responses.ResponseNewParams{Model: "test-model",
		Input:              responses.ResponseNewParamsInputUnion{OfString: openai.String("And x+2?")},
		PreviousResponseID: openai.String(first.ID), Tools: []responses.ToolUnionParam{codeInterpreter()}})
	var text string
	for stream.Next() {
		if e := stream.Current(); e.Type == "response.completed" {
			text = e.Response.OutputText()
		}
	}
	if err := stream.Err(); err != nil || text != "x+2 is 43" {
		t.Fatalf("streamed through b: %q, %v", text, err)
	}
	// bob, through b, is told alice's container does not exist.
	bob := b.client(bobKey)
	if _, err := bob.Containers.Files.List(ctx(t), cntr, openai.ContainerFileListParams{}); err == nil {
		t.Error("bob listed alice's container through a forward")
	}

	// a dies: its address no longer answers, and the record still names it.
	addr := a.hs.URL
	a.stop()
	rec, err := shared.Container(ctx(t), "alice", cntr)
	if err != nil {
		t.Fatal(err)
	}
	rec.Replica = addr
	if err := shared.SaveContainer(ctx(t), rec); err != nil {
		t.Fatal(err)
	}
	// An upload is not kept to be run again: it is to be sent again.
	if got := postUpload(t, b.hs.URL+"/v1/containers/"+cntr+"/files", []byte("again")); got.StatusCode != http.StatusServiceUnavailable ||
		!strings.Contains(got.body, "replica_unavailable") {
		t.Errorf("an upload for a's container after a died: %d %s; want 503, send it again", got.StatusCode, got.body)
	}
	if got := ask(b, first.ID, "What does the note say?"); got.OutputText() != "the note says kept" {
		t.Fatalf("after a died: %q", got.OutputText())
	}
	if !b.srv.IsOpen(cntr) {
		t.Error("b did not take the container over")
	}
	if rec, _ := shared.Container(ctx(t), "alice", cntr); rec.Replica != b.hs.URL {
		t.Errorf("the record names %q, not b", rec.Replica)
	}
}

// A chat completion that names a container open in another replica is
// forwarded there whole: the model is asked the follow-up, Python has
// kept its variables, and the container stays where it is open. An error
// that replica answers is passed on, and leaves it the container's.
func TestReplicasForwardChatCompletions(t *testing.T) {
	s := llmtest.New(t,
		llmtest.Fixed(llmtest.RunPython("x = 41\nprint(x)")),
		answerFromTool("x is "),
		// On b, forwarded to a.
		func(req llmtest.Request) llmtest.Reply {
			if !strings.Contains(req.LastUser(), "And x+1?") {
				t.Errorf("the model was asked %q, not the follow-up", req.LastUser())
			}
			return llmtest.RunPython("print(x + 1)")
		},
		answerFromTool("x+1 is "),
	)
	reps, shared := newReplicas(t, s, 2)
	a, b := reps[0], reps[1]
	chat := func(r *replica, q string, opts ...option.RequestOption) (string, string, error) {
		t.Helper()
		var resp *http.Response
		c := r.client(aliceKey)
		got, err := c.Chat.Completions.New(ctx(t), openai.ChatCompletionNewParams{Model: "test-model",
			Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage(q)}},
			append(opts, option.WithJSONSet("tools", []map[string]string{{"type": "code_interpreter"}}), option.WithResponseInto(&resp))...)
		if err != nil {
			return "", "", err
		}
		return got.Choices[0].Message.Content, resp.Header.Get(ContainerHeader), nil
	}
	answer, cntr, err := chat(a, "Set x.")
	if err != nil || answer != "x is 41" || cntr == "" {
		t.Fatalf("on a: %q in container %q, %v", answer, cntr, err)
	}
	answer, again, err := chat(b, "And x+1?", option.WithHeader(ContainerHeader, cntr))
	if err != nil || answer != "x+1 is 42" || again != cntr {
		t.Fatalf("through b: %q in container %q, %v", answer, again, err)
	}
	_, _, err = chat(b, " ", option.WithHeader(ContainerHeader, cntr))
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusBadRequest || !strings.Contains(apiErr.Message, "the question is empty") {
		t.Errorf("an empty question through b: %v; want a's 400", err)
	}
	if rec, err := shared.Container(ctx(t), "alice", cntr); err != nil || rec.Replica != a.hs.URL {
		t.Errorf("the record names %q (%v), not a, which is alive and holds the container", rec.Replica, err)
	}
	if b.srv.IsOpen(cntr) || !a.srv.IsOpen(cntr) {
		t.Error("the container moved to b instead of being forwarded to a")
	}
}

// A client that gives up on a request forwarded to another replica, or
// whose upload is refused on its way there, leaves the container to that
// replica, which is alive: what the client did says nothing of it, and
// the next request goes on in the container instead of finding it busy.
func TestReplicasClientFailureKeepsTheReplica(t *testing.T) {
	asked, release := make(chan struct{}), make(chan struct{})
	s := llmtest.New(t,
		llmtest.Fixed(llmtest.RunPython("x = 41\nprint(x)")),
		answerFromTool("x is "),
		// Through b, given up on while the model thinks.
		func(llmtest.Request) llmtest.Reply {
			close(asked)
			<-release
			return llmtest.Answer("too late")
		},
		llmtest.Fixed(llmtest.RunPython("print(x + 1)")),
		answerFromTool("x+1 is "),
	)
	// b refuses smaller uploads than a, so that its refusal, not a's
	// answer, ends the forward.
	n := 0
	reps, shared := newReplicas(t, s, 2, func(c *serve.Config) {
		if n++; n == 2 {
			c.Caps.Upload = 1 << 10
		}
	})
	a, b := reps[0], reps[1]
	tool := option.WithJSONSet("tools", []map[string]string{{"type": "code_interpreter"}})
	params := func(q string) openai.ChatCompletionNewParams {
		return openai.ChatCompletionNewParams{Model: "test-model", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage(q)}}
	}
	var resp *http.Response
	ac, bc := a.client(aliceKey), b.client(aliceKey)
	if _, err := ac.Chat.Completions.New(ctx(t), params("Set x."), tool, option.WithResponseInto(&resp)); err != nil {
		t.Fatal(err)
	}
	cntr := resp.Header.Get(ContainerHeader)

	gaveUp, giveUp := context.WithCancel(ctx(t))
	go func() { <-asked; giveUp() }()
	if _, err := bc.Chat.Completions.New(gaveUp, params("Slow?"), tool, option.WithHeader(ContainerHeader, cntr)); !errors.Is(err, context.Canceled) {
		t.Errorf("a request given up on: %v", err)
	}
	close(release)
	if rec, err := shared.Container(ctx(t), "alice", cntr); err != nil || rec.Replica != a.hs.URL {
		t.Errorf("after a client gave up, the record names %q (%v), not a, which is alive and holds the container", rec.Replica, err)
	}
	// a ends the turn given up on; the container is busy until then.
	deadline := time.Now().Add(time.Minute)
	for a.srv.Leased(cntr) {
		time.Sleep(10 * time.Millisecond)
		if time.Now().After(deadline) {
			t.Fatal("a did not end the turn given up on")
		}
	}

	answer, err := bc.Chat.Completions.New(ctx(t), params("And x+1?"), tool, option.WithHeader(ContainerHeader, cntr))
	if err != nil || answer.Choices[0].Message.Content != "x+1 is 42" {
		t.Fatalf("the next request through b: %v", err)
	}

	// In another container: a is busy with the upload cut short for a
	// moment.
	other, err := ac.Containers.New(ctx(t), openai.ContainerNewParams{Name: "on a"})
	if err != nil {
		t.Fatal(err)
	}
	got := postUpload(t, b.hs.URL+"/v1/containers/"+other.ID+"/files", bytes.Repeat([]byte("x"), 2<<20))
	if got.StatusCode != http.StatusRequestEntityTooLarge {
		t.Errorf("an upload over b's cap: %d %s; want 413", got.StatusCode, got.body)
	}
	if rec, err := shared.Container(ctx(t), "alice", other.ID); err != nil || rec.Replica != a.hs.URL {
		t.Errorf("after an upload was refused, the record names %q (%v), not a, which is alive and holds the container", rec.Replica, err)
	}
}

// A request one replica forwards to another counts once under its key's
// requests per minute, where it came in: four a minute let a container be
// made on a and three requests for it through b, forwarded to a, and then
// no more. A client cannot pass for a replica that counted its request.
func TestReplicasCountAForwardedRequestOnce(t *testing.T) {
	reps, _ := newReplicas(t, llmtest.New(t), 2, func(c *serve.Config) {
		c.Keys[aliceKey] = serve.Principal{Name: "alice", Limits: serve.Limits{RPM: 4}}
	})
	a, b := reps[0], reps[1]
	ac, bc := a.client(aliceKey), b.client(aliceKey)
	cntr, err := ac.Containers.New(ctx(t), openai.ContainerNewParams{Name: "on a"})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if _, err := bc.Containers.Files.List(ctx(t), cntr.ID, openai.ContainerFileListParams{}); err != nil {
			t.Fatalf("request %d of 4 a minute, forwarded from b to a: %v", i+2, err)
		}
	}
	if b.srv.IsOpen(cntr.ID) || !a.srv.IsOpen(cntr.ID) {
		t.Fatal("the container moved to b instead of being forwarded to a")
	}
	forged := option.WithHeaderAdd(serve.ForwardedHeader, b.hs.URL)
	for _, mark := range []string{"forged", ""} {
		_, err = ac.Containers.Files.List(ctx(t), cntr.ID, openai.ContainerFileListParams{},
			forged, option.WithHeader(serve.CountedHeader, mark))
		if got := refused(t, err); got.status != http.StatusTooManyRequests || got.typ != "requests" {
			t.Errorf("the fifth request, marked counted by %q: %+v; want a 429 of type requests", mark, got)
		}
	}
	// b counted its three: a fifth of its own is refused there.
	_, err = bc.Containers.List(ctx(t), openai.ContainerListParams{})
	if got := refused(t, err); got.status != http.StatusTooManyRequests || got.typ != "requests" {
		t.Errorf("the fifth request, to b: %+v; want a 429 of type requests", got)
	}
}
