package conversation

import (
	"encoding/json"
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/terpdev/terp/internal/llm"
	"github.com/terpdev/terp/internal/llm/llmtest"
)

// questions are the user messages a request carries.
func questions(r llmtest.Request) []string {
	var out []string
	for _, m := range r.Messages {
		if m.Role == "user" {
			out = append(out, m.Content)
		}
	}
	return out
}

// tools are the names of the tools a request offers.
func tools(r llmtest.Request) []string {
	var out []string
	for _, t := range r.Tools {
		out = append(out, t.Function.Name)
	}
	return out
}

// The settings a turn brings apply to that turn and hold for the following
// ones: a model, the client's tools, the history to go on from (an earlier
// turn's, or none, with /work kept); a turn that brings none keeps the
// conversation's.
func TestTurnRequestSettings(t *testing.T) {
	tests := []struct {
		name string
		req  func(first Turn) TurnRequest
		// model and tools are what the turn and the next are asked with.
		model string
		tools []string
		// heard and unheard are earlier questions the turn's request
		// carries, and does not.
		heard, unheard []string
	}{
		{name: "nothing", req: func(Turn) TurnRequest { return TurnRequest{} },
			model: "chat-model", tools: []string{"run_python"}, heard: []string{"one", "two"}},
		{name: "a model", req: func(Turn) TurnRequest { return TurnRequest{Model: "other-model"} },
			model: "other-model", tools: []string{"run_python"}, heard: []string{"one", "two"}},
		{name: "client tools", req: func(Turn) TurnRequest { return TurnRequest{ClientTools: &[]llm.Tool{weather}} },
			model: "chat-model", tools: []string{"run_python", "get_weather"}, heard: []string{"one", "two"}},
		{name: "a rewind to the first turn", req: func(first Turn) TurnRequest { return TurnRequest{Rewind: &first.History} },
			model: "chat-model", tools: []string{"run_python"}, heard: []string{"one"}, unheard: []string{"two"}},
		{name: "a rewind to nothing", req: func(Turn) TurnRequest { return TurnRequest{Rewind: &[]llm.Message{}} },
			model: "chat-model", tools: []string{"run_python"}, unheard: []string{"one", "two"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			answer := llmtest.Fixed(llmtest.Answer("a"))
			s := llmtest.New(t, answer, answer, answer, answer)
			w := newWorld(t, s)
			c, err := w.svc.Open(ctx(t), w.cfg, Options{Origin: "serve"})
			if err != nil {
				t.Fatal(err)
			}
			closeQuietly(t, c)
			first, err := c.Ask(ctx(t), "one", nil)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := c.Ask(ctx(t), "two", nil); err != nil {
				t.Fatal(err)
			}
			req := tt.req(first)
			req.Question = "three"
			turn, err := c.Turn(ctx(t), req)
			if err != nil {
				t.Fatal(err)
			}
			if h, err := c.History(ctx(t)); err != nil || !reflect.DeepEqual(h, turn.History) {
				t.Errorf("Turn.History = %+v; History after it = %+v, %v", turn.History, h, err)
			}
			if info := c.Info(); info.Model != tt.model {
				t.Errorf("Info().Model = %q after the turn, want %q", info.Model, tt.model)
			}
			if _, err := c.Ask(ctx(t), "four", nil); err != nil {
				t.Fatal(err)
			}
			reqs := s.Requests()
			three, four := reqs[2], reqs[3]
			for _, r := range []llmtest.Request{three, four} {
				if r.Model != tt.model || !slices.Equal(tools(r), tt.tools) {
					t.Errorf("%q went to %q with tools %q; want %q with %q", r.LastUser(), r.Model, tools(r), tt.model, tt.tools)
				}
			}
			for _, q := range tt.heard {
				if !slices.Contains(questions(three), q) {
					t.Errorf("the turn's request lacks %q: %q", q, questions(three))
				}
			}
			for _, q := range tt.unheard {
				if slices.Contains(questions(three), q) || slices.Contains(questions(four), q) {
					t.Errorf("the turns after the rewind still carry %q: %q", q, questions(four))
				}
			}
			if got := questions(four); !slices.Contains(got, "three") {
				t.Errorf("the next turn does not go on from the turn: %q", got)
			}
		})
	}
}

// A turn that is refused, because another runs or because its tools cannot
// be offered, changes none of the settings it brings: the next turn goes to
// the same model with the same tools and history as before.
func TestRefusedTurnChangesNothing(t *testing.T) {
	brings := TurnRequest{Question: "refused", Model: "other-model", ClientTools: &[]llm.Tool{weather}, Rewind: &[]llm.Message{}}
	clash := brings
	clash.ClientTools = &[]llm.Tool{weather, {Name: "run_python"}}
	tests := []struct {
		name    string
		busy    bool
		req     TurnRequest
		refusal func(error) bool
	}{
		{"while another turn runs", true, brings, func(err error) bool { return errors.Is(err, ErrBusy) }},
		{"with run_python among the client's tools", false, clash, func(err error) bool {
			var in *InputError
			return errors.As(err, &in) && strings.Contains(err.Error(), "run_python")
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, s, release, done := heldTurn(t, llmtest.Fixed(llmtest.Answer("after")))
			if !tt.busy {
				release()
				if err := <-done; err != nil {
					t.Fatal(err)
				}
			}
			turn, err := c.Turn(ctx(t), tt.req)
			if !tt.refusal(err) || turn.History != nil {
				t.Errorf("Turn = %+v, %v; want it refused", turn, err)
			}
			if info := c.Info(); info.Model != "chat-model" {
				t.Errorf("the refused turn switched the model to %q", info.Model)
			}
			if tt.busy {
				release()
				if err := <-done; err != nil {
					t.Fatal(err)
				}
			}
			if _, err := c.Ask(ctx(t), "after", nil); err != nil {
				t.Fatal(err)
			}
			reqs := s.Requests()
			if len(reqs) != 2 {
				t.Fatalf("the model got %d requests, want the first turn's and the one after", len(reqs))
			}
			after := reqs[1]
			if after.Model != "chat-model" || !slices.Equal(tools(after), []string{"run_python"}) ||
				!slices.Equal(questions(after), []string{"one", "after"}) {
				t.Errorf("after the refusal: model %q, tools %q, questions %q; want chat-model, run_python, one and after",
					after.Model, tools(after), questions(after))
			}
		})
	}
}

// A rewind to the history the conversation has already, as terp serve
// gives with every turn (kept as JSON, tool calls and all), is none: it
// saves nothing, and the turn goes on from that history.
func TestRewindToTheSameHistoryIsNone(t *testing.T) {
	s := llmtest.New(t, llmtest.Fixed(llmtest.RunPython("print hi")), llmtest.Fixed(llmtest.Answer("a")),
		llmtest.Fixed(llmtest.Answer("b")))
	w := newWorld(t, s)
	st := &testStore{Store: w.store}
	w.svc.store = st
	c, err := w.svc.Open(ctx(t), w.cfg, Options{Origin: "serve", KeepFiles: true})
	if err != nil {
		t.Fatal(err)
	}
	closeQuietly(t, c)
	first, err := c.Ask(ctx(t), "one", nil)
	if err != nil {
		t.Fatal(err)
	}
	var kept []llm.Message
	if b, err := json.Marshal(first.History); err != nil || json.Unmarshal(b, &kept) != nil {
		t.Fatalf("the history does not go through JSON: %v", err)
	}
	saves := st.saves.Load()
	if err := c.Rewind(ctx(t), kept); err != nil {
		t.Fatal(err)
	}
	if n := st.saves.Load() - saves; n != 0 {
		t.Errorf("a rewind to the history the conversation has saved the record %d times", n)
	}
	if _, err := c.Turn(ctx(t), TurnRequest{Question: "two", Rewind: &kept}); err != nil {
		t.Fatal(err)
	}
	if got := questions(s.Requests()[2]); !slices.Equal(got, []string{"one", "two"}) {
		t.Errorf("the turn after the rewind carries the questions %q, want one and two", got)
	}
}
