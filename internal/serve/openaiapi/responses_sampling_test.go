package openaiapi

import (
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/responses"

	"github.com/terpdev/terp/internal/llm/llmtest"
)

// A response's sampling settings reach every model request of its turn, as
// given (a temperature of 0 too); its instructions follow terp's system
// prompt; max_output_tokens bounds each request by what is left of it.
func TestResponsesSamplingReachesTheModel(t *testing.T) {
	s := llmtest.New(t,
		llmtest.Fixed(llmtest.Reply{Calls: []llmtest.Call{{Name: "run_python", Arguments: `{"code": "print(1)"}`}}, CompletionTokens: 30}),
		llmtest.Fixed(llmtest.Reply{Content: "Un.", CompletionTokens: 5}))
	ts := newTestServer(t, s)
	client := ts.client(aliceKey)
	resp, err := client.Responses.New(ctx(t), responses.ResponseNewParams{
		Model:           "test-model",
		Input:           responses.ResponseNewParamsInputUnion{OfString: openai.String("Print one.")},
		Instructions:    openai.String("Answer in French."),
		Temperature:     openai.Float(0),
		TopP:            openai.Float(0.5),
		MaxOutputTokens: openai.Int(100),
		Tools:           []responses.ToolUnionParam{codeInterpreter()},
	})
	if err != nil {
		t.Fatal(err)
	}
	if resp.Status != responses.ResponseStatusCompleted || resp.Temperature != 0 || resp.TopP != 0.5 {
		t.Errorf("status %s, temperature %v, top_p %v", resp.Status, resp.Temperature, resp.TopP)
	}
	reqs := s.Requests()
	if len(reqs) != 2 {
		t.Fatalf("%d model requests, want 2", len(reqs))
	}
	for i, want := range []int{100, 70} {
		r := reqs[i]
		if r.Temperature == nil || *r.Temperature != 0 || r.TopP == nil || *r.TopP != 0.5 || r.MaxTokens != want {
			t.Errorf("request %d: temperature %v, top_p %v, max_tokens %d; want 0, 0.5, %d", i, r.Temperature, r.TopP, r.MaxTokens, want)
		}
		if !strings.HasSuffix(r.Messages[0].Content, "\n\nAnswer in French.") || strings.Contains(r.LastUser(), "French") {
			t.Errorf("request %d: the instructions are not the system prompt's end: %q / %q", i, r.Messages[0].Content, r.LastUser())
		}
	}
}

// A turn that writes max_output_tokens ends incomplete, as OpenAI's do.
func TestResponsesMaxOutputTokensEndsTheTurn(t *testing.T) {
	s := llmtest.New(t, llmtest.Fixed(llmtest.Reply{Calls: []llmtest.Call{{Name: "run_python", Arguments: `{"code": "print(1)"}`}}, CompletionTokens: 40}))
	ts := newTestServer(t, s)
	client := ts.client(aliceKey)
	resp, err := client.Responses.New(ctx(t), responses.ResponseNewParams{
		Model:           "test-model",
		Input:           responses.ResponseNewParamsInputUnion{OfString: openai.String("Loop.")},
		MaxOutputTokens: openai.Int(32),
		Tools:           []responses.ToolUnionParam{codeInterpreter()},
	})
	if err != nil {
		t.Fatal(err)
	}
	if resp.Status != responses.ResponseStatusIncomplete || resp.IncompleteDetails.Reason != "max_output_tokens" {
		t.Errorf("status %s, incomplete %+v; want incomplete for max_output_tokens", resp.Status, resp.IncompleteDetails)
	}
	if n := len(s.Requests()); n != 1 {
		t.Errorf("the model was asked %d times; the budget was used by the first reply", n)
	}
}
