package conversation

import (
	"encoding/json"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/terpdev/terp/internal/agent"
	"github.com/terpdev/terp/internal/llm"
	"github.com/terpdev/terp/internal/llm/llmtest"
)

var weather = llm.Tool{
	Name:        "get_weather",
	Description: "The weather in a city now.",
	Parameters:  json.RawMessage(`{"type":"object","properties":{"city":{"type":"string"}}}`),
}

// A turn that ends on the client's tool call is stored with the call open:
// a later process resumes the conversation and goes on with the call's
// output, to code that runs and a file that is downloaded, as after Ask.
func TestContinueAcrossCloseAndResume(t *testing.T) {
	s := llmtest.New(t,
		llmtest.Fixed(llmtest.Reply{Calls: []llmtest.Call{{ID: "call_w", Name: "get_weather", Arguments: `{"city":"Nice"}`}}}),
		func(req llmtest.Request) llmtest.Reply {
			last := req.Messages[len(req.Messages)-1]
			if last.Role != "tool" || last.ToolCallID != "call_w" {
				t.Errorf("last message = %+v, want the client's output for call_w", last)
			}
			return llmtest.RunPython("write weather.txt " + last.Content)
		},
		func(req llmtest.Request) llmtest.Reply {
			res, _ := req.ToolResult()
			return llmtest.Answer("saved " + strings.Join(res.Files, ","))
		})
	w := newWorld(t, s)
	c, err := w.svc.Open(ctx(t), w.cfg, Options{Origin: "serve"})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.SetClientTools(ctx(t), []llm.Tool{weather}); err != nil {
		t.Fatal(err)
	}
	turn, err := c.Ask(ctx(t), "weather in Nice, to a file", nil)
	if err != nil || turn.Result.StopReason != agent.ClientToolCalls || len(turn.Result.ClientCalls) != 1 {
		t.Fatalf("Ask = %+v, %v; want it to wait on the client's call", turn, err)
	}
	id := c.ID
	if warnings := c.Close(ctx(t)); len(warnings) != 0 {
		t.Errorf("Close warned: %q", warnings)
	}

	again, err := w.svc.Resume(ctx(t), w.cfg, id)
	if err != nil {
		t.Fatal(err)
	}
	closeQuietly(t, again)
	if p, err := again.PendingCalls(ctx(t)); err != nil || len(p) != 1 || p[0].ID != "call_w" || p[0].Name != "get_weather" {
		t.Fatalf("pending after Resume = %+v, %v; want the stored call", p, err)
	}
	if err := again.SetClientTools(ctx(t), []llm.Tool{weather}); err != nil {
		t.Fatal(err)
	}
	if _, err := again.Continue(ctx(t), []agent.ClientOutput{{CallID: "call_x", Output: "?"}}, "", nil); !errors.Is(err, agent.ErrUnmatchedOutputs) ||
		!strings.Contains(err.Error(), "call_x") {
		t.Errorf("Continue with a wrong id = %v, want it refused by name", err)
	}
	turn, err = again.Continue(ctx(t), []agent.ClientOutput{{CallID: "call_w", Output: "sunny"}}, "", nil)
	if err != nil || turn.Result.Answer != "saved weather.txt" {
		t.Fatalf("Continue = %+v, %v", turn, err)
	}
	if len(turn.Files) != 1 {
		t.Fatalf("downloaded %+v, want weather.txt", turn.Files)
	}
	if b, _ := os.ReadFile(turn.Files[0].Path); string(b) != "sunny" {
		t.Errorf("%s holds %q, want the client's output", turn.Files[0].Path, b)
	}
	rec, err := w.store.Load(id)
	if err != nil {
		t.Fatal(err)
	}
	if rec.Turns != 1 {
		t.Errorf("stored %d turns, want the one question counted once", rec.Turns)
	}
}

// A tool named like terp's own is refused, and the conversation's turns
// go on without it.
func TestSetClientToolsRefusesAClash(t *testing.T) {
	s := llmtest.New(t, func(req llmtest.Request) llmtest.Reply {
		if len(req.Tools) != 1 {
			t.Errorf("%d tools offered, want run_python alone", len(req.Tools))
		}
		return llmtest.Answer("ok")
	})
	w := newWorld(t, s)
	c, err := w.svc.Open(ctx(t), w.cfg, Options{Origin: "serve"})
	if err != nil {
		t.Fatal(err)
	}
	closeQuietly(t, c)
	if err := c.SetClientTools(ctx(t), []llm.Tool{{Name: "run_python"}}); err == nil || !strings.Contains(err.Error(), "run_python") {
		t.Errorf("SetClientTools = %v, want the clash refused", err)
	}
	if turn, err := c.Ask(ctx(t), "hi", nil); err != nil || turn.Result.Answer != "ok" {
		t.Errorf("Ask = %+v, %v", turn, err)
	}
}
