package openaiapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"

	"github.com/terpdev/terp/internal/llm/llmtest"
	"github.com/terpdev/terp/internal/serve"
	"github.com/terpdev/terp/internal/serve/servetest"
	"github.com/terpdev/terp/internal/store"
	"github.com/terpdev/terp/internal/terptest"
)

// The keys the test servers accept, and whose they are.
const (
	aliceKey = servetest.AliceKey
	bobKey   = servetest.BobKey
)

// testServer is terp serve on the real local sandbox, in front of the
// scripted model s, over real HTTP.
type testServer struct {
	*httptest.Server
	srv   *serve.Server
	store store.Store
}

func newTestServer(t *testing.T, s *llmtest.Server, change ...func(*serve.Config)) *testServer {
	t.Helper()
	sc, st := servetest.Config(t, terptest.TempDir(t), servetest.Options{ModelURL: s.BaseURL()})
	for _, ch := range change {
		ch(&sc)
	}
	hs, srv := servetest.Start(t, sc, func(srv *serve.Server) { Register(srv, Options{}) })
	return &testServer{Server: hs, srv: srv, store: st}
}

// client is the official OpenAI Go SDK pointed at the server with key.
func (ts *testServer) client(key string) openai.Client {
	return openai.NewClient(option.WithBaseURL(ts.URL+"/v1"), option.WithAPIKey(key), option.WithMaxRetries(0))
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return c
}

// codeInterpreter is the tool as an OpenAI user writes it.
func codeInterpreter(fileIDs ...string) responses.ToolUnionParam {
	return responses.ToolParamOfCodeInterpreter(responses.ToolCodeInterpreterContainerCodeInterpreterContainerAutoParam{FileIDs: fileIDs})
}

// answerFromTool answers with what the last run printed.
func answerFromTool(prefix string) llmtest.Step {
	return func(req llmtest.Request) llmtest.Reply {
		res, _ := req.ToolResult()
		return llmtest.Answer(prefix + strings.TrimSpace(res.Stdout))
	}
}

// An app written for OpenAI's hosted code interpreter gets the code, its
// output and the answer computed from it, in the SDK's own types; a
// follow-up by previous_response_id sees a variable the first run set.
func TestResponsesCodeInterpreter(t *testing.T) {
	s := llmtest.New(t,
		llmtest.Fixed(llmtest.RunPython("x = 6 * 7\nprint(x)")),
		answerFromTool("The answer is "),
		func(req llmtest.Request) llmtest.Reply {
			if !slices.ContainsFunc(req.Messages, func(m llmtest.Message) bool {
				return len(m.ToolCalls) > 0 && strings.Contains(m.ToolCalls[0].Function.Arguments, "x = 6 * 7")
			}) {
				t.Error("the follow-up's model does not see the first response's code")
			}
			return llmtest.RunPython("print(x + 1)")
		},
		answerFromTool("Then "))
	ts := newTestServer(t, s)
	client := ts.client(aliceKey)
	first, err := client.Responses.New(ctx(t), responses.ResponseNewParams{
		Model:   "test-model",
		Input:   responses.ResponseNewParamsInputUnion{OfString: openai.String("What is 6 times 7? Compute it.")},
		Tools:   []responses.ToolUnionParam{codeInterpreter()},
		Include: []responses.ResponseIncludable{responses.ResponseIncludableCodeInterpreterCallOutputs},
	})
	if err != nil {
		t.Fatal(err)
	}
	if first.Status != responses.ResponseStatusCompleted || first.OutputText() != "The answer is 42" {
		t.Fatalf("status %q, text %q", first.Status, first.OutputText())
	}
	var call responses.ResponseCodeInterpreterToolCall
	for _, item := range first.Output {
		if item.Type == "code_interpreter_call" {
			call = item.AsCodeInterpreterCall()
		}
	}
	if call.Code != "x = 6 * 7\nprint(x)" || !strings.HasPrefix(call.ContainerID, "cntr_") || call.Status != "completed" {
		t.Errorf("code_interpreter_call = %+v", call)
	}
	if len(call.Outputs) == 0 || call.Outputs[0].AsLogs().Logs != "42\n" {
		t.Errorf("the call's outputs = %+v, want the logs 42", call.Outputs)
	}
	if first.Usage.TotalTokens == 0 {
		t.Error("no usage")
	}

	second, err := client.Responses.New(ctx(t), responses.ResponseNewParams{
		Model:              "test-model",
		PreviousResponseID: openai.String(first.ID),
		Input:              responses.ResponseNewParamsInputUnion{OfString: openai.String("And one more?")},
		Tools:              []responses.ToolUnionParam{codeInterpreter()},
	})
	if err != nil {
		t.Fatal(err)
	}
	if second.OutputText() != "Then 43" {
		t.Errorf("the follow-up answered %q; want the variable kept (43)", second.OutputText())
	}
	got, err := client.Responses.Get(ctx(t), first.ID, responses.ResponseGetParams{})
	if err != nil || got.OutputText() != "The answer is 42" {
		t.Errorf("GET the first response: %v, %q", err, got.OutputText())
	}
}

// A response goes on from the one its previous_response_id names, the last
// or an earlier one, and one without starts a new line of questions in the
// same container; each runs on the model it names.
func TestResponsesGoOnFromTheOneNamed(t *testing.T) {
	answer := llmtest.Fixed(llmtest.Answer("ok"))
	s := llmtest.New(t, answer, answer, answer, answer, answer)
	ts := newTestServer(t, s)
	client := ts.client(aliceKey)
	c, err := client.Containers.New(ctx(t), openai.ContainerNewParams{Name: "lines"})
	if err != nil {
		t.Fatal(err)
	}
	ids := map[string]string{}
	for _, step := range []struct {
		question, previous, model string
		// heard are the questions the model reads, in order.
		heard []string
	}{
		{"one", "", "test-model", []string{"one"}},
		{"two", "one", "test-model", []string{"one", "two"}},
		{"three", "one", "test-model", []string{"one", "three"}},
		{"four", "", "other-model", []string{"four"}},
		{"five", "three", "test-model", []string{"one", "three", "five"}},
	} {
		params := responses.ResponseNewParams{Model: step.model,
			Input: responses.ResponseNewParamsInputUnion{OfString: openai.String(step.question)},
			Tools: []responses.ToolUnionParam{responses.ToolParamOfCodeInterpreter(c.ID)}}
		if step.previous != "" {
			params.PreviousResponseID = openai.String(ids[step.previous])
		}
		resp, err := client.Responses.New(ctx(t), params)
		if err != nil {
			t.Fatalf("%s: %v", step.question, err)
		}
		ids[step.question] = resp.ID
		if string(resp.Model) != step.model {
			t.Errorf("%s: the response names the model %q, want %q", step.question, resp.Model, step.model)
		}
		reqs := s.Requests()
		req := reqs[len(reqs)-1]
		var heard []string
		for _, m := range req.Messages {
			if m.Role == "user" {
				heard = append(heard, m.Content)
			}
		}
		if req.Model != step.model || !slices.Equal(heard, step.heard) {
			t.Errorf("%s: the model %q read the questions %q; want %q to read %q", step.question, req.Model, heard, step.model, step.heard)
		}
	}
}

// A streamed response sends OpenAI's events in order, with sequence
// numbers, and the SDK's accumulator rebuilds the answer from them.
func TestResponsesStreaming(t *testing.T) {
	// The model server streams the call in pieces (llmtest cuts the
	// arguments in two), or sends it whole.
	for _, upstream := range []struct {
		name       string
		stream     bool
		codeDeltas int
	}{{"upstream streams", true, 2}, {"upstream whole", false, 1}} {
		t.Run(upstream.name, func(t *testing.T) {
			s := llmtest.New(t, llmtest.Fixed(llmtest.RunPython("print(2 ** 10)")), answerFromTool("It is "))
			ts := newTestServer(t, s, func(c *serve.Config) { c.Settings.Stream = upstream.stream })
			client := ts.client(aliceKey)
			stream := client.Responses.NewStreaming(ctx(t), responses.ResponseNewParams{
				Model: "test-model",
				Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("2 to the 10th?")},
				Tools: []responses.ToolUnionParam{codeInterpreter()},
			})
			var types []string
			var seq []int64
			var text, code, deltas string
			codeDeltas := 0
			var done responses.Response
			for stream.Next() {
				e := stream.Current()
				// A run of code deltas counts once in the order of events.
				if e.Type != "response.code_interpreter_call_code.delta" || types[len(types)-1] != e.Type {
					types = append(types, e.Type)
				}
				seq = append(seq, e.SequenceNumber)
				switch e.Type {
				case "response.output_text.delta":
					text += e.Delta
				case "response.code_interpreter_call_code.delta":
					deltas += e.Delta
					codeDeltas++
				case "response.code_interpreter_call_code.done":
					code = e.Code
				case "response.completed":
					done = e.Response
				}
			}
			if err := stream.Err(); err != nil {
				t.Fatal(err)
			}
			want := []string{"response.created", "response.in_progress", "response.output_item.added",
				"response.code_interpreter_call.in_progress", "response.code_interpreter_call_code.delta",
				"response.code_interpreter_call_code.done", "response.code_interpreter_call.interpreting",
				"response.code_interpreter_call.completed", "response.output_item.done", "response.output_item.added",
				"response.content_part.added", "response.output_text.delta", "response.output_text.done",
				"response.content_part.done", "response.output_item.done", "response.completed"}
			if !slices.Equal(types, want) {
				t.Errorf("events:\n%q\nwant\n%q", types, want)
			}
			for i := range seq {
				if seq[i] != int64(i) {
					t.Errorf("sequence numbers %v do not count from 0", seq)
					break
				}
			}
			if text != "It is 1024" || code != "print(2 ** 10)" || done.OutputText() != "It is 1024" || done.Status != "completed" {
				t.Errorf("text %q, code %q, completed %q (%s)", text, code, done.OutputText(), done.Status)
			}
			if deltas != code || codeDeltas != upstream.codeDeltas {
				t.Errorf("the code came in %d deltas, %q, want %d making %q", codeDeltas, deltas, upstream.codeDeltas, code)
			}
			if ci := done.Output[0]; ci.Type != "code_interpreter_call" || ci.Code != code {
				t.Errorf("the completed response's first item is %s with code %q", ci.Type, ci.Code)
			}
		})
	}
}

// A file the code saves is cited in the answer, and its content comes back
// from the container; an uploaded file reaches /work by file_id.
func TestResponsesFilesAndCitations(t *testing.T) {
	s := llmtest.New(t,
		llmtest.Fixed(llmtest.RunPython("import pandas as pd\ndf = pd.read_csv('/work/sales.csv')\n"+
			"df['revenue'].mul(2).to_csv('/work/double.csv', index=False)\nprint(df['revenue'].sum())")),
		answerFromTool("Total revenue: "))
	ts := newTestServer(t, s)
	client := ts.client(aliceKey)
	up, err := client.Files.New(ctx(t), openai.FileNewParams{
		File:    openai.File(strings.NewReader("month,revenue\n2024-01,100\n2024-02,250\n"), "sales.csv", "text/csv"),
		Purpose: openai.FilePurposeUserData,
	})
	if err != nil {
		t.Fatal(err)
	}
	resp, err := client.Responses.New(ctx(t), responses.ResponseNewParams{
		Model: "test-model",
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("Total revenue, and double it into double.csv.")},
		Tools: []responses.ToolUnionParam{codeInterpreter(up.ID)},
	})
	if err != nil {
		t.Fatal(err)
	}
	if resp.OutputText() != "Total revenue: 350" {
		t.Fatalf("answered %q; the upload did not reach /work", resp.OutputText())
	}
	var cite responses.ResponseOutputTextAnnotationContainerFileCitation
	for _, item := range resp.Output {
		if item.Type != "message" {
			continue
		}
		for _, part := range item.AsMessage().Content {
			for _, a := range part.Annotations {
				if a.Type == "container_file_citation" {
					cite = a.AsContainerFileCitation()
				}
			}
		}
	}
	if cite.Filename != "double.csv" || !strings.HasPrefix(cite.FileID, "cfile_") {
		t.Fatalf("citation = %+v", cite)
	}
	content, err := client.Containers.Files.Content.Get(ctx(t), cite.ContainerID, cite.FileID)
	if err != nil {
		t.Fatal(err)
	}
	defer content.Body.Close()
	if b, _ := io.ReadAll(content.Body); string(b) != "revenue\n200\n500\n" {
		t.Errorf("double.csv holds %q", b)
	}
}

// An image the code saved is shown in the call's outputs and cited,
// whatever its kind: a .webp as a .png.
func TestResponsesImagesTheCodeSaved(t *testing.T) {
	s := llmtest.New(t,
		llmtest.Fixed(llmtest.RunPython("for name in ('chart.png', 'chart.webp'):\n    open('/work/' + name, 'wb').write(b'image')\nprint('saved')")),
		llmtest.Fixed(llmtest.Answer("See chart.png and chart.webp.")))
	ts := newTestServer(t, s)
	client := ts.client(aliceKey)
	resp, err := client.Responses.New(ctx(t), responses.ResponseNewParams{
		Model:   "test-model",
		Input:   responses.ResponseNewParamsInputUnion{OfString: openai.String("Draw it twice.")},
		Tools:   []responses.ToolUnionParam{codeInterpreter()},
		Include: []responses.ResponseIncludable{responses.ResponseIncludableCodeInterpreterCallOutputs},
	})
	if err != nil {
		t.Fatal(err)
	}
	shown := map[string]bool{}   // link
	cited := map[string]string{} // link: name
	for _, item := range resp.Output {
		switch item.Type {
		case "code_interpreter_call":
			for _, o := range item.AsCodeInterpreterCall().Outputs {
				if o.Type == "image" {
					shown[o.AsImage().URL] = true
				}
			}
		case "message":
			for _, part := range item.AsMessage().Content {
				for _, a := range part.Annotations {
					if a.Type == "container_file_citation" {
						// terp's own field: the link to the file's copy.
						cited[a.URL] = a.Filename
					}
				}
			}
		}
	}
	for _, name := range []string{"chart.png", "chart.webp"} {
		link := ""
		for l, n := range cited {
			if n == name {
				link = l
			}
		}
		if link == "" || !shown[link] {
			t.Errorf("%s: cited as %q, shown as an image %v; want both, by the same link (citations %v, images %v)", name, link, shown[link], cited, shown)
			continue
		}
		got, err := http.Get(link) // no key: a page that renders the answer
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(got.Body)
		got.Body.Close()
		if got.StatusCode != http.StatusOK || string(b) != "image" {
			t.Errorf("%s: its link answered %d %q", name, got.StatusCode, b)
		}
	}
}

// A key sees only what it made: another key's container, file and response
// are not found, and a request without a key is refused.
func TestKeysSeeOnlyTheirOwn(t *testing.T) {
	s := llmtest.New(t, llmtest.Fixed(llmtest.Answer("hi")))
	ts := newTestServer(t, s)
	alice, bob := ts.client(aliceKey), ts.client(bobKey)
	c, err := alice.Containers.New(ctx(t), openai.ContainerNewParams{Name: "alice's"})
	if err != nil {
		t.Fatal(err)
	}
	f, err := alice.Files.New(ctx(t), openai.FileNewParams{File: openai.File(strings.NewReader("secret"), "s.txt", "text/plain"), Purpose: openai.FilePurposeUserData})
	if err != nil {
		t.Fatal(err)
	}
	r, err := alice.Responses.New(ctx(t), responses.ResponseNewParams{Model: "test-model",
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("hello")},
		Tools: []responses.ToolUnionParam{responses.ToolParamOfCodeInterpreter(c.ID)}})
	if err != nil {
		t.Fatal(err)
	}
	notFound := func(what string, err error) {
		t.Helper()
		var apiErr *openai.Error
		if !errorsAs(err, &apiErr) || apiErr.StatusCode != http.StatusNotFound {
			t.Errorf("bob reading alice's %s: %v, want 404", what, err)
		}
	}
	_, err = bob.Containers.Get(ctx(t), c.ID)
	notFound("container", err)
	_, err = bob.Files.Get(ctx(t), f.ID)
	notFound("file", err)
	_, err = bob.Responses.Get(ctx(t), r.ID, responses.ResponseGetParams{})
	notFound("response", err)
	if list, err := bob.Containers.List(ctx(t), openai.ContainerListParams{}); err != nil || len(list.Data) != 0 {
		t.Errorf("bob lists %v containers (%v), want none", len(list.Data), err)
	}
	resp, err := http.Get(ts.URL + "/v1/containers")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("no key: %d, want 401", resp.StatusCode)
	}
}

// Containers and their files round trip through the SDK: create with a
// file, upload another, list, read, delete.
func TestContainersAndFiles(t *testing.T) {
	ts := newTestServer(t, llmtest.New(t))
	client := ts.client(aliceKey)
	f, err := client.Files.New(ctx(t), openai.FileNewParams{File: openai.File(strings.NewReader("a,b\n1,2\n"), "data.csv", "text/csv"), Purpose: openai.FilePurposeUserData})
	if err != nil {
		t.Fatal(err)
	}
	c, err := client.Containers.New(ctx(t), openai.ContainerNewParams{Name: "work", FileIDs: []string{f.ID},
		ExpiresAfter: openai.ContainerNewParamsExpiresAfter{Anchor: "last_active_at", Minutes: 5}})
	if err != nil {
		t.Fatal(err)
	}
	if c.Name != "work" || c.ExpiresAfter.Minutes != 5 || c.Status != "running" {
		t.Errorf("container = %+v", c)
	}
	added, err := client.Containers.Files.New(ctx(t), c.ID, openai.ContainerFileNewParams{
		File: openai.File(strings.NewReader("print('hi')\n"), "hello.py", "text/x-python")})
	if err != nil {
		t.Fatal(err)
	}
	if added.Path != "/mnt/data/hello.py" || added.Source != "user" || added.Bytes != 12 {
		t.Errorf("uploaded %+v", added)
	}
	list, err := client.Containers.Files.List(ctx(t), c.ID, openai.ContainerFileListParams{})
	if err != nil {
		t.Fatal(err)
	}
	var paths []string
	for _, cf := range list.Data {
		paths = append(paths, cf.Path)
	}
	slices.Sort(paths)
	if !slices.Equal(paths, []string{"/mnt/data/data.csv", "/mnt/data/hello.py"}) {
		t.Errorf("container files %q", paths)
	}
	if err := client.Containers.Files.Delete(ctx(t), c.ID, added.ID); err != nil {
		t.Fatal(err)
	}
	list, err = client.Containers.Files.List(ctx(t), c.ID, openai.ContainerFileListParams{})
	if err != nil || len(list.Data) != 1 {
		t.Errorf("after the delete: %d files (%v), want 1", len(list.Data), err)
	}
	if err := client.Containers.Delete(ctx(t), c.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := client.Containers.Get(ctx(t), c.ID); err == nil {
		t.Error("the deleted container is still there")
	}
}

// A hostile or mistaken request gets OpenAI's error shape naming what to
// change, never a crash.
func TestResponsesBadRequests(t *testing.T) {
	ts := newTestServer(t, llmtest.New(t))
	for _, tt := range []struct{ name, body, param string }{
		{"not json", `{"model":`, ""},
		{"a function without a name", `{"model":"m","input":"hi","tools":[{"type":"function"}]}`, "tools[0].name"},
		{"a file without the code interpreter", `{"model":"m","input":[{"role":"user","content":[{"type":"input_file","file_id":"file-1"}]}]}`, "input[0].content[0].type"},
		{"unknown container", `{"model":"m","input":"hi","tools":[{"type":"code_interpreter","container":"cntr_nope"}]}`, "tools.container"},
		{"unknown previous", `{"model":"m","input":"hi","previous_response_id":"resp_nope","tools":[{"type":"code_interpreter","container":{"type":"auto"}}]}`, "previous_response_id"},
		{"unknown file", `{"model":"m","input":[{"role":"user","content":[{"type":"input_file","file_id":"file-nope"}]}],"tools":[{"type":"code_interpreter","container":{"type":"auto"}}]}`, "input[0].content[0].file_id"},
		{"empty input", `{"model":"m","input":"  ","tools":[{"type":"code_interpreter","container":{"type":"auto"}}]}`, "input"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			req, _ := http.NewRequest("POST", ts.URL+"/v1/responses", strings.NewReader(tt.body))
			req.Header.Set("Authorization", "Bearer "+aliceKey)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			var got struct {
				Error struct {
					Message string  `json:"message"`
					Param   *string `json:"param"`
				} `json:"error"`
			}
			if err := json.NewDecoder(resp.Body).Decode(&got); err != nil {
				t.Fatal(err)
			}
			param := ""
			if got.Error.Param != nil {
				param = *got.Error.Param
			}
			if resp.StatusCode != http.StatusBadRequest || got.Error.Message == "" || param != tt.param {
				t.Errorf("%d, %+v (param %q); want 400 naming %q", resp.StatusCode, got.Error, param, tt.param)
			}
		})
	}
}

func errorsAs(err error, target any) bool { return errors.As(err, target) }

// A function tool the client defines passes through: the model's call ends
// the response with a function_call item, and the client's output
// continues it to the answer.
func TestResponsesFunctionToolPassesThrough(t *testing.T) {
	s := llmtest.New(t,
		func(req llmtest.Request) llmtest.Reply {
			if len(req.Tools) != 2 || req.Tools[1].Function.Name != "get_weather" {
				t.Errorf("the model is offered %+v; want run_python and get_weather", req.Tools)
			}
			return llmtest.Reply{Calls: []llmtest.Call{{Name: "get_weather", Arguments: `{"city":"Paris"}`}}}
		},
		func(req llmtest.Request) llmtest.Reply {
			last := req.Messages[len(req.Messages)-1]
			if last.Role != "tool" || last.Content != "sunny, 21 C" {
				t.Errorf("the model got %+v; want the client's output", last)
			}
			return llmtest.Answer("Paris: " + last.Content)
		})
	ts := newTestServer(t, s)
	client := ts.client(aliceKey)
	weather := responses.ToolParamOfFunction("get_weather", map[string]any{
		"type": "object", "properties": map[string]any{"city": map[string]any{"type": "string"}}}, false)
	tools := []responses.ToolUnionParam{codeInterpreter(), weather}
	first, err := client.Responses.New(ctx(t), responses.ResponseNewParams{Model: "test-model", Tools: tools,
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("Weather in Paris?")}})
	if err != nil {
		t.Fatal(err)
	}
	var call responses.ResponseFunctionToolCall
	for _, item := range first.Output {
		if item.Type == "function_call" {
			call = item.AsFunctionCall()
		}
	}
	if call.Name != "get_weather" || call.Arguments != `{"city":"Paris"}` || call.CallID == "" {
		t.Fatalf("function_call = %+v (output %s)", call, first.RawJSON())
	}
	second, err := client.Responses.New(ctx(t), responses.ResponseNewParams{Model: "test-model", Tools: tools,
		PreviousResponseID: openai.String(first.ID),
		Input: responses.ResponseNewParamsInputUnion{OfInputItemList: responses.ResponseInputParam{
			{OfFunctionCallOutput: &responses.ResponseInputItemFunctionCallOutputParam{
				CallID: openai.String(call.CallID),
				Output: responses.ResponseInputItemFunctionCallOutputOutputUnionParam{OfString: openai.String("sunny, 21 C")}}}}}})
	if err != nil {
		t.Fatal(err)
	}
	if second.OutputText() != "Paris: sunny, 21 C" {
		t.Errorf("answered %q", second.OutputText())
	}
}

// A key may hold only so many live containers; past it, it is told why.
func TestContainerCap(t *testing.T) {
	ts := newTestServer(t, llmtest.New(t), func(c *serve.Config) {
		for k, key := range c.Keys {
			key.Limits.Containers = 2
			c.Keys[k] = key
		}
	})
	alice, bob := ts.client(aliceKey), ts.client(bobKey)
	for range 2 {
		if _, err := alice.Containers.New(ctx(t), openai.ContainerNewParams{Name: "c"}); err != nil {
			t.Fatal(err)
		}
	}
	_, err := alice.Containers.New(ctx(t), openai.ContainerNewParams{Name: "one too many"})
	var apiErr *openai.Error
	if !errorsAs(err, &apiErr) || apiErr.StatusCode != http.StatusTooManyRequests || !strings.Contains(apiErr.Message, "delete some") {
		t.Errorf("the third container: %v; want 429 saying what to do", err)
	}
	if _, err := bob.Containers.New(ctx(t), openai.ContainerNewParams{Name: "bob's"}); err != nil {
		t.Errorf("another key is held to alice's cap: %v", err)
	}
}

// A response that goes on from another is stored as the messages it added
// (every wholeEvery-th whole), and read back whole: a long chat does not
// store its history again with each answer. A response whose earlier part
// was forgotten says so.
func TestResponsesStoreTheirHistoryOnce(t *testing.T) {
	n := wholeEvery + 2
	var steps []llmtest.Step
	for i := range n {
		steps = append(steps, llmtest.Fixed(llmtest.Answer(fmt.Sprintf("answer %d", i))))
	}
	s := llmtest.New(t, append(steps, func(req llmtest.Request) llmtest.Reply {
		var said []string
		for _, m := range req.Messages {
			if m.Role == "assistant" {
				said = append(said, m.Content)
			}
		}
		return llmtest.Answer(strings.Join(said, ","))
	}, llmtest.Fixed(llmtest.Answer("after the deleted one")))...)
	ts := newTestServer(t, s)
	client := ts.client(aliceKey)
	var ids []string
	prev := ""
	for i := range n + 1 {
		params := responses.ResponseNewParams{Model: "test-model", Tools: []responses.ToolUnionParam{codeInterpreter()},
			Input: responses.ResponseNewParamsInputUnion{OfString: openai.String(fmt.Sprintf("question %d", i))}}
		if prev != "" {
			params.PreviousResponseID = openai.String(prev)
		}
		resp, err := client.Responses.New(ctx(t), params)
		if err != nil {
			t.Fatal(err)
		}
		prev = resp.ID
		ids = append(ids, resp.ID)
	}
	var want []string
	for i := range n {
		want = append(want, fmt.Sprintf("answer %d", i))
	}
	last, _ := client.Responses.Get(ctx(t), ids[n], responses.ResponseGetParams{})
	if last.OutputText() != strings.Join(want, ",") {
		t.Errorf("the last response's model saw the answers %q; want every one before it", last.OutputText())
	}
	whole := 0
	for i, id := range ids {
		rec, err := ts.srv.State().Response(ctx(t), "alice", id)
		if err != nil {
			t.Fatal(err)
		}
		if rec.History[0] == '[' {
			whole++
		} else if i == 0 {
			t.Errorf("the first response is stored as a part: %.80s", rec.History)
		}
	}
	if whole != 2 {
		t.Errorf("%d of %d responses were stored whole; want the first and the %dth", whole, len(ids), wholeEvery+1)
	}
	// A deleted response is gone for its client, not for those that went
	// on from it.
	if err := client.Responses.Delete(ctx(t), ids[0]); err != nil {
		t.Fatal(err)
	}
	if _, err := client.Responses.Get(ctx(t), ids[0], responses.ResponseGetParams{}); err == nil {
		t.Error("a deleted response is still found")
	}
	if _, err := client.Responses.New(ctx(t), responses.ResponseNewParams{Model: "test-model", PreviousResponseID: openai.String(ids[0]),
		Tools: []responses.ToolUnionParam{codeInterpreter()}, Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("again")}}); err == nil {
		t.Error("a deleted response is still gone on from")
	}
	after, err := client.Responses.New(ctx(t), responses.ResponseNewParams{Model: "test-model", PreviousResponseID: openai.String(ids[2]),
		Tools: []responses.ToolUnionParam{codeInterpreter()}, Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("and on")}})
	if err != nil || after.OutputText() != "after the deleted one" {
		t.Errorf("going on from a response after the deleted one: %v", err)
	}
	// Forgotten, as the oldest are: the second can no longer be read whole.
	if err := ts.srv.State().DeleteResponse(ctx(t), "alice", ids[0]); err != nil {
		t.Fatal(err)
	}
	_, err = client.Responses.New(ctx(t), responses.ResponseNewParams{Model: "test-model", PreviousResponseID: openai.String(ids[1]),
		Tools: []responses.ToolUnionParam{codeInterpreter()}, Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("again")}})
	var apiErr *openai.Error
	if !errorsAs(err, &apiErr) || apiErr.StatusCode != http.StatusBadRequest || !strings.Contains(apiErr.Message, "was forgotten") {
		t.Errorf("going on from a response whose earlier part is gone: %v; want a 400 saying so", err)
	}
}
