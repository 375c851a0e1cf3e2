package agent_test

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/terpdev/terp/internal/agent"
	"github.com/terpdev/terp/internal/llm"
	"github.com/terpdev/terp/internal/llm/llmtest"
	"github.com/terpdev/terp/internal/sandbox"
	"github.com/terpdev/terp/internal/sandbox/memory"
)

// weather is a client tool: the API client runs it, terp never does.
var weather = llm.Tool{
	Name:        "get_weather",
	Description: "The weather in a city now.",
	Parameters:  json.RawMessage(`{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}`),
}

// newMemoryAgent is an agent on the in-memory sandbox, whose Python
// stand-in runs the line language (print, write, cat).
func newMemoryAgent(t *testing.T, s *llmtest.Server, cfg agent.Config) *agent.Agent {
	t.Helper()
	b := memory.New(memory.Config{Programs: map[string]memory.Program{"python3": memory.PythonStandIn}})
	sbx, err := b.Create(context.Background(), sandbox.Options{})
	if err != nil {
		t.Fatal(err)
	}
	model := llm.New(llm.Config{BaseURL: s.BaseURL(), Stream: true, MaxRetries: -1})
	return agent.New(model, sbx, newScript(t, sbx), cfg)
}

func weatherCall(id, city string) llmtest.Call {
	return llmtest.Call{ID: id, Name: "get_weather", Arguments: `{"city":"` + city + `"}`}
}

// toolMessage is the content of the tool message that answers id, and
// whether there is one.
func toolMessage(req llmtest.Request, id string) (string, bool) {
	for _, m := range req.Messages {
		if m.Role == "tool" && m.ToolCallID == id {
			return m.Content, true
		}
	}
	return "", false
}

// answered fails the test unless every tool call in req has its tool
// message, as servers require.
func answered(t *testing.T, req llmtest.Request) {
	t.Helper()
	for _, m := range req.Messages {
		for _, c := range m.ToolCalls {
			if _, ok := toolMessage(req, c.ID); !ok {
				t.Errorf("call %s (%s) has no tool message: the server would reject this history", c.ID, c.Function.Name)
			}
		}
	}
}

// The model calls the client's tool: the turn ends with the call for the
// client to run, and Continue gives the model its output and goes on to the
// answer.
func TestClientToolCallEndsTheTurnAndContinueGoesOn(t *testing.T) {
	s := llmtest.New(t,
		func(req llmtest.Request) llmtest.Reply {
			var names []string
			for _, tool := range req.Tools {
				names = append(names, tool.Function.Name)
				if tool.Function.Name == "get_weather" && !strings.Contains(string(tool.Function.Parameters), `"city"`) {
					t.Errorf("get_weather is offered without its parameters: %s", tool.Function.Parameters)
				}
			}
			if !slices.Equal(names, []string{"run_python", "get_weather"}) {
				t.Errorf("tools offered = %v, want run_python and get_weather", names)
			}
			return llmtest.Reply{Content: "Let me look.", Calls: []llmtest.Call{weatherCall("call_w", "Paris")}}
		},
		func(req llmtest.Request) llmtest.Reply {
			answered(t, req)
			out, _ := toolMessage(req, "call_w")
			return llmtest.Answer("Paris: " + out)
		})
	var saved agent.Checkpoint
	a := newMemoryAgent(t, s, agent.Config{Model: "m", ClientTools: []llm.Tool{weather},
		Checkpoint: func(cp agent.Checkpoint) error { saved = cp; return nil }})
	var c collect
	res, err := a.Ask(context.Background(), "weather in Paris?", c.send)
	if err != nil || res.StopReason != "client_tool_calls" {
		t.Fatalf("Ask = %+v, %v; want it to stop on the client's call", res, err)
	}
	want := []llm.ToolCall{{ID: "call_w", Name: "get_weather", Arguments: `{"city":"Paris"}`}}
	if !slices.Equal(res.ClientCalls, want) || res.Answer != "Let me look." {
		t.Errorf("Result = %+v; want the call %+v and the text beside it", res, want)
	}
	var announced []agent.ToolCall
	for _, e := range c.events {
		switch e := e.(type) {
		case agent.ToolCall:
			announced = append(announced, e)
		case agent.ToolOutput, agent.Answer:
			t.Errorf("event %+v for a call terp does not run", e)
		}
	}
	if len(announced) != 1 || announced[0].Name != "get_weather" || announced[0].Code != "" || announced[0].Arguments != `{"city":"Paris"}` {
		t.Errorf("ToolCall events = %+v, want the client's call announced", announced)
	}
	if got := saved.Messages[len(saved.Messages)-1]; got.Role != llm.RoleAssistant || len(got.ToolCalls) != 1 || saved.TurnDone {
		t.Errorf("the last checkpoint ends with %+v (turn done: %v); want the open call saved, the question not done", got, saved.TurnDone)
	}

	res, err = a.Continue(context.Background(), []agent.ClientOutput{{CallID: "call_w", Output: "18°C and sunny"}}, "", nil)
	if err != nil || res.StopReason != agent.Answered || res.Answer != "Paris: 18°C and sunny" {
		t.Fatalf("Continue = %+v, %v; want the answer built on the client's output", res, err)
	}
	if len(a.PendingCalls()) != 0 || !saved.TurnDone {
		t.Errorf("after the answer: pending %v, turn done %v", a.PendingCalls(), saved.TurnDone)
	}
}

// A reply that calls run_python and the client's tool runs the code, then
// stops: the client's output and the code's go to the model together.
func TestMixedReplyRunsTheCodeAndStops(t *testing.T) {
	s := llmtest.New(t,
		llmtest.Fixed(llmtest.Reply{Calls: []llmtest.Call{
			{ID: "call_py", Name: "run_python", Arguments: `{"code":"write temps.csv 18\nprint computed"}`},
			weatherCall("call_w", "Oslo"),
		}}),
		func(req llmtest.Request) llmtest.Reply {
			answered(t, req)
			py, _ := toolMessage(req, "call_py")
			w, _ := toolMessage(req, "call_w")
			if !strings.Contains(py, `"stdout":"computed\n"`) {
				t.Errorf("run_python's result = %s", py)
			}
			return llmtest.Answer("Oslo: " + w)
		})
	a := newMemoryAgent(t, s, agent.Config{Model: "m", ClientTools: []llm.Tool{weather}})
	var c collect
	res, err := a.Ask(context.Background(), "go", c.send)
	if err != nil || res.StopReason != agent.ClientToolCalls || len(res.ClientCalls) != 1 || res.ClientCalls[0].ID != "call_w" {
		t.Fatalf("Ask = %+v, %v; want it to stop on the client's call alone", res, err)
	}
	if len(res.Files) != 1 || res.Files[0].Path != "temps.csv" {
		t.Errorf("files = %+v, want the one the code saved", res.Files)
	}
	var outputs []string
	for _, e := range c.events {
		if o, ok := e.(agent.ToolOutput); ok {
			outputs = append(outputs, o.ID+": "+o.Stdout)
		}
	}
	if !slices.Equal(outputs, []string{"call_py: computed\n"}) {
		t.Errorf("tool outputs shown = %q, want run_python's only", outputs)
	}
	if n := len(s.Requests()); n != 1 {
		t.Fatalf("%d requests before Continue, want the turn to stop after the code ran", n)
	}
	res, err = a.Continue(context.Background(), []agent.ClientOutput{{CallID: "call_w", Output: "-3°C"}}, "", nil)
	if err != nil || res.Answer != "Oslo: -3°C" {
		t.Fatalf("Continue = %+v, %v", res, err)
	}
}

// Outputs that do not answer the pending calls are refused with an error
// that names what is wrong; nothing is sent, and the calls still wait.
func TestContinueRefusesOutputsThatDoNotMatch(t *testing.T) {
	for _, tc := range []struct {
		name    string
		outputs []agent.ClientOutput
		says    []string
	}{
		{"unknown id", []agent.ClientOutput{{CallID: "call_nope"}, {CallID: "call_a"}, {CallID: "call_b"}}, []string{`"call_nope"`}},
		{"one missing", []agent.ClientOutput{{CallID: "call_a", Output: "sunny"}}, []string{"no output for", `"call_b" (get_weather)`}},
		{"none", nil, []string{`"call_a"`, `"call_b"`}},
		{"twice", []agent.ClientOutput{{CallID: "call_a"}, {CallID: "call_a"}, {CallID: "call_b"}}, []string{"twice", `"call_a"`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := llmtest.New(t,
				llmtest.Fixed(llmtest.Reply{Calls: []llmtest.Call{weatherCall("call_a", "Rome"), weatherCall("call_b", "Bern")}}),
				func(req llmtest.Request) llmtest.Reply {
					answered(t, req)
					a, _ := toolMessage(req, "call_a")
					b, _ := toolMessage(req, "call_b")
					return llmtest.Answer(a + ", " + b)
				})
			a := newMemoryAgent(t, s, agent.Config{Model: "m", ClientTools: []llm.Tool{weather}})
			if _, err := a.Ask(context.Background(), "Rome and Bern?", nil); err != nil {
				t.Fatal(err)
			}
			_, err := a.Continue(context.Background(), tc.outputs, "", nil)
			if !errors.Is(err, agent.ErrUnmatchedOutputs) {
				t.Fatalf("Continue = %v, want ErrUnmatchedOutputs", err)
			}
			for _, want := range tc.says {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not say %s", err, want)
				}
			}
			if n := len(s.Requests()); n != 1 {
				t.Errorf("%d requests, want none sent for outputs that do not match", n-1)
			}
			res, err := a.Continue(context.Background(), []agent.ClientOutput{{CallID: "call_b", Output: "cold"}, {CallID: "call_a", Output: "warm"}}, "", nil)
			if err != nil || res.Answer != "warm, cold" {
				t.Errorf("Continue after the refusal = %+v, %v; want the calls still pending", res, err)
			}
		})
	}
}

// A new question instead of the client's outputs closes the open calls:
// the history the model gets answers every call and still alternates, and
// says that no result came.
func TestAskAfterAnUnansweredClientCall(t *testing.T) {
	s := llmtest.New(t,
		llmtest.Fixed(llmtest.Reply{Calls: []llmtest.Call{weatherCall("call_w", "Lima")}}),
		func(req llmtest.Request) llmtest.Reply {
			answered(t, req)
			alternates(t, req)
			out, _ := toolMessage(req, "call_w")
			if !strings.Contains(out, "no result") {
				t.Errorf("the open call is answered with %q, want it to say no result came", out)
			}
			return llmtest.Answer("ok: " + req.LastUser())
		})
	a := newMemoryAgent(t, s, agent.Config{Model: "m", ClientTools: []llm.Tool{weather}})
	if res, err := a.Ask(context.Background(), "Lima?", nil); err != nil || res.StopReason != agent.ClientToolCalls {
		t.Fatalf("Ask = %+v, %v", res, err)
	}
	res, err := a.Ask(context.Background(), "never mind", nil)
	if err != nil || res.Answer != "ok: never mind" {
		t.Fatalf("Ask = %+v, %v", res, err)
	}
	if _, err := a.Continue(context.Background(), []agent.ClientOutput{{CallID: "call_w"}}, "", nil); !errors.Is(err, agent.ErrUnmatchedOutputs) {
		t.Errorf("Continue on a closed call = %v, want it refused", err)
	}
}

// Outputs that come with a new question are both read by the model, in a
// history that still alternates.
func TestContinueWithAQuestion(t *testing.T) {
	s := llmtest.New(t,
		llmtest.Fixed(llmtest.Reply{Calls: []llmtest.Call{weatherCall("call_w", "Kyiv")}}),
		func(req llmtest.Request) llmtest.Reply {
			answered(t, req)
			alternates(t, req)
			out, _ := toolMessage(req, "call_w")
			return llmtest.Answer(out + " / " + req.LastUser())
		})
	a := newMemoryAgent(t, s, agent.Config{Model: "m", ClientTools: []llm.Tool{weather}})
	if _, err := a.Ask(context.Background(), "Kyiv?", nil); err != nil {
		t.Fatal(err)
	}
	res, err := a.Continue(context.Background(), []agent.ClientOutput{{CallID: "call_w", Output: "rain"}}, "and tomorrow?", nil)
	if err != nil || res.Answer != "rain / and tomorrow?" {
		t.Fatalf("Continue = %+v, %v", res, err)
	}
}

// A client tool named like terp's own is refused, in the configuration and
// when set later; nothing reaches the model.
func TestClientToolNamedRunPythonIsRefused(t *testing.T) {
	s := llmtest.New(t)
	clash := []llm.Tool{weather, {Name: "run_python", Description: "mine"}}
	a := newMemoryAgent(t, s, agent.Config{Model: "m", ClientTools: clash})
	res, err := a.Ask(context.Background(), "hi", nil)
	if err == nil || !strings.Contains(err.Error(), `"run_python"`) || res.StopReason != agent.Errored {
		t.Errorf("Ask with a clashing tool = %+v, %v; want an error naming it", res, err)
	}
	if err := a.SetClientTools(clash); err == nil || !strings.Contains(err.Error(), "run_python") {
		t.Errorf("SetClientTools = %v, want the clash refused", err)
	}
	if err := a.SetClientTools([]llm.Tool{weather, weather}); err == nil || !strings.Contains(err.Error(), "get_weather") {
		t.Errorf("SetClientTools with a tool twice = %v, want it refused", err)
	}
	if len(s.Requests()) != 0 {
		t.Errorf("the model got %d requests", len(s.Requests()))
	}
}

// Where the server takes no tools, the model is told of the client's tools
// in the system prompt, a call it writes as text is the client's call, and
// the output comes back as text.
func TestClientToolInTextDialect(t *testing.T) {
	s := llmtest.New(t,
		func(req llmtest.Request) llmtest.Reply {
			if len(req.Tools) != 0 {
				t.Errorf("text mode sent %d tools", len(req.Tools))
			}
			if sys := req.Messages[0].Content; !strings.Contains(sys, "get_weather: The weather in a city now.") || !strings.Contains(sys, "<tool_call>") {
				t.Errorf("the system prompt does not describe the client's tool:\n%s", sys)
			}
			return llmtest.Answer("<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Quito\"}}\n</tool_call>")
		},
		func(req llmtest.Request) llmtest.Reply {
			last := req.Messages[len(req.Messages)-1]
			out, ok := strings.CutPrefix(last.Content, "Output of get_weather:\n")
			if last.Role != "user" || !ok {
				t.Fatalf("last message = %+v, want the client's output as text", last)
			}
			return llmtest.Answer("Quito: " + out)
		})
	a := newMemoryAgent(t, s, agent.Config{Model: "m", Dialect: llm.DialectText, ClientTools: []llm.Tool{weather}})
	res, err := a.Ask(context.Background(), "Quito?", nil)
	if err != nil || res.StopReason != agent.ClientToolCalls || len(res.ClientCalls) != 1 ||
		res.ClientCalls[0].Name != "get_weather" || res.ClientCalls[0].Arguments != `{"city":"Quito"}` {
		t.Fatalf("Ask = %+v, %v; want the written call as the client's", res, err)
	}
	res, err = a.Continue(context.Background(), []agent.ClientOutput{{CallID: res.ClientCalls[0].ID, Output: "mild"}}, "", nil)
	if err != nil || res.Answer != "Quito: mild" {
		t.Fatalf("Continue = %+v, %v", res, err)
	}
}

// A conversation stored with its client call open goes on after Restore.
func TestRestoreKeepsTheClientCallPending(t *testing.T) {
	s := llmtest.New(t,
		llmtest.Fixed(llmtest.Reply{Calls: []llmtest.Call{weatherCall("call_w", "Baku")}}),
		func(req llmtest.Request) llmtest.Reply {
			answered(t, req)
			out, _ := toolMessage(req, "call_w")
			return llmtest.Answer("Baku: " + out)
		})
	var saved agent.Checkpoint
	first := newMemoryAgent(t, s, agent.Config{Model: "m", ClientTools: []llm.Tool{weather},
		Checkpoint: func(cp agent.Checkpoint) error { saved = cp; return nil }})
	if _, err := first.Ask(context.Background(), "Baku?", nil); err != nil {
		t.Fatal(err)
	}
	again := newMemoryAgent(t, s, agent.Config{Model: "m", ClientTools: []llm.Tool{weather}})
	if err := again.Restore(context.Background(), saved.Messages, saved.Usage, saved.Steps); err != nil {
		t.Fatal(err)
	}
	if p := again.PendingCalls(); len(p) != 1 || p[0].ID != "call_w" {
		t.Fatalf("pending after Restore = %+v", p)
	}
	res, err := again.Continue(context.Background(), []agent.ClientOutput{{CallID: "call_w", Output: "windy"}}, "", nil)
	if err != nil || res.Answer != "Baku: windy" {
		t.Fatalf("Continue = %+v, %v", res, err)
	}
}

// A turn cancelled while its code runs, in a reply that also called the
// client's tool, leaves no call open: the next question's history answers
// them all, the client's as never passed on.
func TestCancelledMixedReplyClosesTheClientCall(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s := llmtest.New(t,
		llmtest.Fixed(llmtest.Reply{Calls: []llmtest.Call{
			weatherCall("call_w", "Doha"),
			{ID: "call_py", Name: "run_python", Arguments: `{"code":"sleep 1h"}`},
		}}),
		func(req llmtest.Request) llmtest.Reply {
			answered(t, req)
			alternates(t, req)
			out, _ := toolMessage(req, "call_w")
			return llmtest.Answer(out)
		})
	a := newMemoryAgent(t, s, agent.Config{Model: "m", ClientTools: []llm.Tool{weather}})
	res, err := a.Ask(ctx, "Doha?", func(e agent.Event) {
		if c, ok := e.(agent.ToolCall); ok && c.ID == "call_py" {
			cancel() // Ctrl+C as the code starts
		}
	})
	if !errors.Is(err, context.Canceled) || res.StopReason != agent.Cancelled || len(res.ClientCalls) != 0 {
		t.Fatalf("Ask = %+v, %v; want it cancelled with nothing left for the client", res, err)
	}
	res, err = a.Ask(context.Background(), "again", nil)
	if err != nil || !strings.Contains(res.Answer, "not passed to the client") {
		t.Fatalf("Ask = %+v, %v; want the model told the call was never passed on", res, err)
	}
}
