package openaiapi

import (
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/responses"

	"github.com/terpdev/terp/internal/llm/llmtest"
)

// weatherTool is a function tool of the client's own.
var weatherTool = responses.ToolParamOfFunction("get_weather", map[string]any{
	"type": "object", "properties": map[string]any{"city": map[string]any{"type": "string"}}}, false)

// callsWeather is the scripted model calling get_weather for Paris.
var callsWeather = llmtest.Fixed(llmtest.Reply{Calls: []llmtest.Call{{ID: "call_1", Name: "get_weather", Arguments: `{"city":"Paris"}`}}})

// A Responses request with function tools and no code_interpreter is an
// adapter onto the model server: the call comes out as a function_call
// item, its output goes back as a tool message, and no container is made.
func TestResponsesFunctionToolsAlone(t *testing.T) {
	s := llmtest.New(t, callsWeather,
		func(req llmtest.Request) llmtest.Reply {
			last := req.Messages[len(req.Messages)-1]
			if last.Role != "tool" || last.Content != "sunny, 21 C" || last.ToolCallID != "call_1" {
				t.Errorf("the model got %+v; want the client's output", last)
			}
			if req.Messages[0].Role != "system" || req.Messages[0].Content != "Be brief." {
				t.Errorf("the system message is %+v; want the instructions alone", req.Messages[0])
			}
			return llmtest.Answer("Paris: " + last.Content)
		})
	ts := newTestServer(t, s)
	client := ts.client(aliceKey)
	tools := []responses.ToolUnionParam{weatherTool}
	first, err := client.Responses.New(ctx(t), responses.ResponseNewParams{Model: "test-model", Tools: tools, Instructions: openai.String("Be brief."),
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("Weather in Paris?")}})
	if err != nil {
		t.Fatal(err)
	}
	if len(first.Output) != 1 || first.Output[0].Type != "function_call" {
		t.Fatalf("output %s; want one function_call", first.RawJSON())
	}
	call := first.Output[0].AsFunctionCall()
	if call.Name != "get_weather" || call.Arguments != `{"city":"Paris"}` || call.CallID != "call_1" || first.Status != "completed" {
		t.Fatalf("function_call = %+v, status %s", call, first.Status)
	}
	if len(s.Requests()[0].Tools) != 1 || s.Requests()[0].Tools[0].Function.Name != "get_weather" {
		t.Errorf("upstream was offered %+v; want the client's tool alone", s.Requests()[0].Tools)
	}
	second, err := client.Responses.New(ctx(t), responses.ResponseNewParams{Model: "test-model", Tools: tools, Instructions: openai.String("Be brief."),
		PreviousResponseID: openai.String(first.ID),
		Input: responses.ResponseNewParamsInputUnion{OfInputItemList: responses.ResponseInputParam{
			{OfFunctionCallOutput: &responses.ResponseInputItemFunctionCallOutputParam{CallID: openai.String(call.CallID),
				Output: responses.ResponseInputItemFunctionCallOutputOutputUnionParam{OfString: openai.String("sunny, 21 C")}}}}}})
	if err != nil {
		t.Fatal(err)
	}
	if second.OutputText() != "Paris: sunny, 21 C" || second.Usage.TotalTokens == 0 {
		t.Errorf("answered %q, usage %+v", second.OutputText(), second.Usage)
	}
	list, err := client.Containers.List(ctx(t), openai.ContainerListParams{})
	if err != nil || len(list.Data) != 0 {
		t.Errorf("containers %+v, %v; the adapter opens none", list.Data, err)
	}
}

// Streamed, the adapter sends OpenAI's events for a function call, its
// arguments as the model writes them; a client that keeps no state (Codex)
// sends the whole history as input instead of previous_response_id.
func TestResponsesFunctionToolsAloneStreamed(t *testing.T) {
	s := llmtest.New(t, callsWeather, func(req llmtest.Request) llmtest.Reply {
		if n := len(req.Messages); n < 3 || req.Messages[n-2].Role != "assistant" || len(req.Messages[n-2].ToolCalls) != 1 || req.Messages[n-1].Role != "tool" {
			t.Errorf("the history as the client sent it did not reach the model: %+v", req.Messages)
		}
		return llmtest.Answer("Sunny in Paris.")
	})
	ts := newTestServer(t, s)
	client := ts.client(aliceKey)
	stream := client.Responses.NewStreaming(ctx(t), responses.ResponseNewParams{Model: "test-model", Tools: []responses.ToolUnionParam{weatherTool},
		Store: openai.Bool(false), Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("Weather in Paris?")}})
	var types []string
	var args strings.Builder
	var done responses.Response
	for stream.Next() {
		e := stream.Current()
		types = append(types, e.Type)
		switch e.Type {
		case "response.function_call_arguments.delta":
			args.WriteString(e.Delta)
		case "response.completed":
			done = e.Response
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	want := []string{"response.created", "response.in_progress", "response.output_item.added", "response.function_call_arguments.delta",
		"response.function_call_arguments.done", "response.output_item.done", "response.completed"}
	if got := compact(types); strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("events %v; want %v (deltas folded)", got, want)
	}
	if args.String() != `{"city":"Paris"}` || len(done.Output) != 1 || done.Output[0].AsFunctionCall().Arguments != `{"city":"Paris"}` {
		t.Errorf("arguments streamed %q, completed %s", args.String(), done.RawJSON())
	}
	// The next request, as Codex sends it: everything again as input.
	text := client.Responses.NewStreaming(ctx(t), responses.ResponseNewParams{Model: "test-model", Tools: []responses.ToolUnionParam{weatherTool},
		Store: openai.Bool(false), Input: responses.ResponseNewParamsInputUnion{OfInputItemList: responses.ResponseInputParam{
			responses.ResponseInputItemParamOfMessage("Weather in Paris?", responses.EasyInputMessageRoleUser),
			responses.ResponseInputItemParamOfFunctionCall(`{"city":"Paris"}`, "call_1", "get_weather"),
			{OfFunctionCallOutput: &responses.ResponseInputItemFunctionCallOutputParam{CallID: openai.String("call_1"),
				Output: responses.ResponseInputItemFunctionCallOutputOutputUnionParam{OfString: openai.String("sunny")}}}}}})
	var said strings.Builder
	for text.Next() {
		if e := text.Current(); e.Type == "response.output_text.delta" {
			said.WriteString(e.Delta)
		}
	}
	if err := text.Err(); err != nil || said.String() != "Sunny in Paris." {
		t.Errorf("streamed %q, %v", said.String(), err)
	}
}

// compact folds runs of the same event into one.
func compact(types []string) []string {
	var out []string
	for _, t := range types {
		if len(out) == 0 || out[len(out)-1] != t {
			out = append(out, t)
		}
	}
	return out
}
