package cli

import (
	"context"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"

	"github.com/terpdev/terp/internal/llm/llmtest"
	"github.com/terpdev/terp/internal/postgres/pgtest"
	"github.com/terpdev/terp/internal/serve/openaiapi"
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
