package cli

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
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
	"github.com/terpdev/terp/internal/postgres/pgtest"
	"github.com/terpdev/terp/internal/serve/openaiapi"
	"github.com/terpdev/terp/internal/terptest"
)

// Two gateway processes share one PostgreSQL database and one `terp
// sandbox serve`, as replicas behind a load balancer do: a conversation
// begun on one goes on through the other, by a response or a chat
// completion (forwarded, so Python keeps its variables), and when the first is killed mid-run the second takes the
// container over with its files and history.
func TestServeReplicasOnPostgres(t *testing.T) {
	db := pgtest.URL(t)
	restarted := func(req llmtest.Request) bool { return strings.Contains(req.LastUser(), "Python was restarted") }
	s := llmtest.New(t,
		llmtest.Fixed(llmtest.RunPython("x = 41\nopen('/work/note.txt', 'w').write('kept')\nprint(x)")),
		llmtest.Fixed(llmtest.Answer("Set.")),
		// Sent to b, run in a.
		func(req llmtest.Request) llmtest.Reply {
			if restarted(req) {
				t.Error("the request forwarded to the container's replica restarted Python")
			}
			return llmtest.RunPython("print(x + 1)")
		},
		func(req llmtest.Request) llmtest.Reply {
			res, _ := req.ToolResult()
			return llmtest.Answer("x+1 is " + strings.TrimSpace(res.Stdout))
		},
		// A chat completion in the container, sent to b, run in a.
		func(req llmtest.Request) llmtest.Reply {
			if !strings.Contains(req.LastUser(), "And x+2?") {
				t.Errorf("the forwarded chat completion asked %q, not its question", req.LastUser())
			}
			return llmtest.RunPython("print(x + 2)")
		},
		func(req llmtest.Request) llmtest.Reply {
			res, _ := req.ToolResult()
			return llmtest.Answer("x+2 is " + strings.TrimSpace(res.Stdout))
		},
		// The run a's SIGKILL interrupts.
		llmtest.Fixed(llmtest.RunPython("import time\nprint('started', flush=True)\ntime.sleep(600)")),
		// On b, after a died.
		func(req llmtest.Request) llmtest.Reply {
			if !restarted(req) {
				t.Errorf("the model was not told Python restarted: %q", req.LastUser())
			}
			return llmtest.RunPython("print(open('/work/note.txt').read())")
		},
		func(req llmtest.Request) llmtest.Reply {
			res, _ := req.ToolResult()
			return llmtest.Answer("The note says " + strings.TrimSpace(res.Stdout))
		},
	)
	const token = "sandbox-token-0123456789"
	sandboxes := startProcess(t, homeEnv(t, map[string]string{"CPUOS_API_KEY": token}),
		`serving sandboxes on (http://\S+)`, "sandbox", "serve", "--listen", "127.0.0.1:0")
	replica := func() *serveProcess {
		env := serverEnv(s)
		env["TERP_SANDBOX"], env["TERP_CPUOS_URL"], env["CPUOS_API_KEY"] = "cpuos", sandboxes.base, token
		return startGatewayProcess(t, homeEnv(t, env), "--no-auth", "--store", db)
	}
	a, b := replica(), replica()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	ask := func(p *serveProcess, prev, q string) (*responses.Response, error) {
		params := responses.ResponseNewParams{Model: "test-model", Input: responses.ResponseNewParamsInputUnion{OfString: openai.String(q)},
			Tools: []responses.ToolUnionParam{codeTool()}}
		if prev != "" {
			params.PreviousResponseID = openai.String(prev)
		}
		c := p.client()
		return c.Responses.New(ctx, params)
	}

	first, err := ask(a, "", "Set x.")
	if err != nil {
		t.Fatal(err)
	}
	cntr := first.Output[0].AsCodeInterpreterCall().ContainerID
	second, err := ask(b, first.ID, "And x+1?")
	if err != nil {
		t.Fatalf("on the other replica: %v\na:\n%s\nb:\n%s", err, a.log, b.log)
	}
	if second.OutputText() != "x+1 is 42" {
		t.Fatalf("on the other replica: %q", second.OutputText())
	}
	bc := b.client()
	if _, err := bc.Containers.Get(ctx, cntr); err != nil {
		t.Fatalf("the other replica does not know the container: %v", err)
	}
	chat, err := bc.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: "test-model",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("And x+2?")}},
		option.WithJSONSet("tools", []map[string]string{{"type": "code_interpreter"}}), option.WithHeader(openaiapi.ContainerHeader, cntr))
	if err != nil {
		t.Fatalf("a chat completion in the container, on the other replica: %v\na:\n%s\nb:\n%s", err, a.log, b.log)
	}
	if got := chat.Choices[0].Message.Content; got != "x+2 is 43" {
		t.Fatalf("a chat completion in the container, on the other replica: %q", got)
	}

	running := make(chan error, 1)
	go func() { _, err := ask(a, second.ID, "Wait."); running <- err }()
	waitFor(t, func() bool { return len(s.Requests()) >= 7 }, "the model to be asked for the long run")
	time.Sleep(500 * time.Millisecond) // let the run start
	_ = a.stop(t, syscall.SIGKILL)
	if err := <-running; err == nil {
		t.Error("the response killed mid-run answered as if it had finished")
	}
	third, err := ask(b, second.ID, "What does the note say?")
	if err != nil || third.OutputText() != "The note says kept" {
		t.Fatalf("after the replica it was open in died: %v %q\nb:\n%s", err, third.OutputText(), b.log)
	}
	wantFiles(t, ctx, bc, cntr, "note.txt")
}

// Two gateway processes on one PostgreSQL hold each key to its limits
// together, as one server would: ten requests a minute, sent to the two in
// turn, let ten through and refuse the eleventh with a 429 and its
// Retry-After; a key's one container, asked for on both at once, is made
// once; the day's tokens used on one are held against the key on the
// other; a request forwarded from one to the other counts once.
func TestServeReplicasShareLimits(t *testing.T) {
	db := pgtest.URL(t)
	s := llmtest.New(t, llmtest.Fixed(llmtest.Reply{Content: "hi", PromptTokens: 80, CompletionTokens: 40}))
	keys := map[string]string{
		"rate":   "sk-rate-0123456789abcdef rpm=10",
		"one":    "sk-one-0123456789abcdef0 containers=1 rpm=unlimited",
		"tokens": "sk-tokens-0123456789abcd tokens_per_day=100 rpm=unlimited",
		"fwd":    "sk-fwd-0123456789abcdef0 rpm=4",
	}
	var file strings.Builder
	for name, line := range keys {
		fmt.Fprintf(&file, "%s %s\n", name, line)
	}
	keysFile := filepath.Join(terptest.TempDir(t), "keys")
	if err := os.WriteFile(keysFile, []byte(file.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	const token = "sandbox-token-0123456789"
	sandboxes := startProcess(t, homeEnv(t, map[string]string{"CPUOS_API_KEY": token}),
		`serving sandboxes on (http://\S+)`, "sandbox", "serve", "--listen", "127.0.0.1:0")
	replica := func() *serveProcess {
		env := serverEnv(s)
		env["TERP_SANDBOX"], env["TERP_CPUOS_URL"], env["CPUOS_API_KEY"] = "cpuos", sandboxes.base, token
		return startGatewayProcess(t, homeEnv(t, env), "--keys-file", keysFile, "--store", db)
	}
	a, b := replica(), replica()
	reps := []*serveProcess{a, b}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	client := func(p *serveProcess, name string) openai.Client {
		key, _, _ := strings.Cut(keys[name], " ")
		return openai.NewClient(option.WithBaseURL(p.base), option.WithAPIKey(key), option.WithMaxRetries(0))
	}
	tooMany := func(err error, typ string) string {
		var apiErr *openai.Error
		if !errors.As(err, &apiErr) {
			return fmt.Sprintf("got %v, not an API error", err)
		}
		retry, _ := strconv.Atoi(apiErr.Response.Header.Get("Retry-After"))
		if apiErr.StatusCode != http.StatusTooManyRequests || apiErr.Type != typ || retry < 1 {
			return fmt.Sprintf("got %d %s (Retry-After %q): %s", apiErr.StatusCode, apiErr.Type, apiErr.Response.Header.Get("Retry-After"), apiErr.Message)
		}
		return ""
	}

	for i := range 20 {
		p := reps[i%2]
		c := client(p, "rate")
		_, err := c.Files.List(ctx, openai.FileListParams{})
		if i < 10 && err != nil {
			t.Fatalf("request %d of rpm=10, to replica %c: %v", i+1, 'a'+i%2, err)
		}
		if i >= 10 {
			if why := tooMany(err, "requests"); why != "" {
				t.Fatalf("request %d of rpm=10, to replica %c: %s; want a 429 of type requests with a Retry-After", i+1, 'a'+i%2, why)
			}
		}
	}

	var wg sync.WaitGroup
	made := make(chan string, 8)
	for i := range 8 {
		wg.Go(func() {
			c := client(reps[i%2], "one")
			cntr, err := c.Containers.New(ctx, openai.ContainerNewParams{Name: "the one"})
			if err == nil {
				made <- cntr.ID
				return
			}
			if why := tooMany(err, "containers"); why != "" {
				t.Errorf("a container past the key's one: %s; want a 429 of type containers", why)
			}
		})
	}
	wg.Wait()
	close(made)
	if n := len(made); n != 1 {
		t.Errorf("8 containers asked for at once on two replicas, for a key that may hold 1: %d made", n)
	}

	ta, tb := client(a, "tokens"), client(b, "tokens")
	hi := openai.ChatCompletionNewParams{Model: "test-model", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")}}
	if _, err := ta.Chat.Completions.New(ctx, hi); err != nil {
		t.Fatal(err)
	}
	_, err := tb.Chat.Completions.New(ctx, hi)
	if why := tooMany(err, "tokens"); why != "" {
		t.Errorf("on b, after the day's 100 tokens were used on a: %s; want a 429 of type tokens", why)
	}

	fa, fb := client(a, "fwd"), client(b, "fwd")
	cntr, err := fa.Containers.New(ctx, openai.ContainerNewParams{Name: "on a"})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if _, err := fb.Containers.Files.List(ctx, cntr.ID, openai.ContainerFileListParams{}); err != nil {
			t.Fatalf("request %d of rpm=4, through b to the container open in a: %v\na:\n%s\nb:\n%s", i+2, err, a.log, b.log)
		}
	}
	_, err = fb.Files.List(ctx, openai.FileListParams{})
	if why := tooMany(err, "requests"); why != "" {
		t.Errorf("the fifth request of rpm=4, to b: %s; want a 429 of type requests", why)
	}
}
