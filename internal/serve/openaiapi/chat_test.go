package openaiapi_test

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/terpdev/terp/internal/config"
	"github.com/terpdev/terp/internal/llm/llmtest"
	"github.com/terpdev/terp/internal/serve/openaiapi"
	"github.com/terpdev/terp/internal/terptest"
)

// answerFromOutput answers with what the code printed: if the tool path is
// broken, the answer is wrong.
func answerFromOutput(t *testing.T) llmtest.Step {
	return func(req llmtest.Request) llmtest.Reply {
		res, err := req.ToolResult()
		if err != nil {
			t.Errorf("the tool message is not terp's JSON: %v", err)
		}
		return llmtest.Answer("The code says: " + strings.TrimSpace(res.Stdout+res.Stderr+res.Error))
	}
}

// codeBlock and outputBlock are a step as the steps show it.
func codeBlock(code string) string  { return "```python\n" + code + "\n```\n" }
func outputBlock(out string) string { return "```\n" + out + "\n```\n" }

// chatNew sends a chat completion and returns it with the answer's headers.
func chatNew(t *testing.T, c openai.Client, params openai.ChatCompletionNewParams, opts ...option.RequestOption) (*openai.ChatCompletion, http.Header) {
	t.Helper()
	var resp *http.Response
	got, err := c.Chat.Completions.New(t.Context(), params, append(opts, option.WithResponseInto(&resp))...)
	if err != nil {
		t.Fatalf("chat completion: %v", err)
	}
	if len(got.Choices) != 1 {
		t.Fatalf("%d choices, want 1: %s", len(got.Choices), got.RawJSON())
	}
	return got, resp.Header
}

// streamed is a streamed chat completion as a client puts it together.
type streamed struct {
	content, reasoning, finish string
	usage                      *openai.CompletionUsage
	chunks                     int
	header                     http.Header
}

// chatStream reads a streamed chat completion to its end; each is called
// with the steps so far after every chunk.
func chatStream(t *testing.T, c openai.Client, params openai.ChatCompletionNewParams, each func(reasoning, content string), opts ...option.RequestOption) streamed {
	t.Helper()
	var resp *http.Response
	stream := c.Chat.Completions.NewStreaming(t.Context(), params, append(opts, option.WithResponseInto(&resp))...)
	defer stream.Close()
	var s streamed
	for stream.Next() {
		chunk := stream.Current()
		s.chunks++
		if chunk.Object != "chat.completion.chunk" {
			t.Errorf("chunk object %q, want chat.completion.chunk", chunk.Object)
		}
		if chunk.JSON.Usage.Valid() && chunk.Usage.TotalTokens > 0 {
			u := chunk.Usage
			s.usage = &u
		}
		for _, ch := range chunk.Choices {
			s.content += ch.Delta.Content
			s.reasoning += reasoning(ch.Delta.JSON.ExtraFields)
			if ch.FinishReason != "" {
				s.finish = ch.FinishReason
			}
		}
		if each != nil {
			each(s.reasoning, s.content)
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatalf("stream: %v", err)
	}
	if resp != nil {
		s.header = resp.Header
	}
	return s
}

func TestChatWithTheToolComputesTheAnswerInTheSandbox(t *testing.T) {
	for _, sb := range chatSandboxes() {
		t.Run(sb.name, func(t *testing.T) {
			code := sb.print("6 times 7 is 42")
			upstream := llmtest.New(t, llmtest.Fixed(llmtest.RunPython(code)), answerFromOutput(t))
			env := newChatEnv(t, sb, upstream, chatOptions{})
			got, resp := chatNew(t, env.client(aliceKey), openai.ChatCompletionNewParams{
				Model: "test-model", Messages: userMessages("What is 6 times 7?")}, codeInterpreter)

			msg := got.Choices[0].Message
			if want := "The code says: 6 times 7 is 42"; msg.Content != want {
				t.Errorf("content = %q, want %q", msg.Content, want)
			}
			steps := reasoning(msg.JSON.ExtraFields)
			if !strings.Contains(steps, codeBlock(code)) || !strings.Contains(steps, outputBlock("6 times 7 is 42")) {
				t.Errorf("reasoning_content does not show the code and its output:\n%s", steps)
			}
			if got.Choices[0].FinishReason != "stop" || got.Model != "test-model" || got.Object != "chat.completion" || !strings.HasPrefix(got.ID, "chatcmpl-") {
				t.Errorf("finish_reason %q, model %q, object %q, id %q", got.Choices[0].FinishReason, got.Model, got.Object, got.ID)
			}
			if got.Usage.TotalTokens != 220 || got.Usage.PromptTokens != 200 {
				t.Errorf("usage = %+v, want the two model requests' 200+20 tokens", got.Usage)
			}
			cid := resp.Get(openaiapi.ContainerHeader)
			if status, _ := env.get(aliceKey, env.http.URL+"/v1/containers/"+cid); !strings.HasPrefix(cid, "cntr_") || status != http.StatusOK {
				t.Errorf("%s = %q, and GET of it answered %d", openaiapi.ContainerHeader, cid, status)
			}
			reqs := upstream.Requests()
			if len(reqs) != 2 || !strings.Contains(reqs[0].LastUser(), "What is 6 times 7?") || len(reqs[0].Tools) == 0 {
				t.Fatalf("upstream got %d requests, the first asking %q with %d tools", len(reqs), reqs[0].LastUser(), len(reqs[0].Tools))
			}
		})
	}
}

// A follow-up that sends the container back goes on with the first turn's
// variables and files, and its history: the client's copy of the earlier
// messages is not asked again.
func TestChatFollowUpInTheContainerSeesWhatTheFirstLeft(t *testing.T) {
	for _, sb := range chatSandboxes() {
		t.Run(sb.name, func(t *testing.T) {
			first, second, want := sb.save("note.txt", "remembered 41"), "cat note.txt", "remembered 41"
			if sb.kernel {
				first, second, want = "x = 41\nprint('set')", "print(x + 1)", "42"
			}
			upstream := llmtest.New(t, llmtest.Fixed(llmtest.RunPython(first)), llmtest.Fixed(llmtest.Answer("Done.")),
				llmtest.Fixed(llmtest.RunPython(second)), answerFromOutput(t))
			env := newChatEnv(t, sb, upstream, chatOptions{})
			c := env.client(aliceKey)
			_, resp := chatNew(t, c, openai.ChatCompletionNewParams{Model: "test-model", Messages: userMessages("Remember 41.")}, codeInterpreter)
			cid := resp.Get(openaiapi.ContainerHeader)

			msgs := []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Remember 41."), openai.AssistantMessage("Done."), openai.UserMessage("What was it, plus one?")}
			got, resp2 := chatNew(t, c, openai.ChatCompletionNewParams{Model: "test-model", Messages: msgs},
				codeInterpreter, option.WithHeader(openaiapi.ContainerHeader, cid))
			if msg := got.Choices[0].Message.Content; msg != "The code says: "+want {
				t.Errorf("content = %q, want what the first turn left: %q", msg, want)
			}
			if again := resp2.Get(openaiapi.ContainerHeader); again != cid {
				t.Errorf("the follow-up ran in %q, not in %q", again, cid)
			}
			reqs := upstream.Requests()
			asked := 0
			for _, m := range reqs[2].Messages {
				if m.Role == "user" && strings.Contains(m.Content, "Remember 41.") {
					asked++
				}
			}
			if last := reqs[2].LastUser(); asked != 1 || strings.Contains(last, "(I asked earlier") || !strings.HasSuffix(last, "What was it, plus one?") {
				t.Errorf("the model saw the first question %d times (want once, from the history) and was asked %q", asked, last)
			}
		})
	}
}

// Without a container to go on in, the client's earlier messages are all
// terp has of the conversation: the question carries them. The system
// message follows terp's own system prompt.
func TestChatInANewContainerTheEarlierMessagesComeWithTheQuestion(t *testing.T) {
	for _, sb := range chatSandboxes() {
		t.Run(sb.name, func(t *testing.T) {
			upstream := llmtest.New(t, llmtest.Fixed(llmtest.Answer("Forty-two, says upstream.")))
			env := newChatEnv(t, sb, upstream, chatOptions{})
			msgs := []openai.ChatCompletionMessageParamUnion{openai.SystemMessage("Answer in French."),
				openai.UserMessage("Pick a number."), openai.AssistantMessage("41."), openai.UserMessage("Add one.")}
			got, _ := chatNew(t, env.client(aliceKey), openai.ChatCompletionNewParams{Model: "test-model", Messages: msgs}, codeInterpreter)
			if got.Choices[0].Message.Content != "Forty-two, says upstream." {
				t.Errorf("content = %q", got.Choices[0].Message.Content)
			}
			asked := upstream.Requests()[0]
			if system := asked.Messages[0]; system.Role != "system" || !strings.HasSuffix(system.Content, "\n\nAnswer in French.") {
				t.Errorf("the system prompt does not end with the client's: %q", system.Content)
			}
			q := asked.LastUser()
			want := []string{"(I asked earlier: Pick a number.)", "(You answered earlier: 41.)", "Add one."}
			at := 0
			for _, w := range want {
				i := strings.Index(q[at:], w)
				if i < 0 {
					t.Fatalf("the question lacks %q after what came before it:\n%s", w, q)
				}
				at += i + len(w)
			}
		})
	}
}

// A client that cannot add a tool names the alias: the code interpreter
// runs on the model it stands for.
func TestChatAliasModelRunsTheCodeInterpreter(t *testing.T) {
	for _, sb := range chatSandboxes() {
		for _, tc := range []struct{ suffix, model string }{{"", "test-model+python"}, {"-ci", "test-model-ci"}} {
			t.Run(sb.name+"/"+tc.model, func(t *testing.T) {
				code := sb.print("from the alias")
				upstream := llmtest.New(t, llmtest.Fixed(llmtest.RunPython(code)), answerFromOutput(t))
				env := newChatEnv(t, sb, upstream, chatOptions{api: openaiapi.Options{AliasSuffix: tc.suffix}})
				got, resp := chatNew(t, env.client(aliceKey), openai.ChatCompletionNewParams{Model: tc.model, Messages: userMessages("Say it.")})
				if msg := got.Choices[0].Message.Content; msg != "The code says: from the alias" {
					t.Errorf("content = %q", msg)
				}
				if got.Model != tc.model || resp.Get(openaiapi.ContainerHeader) == "" {
					t.Errorf("model %q and container %q; want the alias back, and a container", got.Model, resp.Get(openaiapi.ContainerHeader))
				}
				if reqs := upstream.Requests(); reqs[0].Model != "test-model" || len(reqs[0].Tools) == 0 || reqs[0].Tools[0].Function.Name != "run_python" {
					t.Errorf("upstream was asked for model %q with %d tools; want test-model with run_python", reqs[0].Model, len(reqs[0].Tools))
				}
			})
		}
	}
}

// Streamed, the steps arrive while the turn runs: the client has the code
// and its output before the model is asked for the answer.
func TestChatStreamShowsTheStepsAsTheyHappen(t *testing.T) {
	for _, sb := range chatSandboxes() {
		t.Run(sb.name, func(t *testing.T) {
			code := sb.print("streamed 7")
			seen := make(chan struct{})
			var once sync.Once
			upstream := llmtest.New(t, llmtest.Fixed(llmtest.RunPython(code)), func(req llmtest.Request) llmtest.Reply {
				select {
				case <-seen:
				case <-time.After(time.Minute):
					t.Error("the client did not get the code's output before the model was asked again")
				}
				return answerFromOutput(t)(req)
			})
			env := newChatEnv(t, sb, upstream, chatOptions{})
			s := chatStream(t, env.client(aliceKey), openai.ChatCompletionNewParams{Model: "test-model", Messages: userMessages("Stream it."),
				StreamOptions: openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}},
				func(r, content string) {
					if strings.Contains(r, outputBlock("streamed 7")) {
						once.Do(func() { close(seen) })
					}
				}, codeInterpreter)
			if s.content != "The code says: streamed 7" || !strings.Contains(s.reasoning, codeBlock(code)) {
				t.Errorf("content %q, reasoning:\n%s", s.content, s.reasoning)
			}
			if s.finish != "stop" || s.usage == nil || s.usage.TotalTokens != 220 {
				t.Errorf("finish_reason %q, usage %+v", s.finish, s.usage)
			}
			if !strings.HasPrefix(s.header.Get(openaiapi.ContainerHeader), "cntr_") || s.header.Get("Content-Type") != "text/event-stream" {
				t.Errorf("headers: %v", s.header)
			}
		})
	}
}

// The steps go where the request, or else the server, says.
func TestChatStepsModes(t *testing.T) {
	for _, sb := range chatSandboxes() {
		for _, mode := range []string{"reasoning", "content", "none"} {
			for _, by := range []string{"request", "server"} {
				t.Run(sb.name+"/"+mode+"/by-"+by, func(t *testing.T) {
					code := sb.print("step shown")
					steps := codeBlock(code) + "\n" + outputBlock("step shown")
					answer := "The code says: step shown"
					upstream := llmtest.New(t, llmtest.Fixed(llmtest.RunPython(code)), answerFromOutput(t),
						llmtest.Fixed(llmtest.RunPython(code)), answerFromOutput(t))
					opts := chatOptions{}
					reqOpts := []option.RequestOption{codeInterpreter}
					if by == "server" {
						opts.api.Steps = mode
					} else {
						// The server's default says otherwise; the request wins.
						opts.api.Steps = "none"
						reqOpts = append(reqOpts, option.WithJSONSet("terp_steps", mode))
					}
					env := newChatEnv(t, sb, upstream, opts)
					c := env.client(aliceKey)
					params := openai.ChatCompletionNewParams{Model: "test-model", Messages: userMessages("Show it.")}
					got, resp := chatNew(t, c, params, reqOpts...)
					s := chatStream(t, c, params, nil, append(reqOpts, option.WithHeader(openaiapi.ContainerHeader, resp.Get(openaiapi.ContainerHeader)))...)

					msg := got.Choices[0].Message
					for _, r := range []struct{ how, content, reasoning string }{
						{"answered", msg.Content, reasoning(msg.JSON.ExtraFields)},
						{"streamed", s.content, s.reasoning},
					} {
						wantContent, wantReasoning := answer, ""
						switch mode {
						case "reasoning":
							wantReasoning = steps
						case "content":
							wantContent = steps + "\n" + answer
						}
						if r.content != wantContent || r.reasoning != wantReasoning {
							t.Errorf("%s: content\n%q\nreasoning\n%q\nwant\n%q\n%q", r.how, r.content, r.reasoning, wantContent, wantReasoning)
						}
					}
				})
			}
		}
	}
}

// Files the code saved are links to their content, images shown; the
// links work without a key, as a chat UI's browser opens them.
func TestChatFilesTheCodeSavedAreLinked(t *testing.T) {
	for _, sb := range chatSandboxes() {
		t.Run(sb.name, func(t *testing.T) {
			code, image := sb.save("report.txt", "the report")+"\n"+sb.save("chart.png", "not a real png"), []byte("not a real png")
			if sb.name == "local" {
				code = sb.save("report.txt", "the report") + "\nimport matplotlib\nmatplotlib.use('Agg')\nimport matplotlib.pyplot as plt\nplt.plot([1, 2, 3])\nplt.savefig('/work/chart.png')"
				image = []byte("\x89PNG")
			}
			upstream := llmtest.New(t, llmtest.Fixed(llmtest.RunPython(code)), llmtest.Fixed(llmtest.Answer("Here they are.")))
			env := newChatEnv(t, sb, upstream, chatOptions{})
			got, _ := chatNew(t, env.client(aliceKey), openai.ChatCompletionNewParams{Model: "test-model", Messages: userMessages("Chart it.")}, codeInterpreter)
			content := got.Choices[0].Message.Content
			prefix := regexp.QuoteMeta(env.http.URL+"/links/alice/") + `file-\w+/\d+/[\w-]+/`
			report := regexp.MustCompile(`(?m)^\[report\.txt\]\((` + prefix + `report\.txt)\)$`).FindStringSubmatch(content)
			chart := regexp.MustCompile(`(?m)^!\[chart\.png\]\((` + prefix + `chart\.png)\)$`).FindStringSubmatch(content)
			if !strings.HasPrefix(content, "Here they are.\n\n") || report == nil || chart == nil {
				t.Fatalf("content does not end the answer with a link to each file:\n%s", content)
			}
			for _, l := range []struct {
				url, typ string
				want     []byte
			}{{report[1], "text/plain; charset=utf-8", []byte("the report")}, {chart[1], "image/png", image}} {
				resp, err := http.Get(l.url) // no key
				if err != nil {
					t.Fatal(err)
				}
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK || !bytes.HasPrefix(b, l.want) || resp.Header.Get("Content-Type") != l.typ {
					t.Errorf("%s answered %d %s %.20q", l.url, resp.StatusCode, resp.Header.Get("Content-Type"), b)
				}
			}
			// The copies the links serve are not the key's uploads.
			if status, b := env.get(aliceKey, env.http.URL+"/v1/files"); status != http.StatusOK || strings.Contains(string(b), "file-") {
				t.Errorf("GET /v1/files lists the links' copies: %d %s", status, b)
			}
		})
	}
}

// A turn stopped at the step cap says so, and finishes with "length".
func TestChatStepCapFinishesWithLength(t *testing.T) {
	for _, sb := range chatSandboxes() {
		t.Run(sb.name, func(t *testing.T) {
			upstream := llmtest.New(t, llmtest.Fixed(llmtest.RunPython(sb.print("again"))))
			env := newChatEnv(t, sb, upstream, chatOptions{settings: func(c *config.Config) { c.MaxSteps = 1 }})
			got, _ := chatNew(t, env.client(aliceKey), openai.ChatCompletionNewParams{Model: "test-model", Messages: userMessages("Loop.")}, codeInterpreter)
			if ch := got.Choices[0]; ch.FinishReason != "length" || !strings.Contains(ch.Message.Content, "step cap") {
				t.Errorf("finish_reason %q, content %q", ch.FinishReason, ch.Message.Content)
			}
		})
	}
}

// A container is its key's: another key is told it does not exist, as is
// a container that never did.
func TestChatContainerOfAnotherKeyIsNotFound(t *testing.T) {
	for _, sb := range chatSandboxes() {
		t.Run(sb.name, func(t *testing.T) {
			upstream := llmtest.New(t, llmtest.Fixed(llmtest.Answer("Hello, Alice.")))
			env := newChatEnv(t, sb, upstream, chatOptions{})
			_, resp := chatNew(t, env.client(aliceKey), openai.ChatCompletionNewParams{Model: "test-model", Messages: userMessages("Hi.")}, codeInterpreter)
			for key, id := range map[string]string{bobKey: resp.Get(openaiapi.ContainerHeader), aliceKey: "cntr_0000"} {
				c := env.client(key)
				_, err := c.Chat.Completions.New(t.Context(), openai.ChatCompletionNewParams{Model: "test-model", Messages: userMessages("Hi.")},
					codeInterpreter, option.WithHeader(openaiapi.ContainerHeader, id))
				var apiErr *openai.Error
				if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusNotFound || !strings.Contains(apiErr.Message, id) {
					t.Errorf("container %s: err = %v, want a 404 naming it", id, err)
				}
			}
			if n := len(upstream.Requests()); n != 1 {
				t.Errorf("upstream was asked %d times, want once", n)
			}
		})
	}
}

// A turn in a container that runs one already is refused with 409, at
// once, not queued.
func TestChatBusyContainerIsRefused(t *testing.T) {
	for _, sb := range chatSandboxes() {
		t.Run(sb.name, func(t *testing.T) {
			release := make(chan struct{})
			upstream := llmtest.New(t, func(llmtest.Request) llmtest.Reply {
				select {
				case <-release:
				case <-time.After(time.Minute):
					t.Error("the second request did not come back while the first ran")
				}
				return llmtest.Answer("First done.")
			})
			env := newChatEnv(t, sb, upstream, chatOptions{})
			c := env.client(aliceKey)
			params := openai.ChatCompletionNewParams{Model: "test-model", Messages: userMessages("Take your time.")}
			var resp *http.Response
			stream := c.Chat.Completions.NewStreaming(t.Context(), params, codeInterpreter, option.WithResponseInto(&resp))
			defer stream.Close()
			if resp == nil {
				t.Fatalf("the stream did not start: %v", stream.Err())
			}
			_, err := c.Chat.Completions.New(t.Context(), params, codeInterpreter, option.WithHeader(openaiapi.ContainerHeader, resp.Header.Get(openaiapi.ContainerHeader)))
			close(release)
			var apiErr *openai.Error
			if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusConflict {
				t.Errorf("err = %v, want 409", err)
			}
			var content string
			for stream.Next() {
				for _, ch := range stream.Current().Choices {
					content += ch.Delta.Content
				}
			}
			if content != "First done." || stream.Err() != nil {
				t.Errorf("the first turn answered %q, %v", content, stream.Err())
			}
		})
	}
}

// Requests without the tool go to the model server as they came, with
// upstream's key instead of the client's, and come back as they were
// answered, streamed or not.
func TestChatWithoutTheToolPassesThrough(t *testing.T) {
	for _, sb := range chatSandboxes() {
		for _, stream := range []bool{false, true} {
			t.Run(sb.name+"/"+map[bool]string{false: "whole", true: "streamed"}[stream], func(t *testing.T) {
				upstream := llmtest.New(t, llmtest.Fixed(llmtest.Answer("Hello from upstream, as it is.")))
				env := newChatEnv(t, sb, upstream, chatOptions{})
				sentByClient := &recorder{next: http.DefaultTransport}
				c := env.client(aliceKey, option.WithHTTPClient(&http.Client{Transport: sentByClient}))
				params := openai.ChatCompletionNewParams{Model: "test-model", Messages: []openai.ChatCompletionMessageParamUnion{
					openai.SystemMessage("Be brief."), openai.UserMessage("Hello?")}}
				weather := option.WithJSONSet("tools", []any{map[string]any{"type": "function",
					"function": map[string]any{"name": "get_weather", "parameters": map[string]any{"type": "object"}}}})
				var content string
				var header http.Header
				if stream {
					s := chatStream(t, c, params, nil, weather)
					content, header = s.content, s.header
					if s.chunks < 3 || header.Get("Content-Type") != "text/event-stream" {
						t.Errorf("%d chunks of %q; want upstream's stream", s.chunks, header.Get("Content-Type"))
					}
				} else {
					got, resp := chatNew(t, c, params, weather)
					content, header = got.Choices[0].Message.Content, resp
				}
				if content != "Hello from upstream, as it is." || header.Get(openaiapi.ContainerHeader) != "" {
					t.Errorf("content %q, container %q; want upstream's answer, no container", content, header.Get(openaiapi.ContainerHeader))
				}
				sent := env.sent.requests()
				if len(sent) != 1 || !bytes.Equal(sent[0].body, sentByClient.requests()[0].body) {
					t.Fatalf("upstream got %d requests; the body is not the client's:\n%s", len(sent), sent[0].body)
				}
				if sent[0].url != upstream.BaseURL()+"/chat/completions" || sent[0].header.Get("Authorization") != "Bearer "+upstreamKey {
					t.Errorf("sent to %s with Authorization %q; want upstream's key", sent[0].url, sent[0].header.Get("Authorization"))
				}
				reqs := upstream.Requests()
				if len(reqs) != 1 || reqs[0].Stream != stream || len(reqs[0].Tools) != 1 || reqs[0].Tools[0].Function.Name != "get_weather" || len(reqs[0].Messages) != 2 {
					t.Errorf("upstream was asked %+v", reqs)
				}
			})
		}
	}
}

// The model list is upstream's, with an alias for each model, and says
// which model server it could not reach.
func TestModelsListsUpstreamsModelsAndTheirAliases(t *testing.T) {
	for _, sb := range chatSandboxes() {
		t.Run(sb.name, func(t *testing.T) {
			upstream := llmtest.New(t)
			upstream.ServeModels(`{"object":"list","data":[{"id":"qwen3-32b","object":"model","created":5,"owned_by":"vllm","max_model_len":32768},{"id":"llama","object":"model","owned_by":"vllm"}]}`)
			env := newChatEnv(t, sb, upstream, chatOptions{})
			c := env.client(aliceKey)
			page, err := c.Models.List(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			var ids []string
			for _, m := range page.Data {
				ids = append(ids, m.ID+" "+m.OwnedBy)
			}
			if want := []string{"qwen3-32b vllm", "llama vllm", "qwen3-32b+python terp", "llama+python terp"}; !slices.Equal(ids, want) {
				t.Errorf("models %q, want %q", ids, want)
			}
			if !strings.Contains(page.Data[0].RawJSON(), `"max_model_len":32768`) {
				t.Errorf("upstream's entry lost its fields: %s", page.Data[0].RawJSON())
			}
			if sent := env.sent.requests(); len(sent) != 1 || sent[0].header.Get("Authorization") != "Bearer "+upstreamKey {
				t.Errorf("the list was asked of upstream %d times, the first with %q", len(sent), sent[0].header.Get("Authorization"))
			}
		})
	}
}

// A model server that is down is named in a 502, for the list and for
// requests that pass through.
func TestChatUpstreamDownIsABadGatewayNamingIt(t *testing.T) {
	for _, sb := range chatSandboxes() {
		t.Run(sb.name, func(t *testing.T) {
			downURL := "http://" + terptest.RefusedAddr(t)
			env := newChatEnv(t, sb, llmtest.New(t), chatOptions{settings: func(c *config.Config) { c.BaseURL = downURL + "/v1" }})
			c := env.client(aliceKey)
			_, listErr := c.Models.List(t.Context())
			_, chatErr := c.Chat.Completions.New(t.Context(), openai.ChatCompletionNewParams{Model: "test-model", Messages: userMessages("Hi.")})
			for what, err := range map[string]error{"the model list": listErr, "a chat completion": chatErr} {
				var apiErr *openai.Error
				if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusBadGateway || !strings.Contains(apiErr.Message, downURL+"/v1") {
					t.Errorf("%s: err = %v (%s), want a 502 naming %s", what, err, apiErrMessage(apiErr), downURL)
				}
			}
		})
	}
}

func apiErrMessage(e *openai.Error) string {
	if e == nil {
		return ""
	}
	return e.Message
}

// Mistakes in a request with the tool are a 400 naming the parameter.
func TestChatRefusesWhatItCannotRun(t *testing.T) {
	for _, sb := range chatSandboxes() {
		t.Run(sb.name, func(t *testing.T) {
			env := newChatEnv(t, sb, llmtest.New(t), chatOptions{})
			tool := `"tools": [{"type": "code_interpreter"}]`
			for _, tc := range []struct{ body, param string }{
				{`{"model": "m", ` + tool + `, "terp_steps": "loud", "messages": [{"role": "user", "content": "hi"}]}`, "terp_steps"},
				{`{"model": "m", ` + tool + `, "messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yes"}]}`, "messages[1].role"},
				{`{"model": "m", ` + tool + `, "messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "https://example.com/x.png"}}]}]}`, "messages[0].content[0].image_url.url"},
				{`{"model": "m", ` + tool + `, "messages": [{"role": "user", "content": [{"type": "input_audio", "input_audio": {}}]}]}`, "messages[0].content[0].type"},
				{`{"model": "m", ` + tool + `, "messages": [{"role": "user", "content": [{"type": "file", "file": {"filename": "a.csv", "file_data": "not base64!"}}]}]}`, "messages[0].content[0].file.file_data"},
				{`{"model": "m", "tools": [{"type": "code_interpreter"}, {"type": "function", "function": {"name": "f"}}], "messages": [{"role": "user", "content": "hi"}]}`, "tools[1].type"},
			} {
				status, b := env.post(aliceKey, "/v1/chat/completions", tc.body, nil)
				var e struct {
					Error struct{ Message, Param string }
				}
				if err := json.Unmarshal(b, &e); err != nil || status != http.StatusBadRequest || e.Error.Param != tc.param || e.Error.Message == "" {
					t.Errorf("%s: %d %s; want a 400 naming %s", tc.body, status, b, tc.param)
				}
			}
		})
	}
}

// Files a chat UI attaches to a message (a file part with its data, an
// image as a data URL) are put in the container's /work, and the model is
// told where they are; in a new container those of the earlier messages
// too, as a UI sends the whole history again. The image is also shown to
// the model, unless its profile says it takes no images.
func TestChatFilesInMessagesAreUploaded(t *testing.T) {
	for _, sb := range chatSandboxes() {
		t.Run(sb.name, func(t *testing.T) {
			// A model no profile speaks of sees the image; qwen3's
			// profile says it takes none, so it only has the file.
			for model, shown := range map[string]bool{"test-model": true, "qwen3-32b": false} {
				upstream := llmtest.New(t, llmtest.Fixed(llmtest.Answer("Got them.")))
				env := newChatEnv(t, sb, upstream, chatOptions{})
				csv := base64.StdEncoding.EncodeToString([]byte("a,b\n1,2\n"))
				png := "data:image/png;base64," + base64.StdEncoding.EncodeToString([]byte("\x89PNG\r\n\x1a\nnot really"))
				body := `{"model": "` + model + `", "tools": [{"type": "code_interpreter"}], "messages": [
					{"role": "user", "content": [{"type": "text", "text": "Here is the data."},
						{"type": "file", "file": {"filename": "data.csv", "file_data": "data:text/csv;base64,` + csv + `"}}]},
					{"role": "assistant", "content": "Thanks."},
					{"role": "user", "content": [{"type": "text", "text": "And a chart."},
						{"type": "image_url", "image_url": {"url": "` + png + `"}}]}]}`
				req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, env.http.URL+"/v1/chat/completions", strings.NewReader(body))
				req.Header.Set("Authorization", "Bearer "+aliceKey)
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					t.Fatalf("%s: %d %s", model, resp.StatusCode, b)
				}
				asked := upstream.Requests()[0]
				q := asked.LastUser()
				if !strings.Contains(q, "/mnt/data/data.csv") || !strings.Contains(q, "/mnt/data/image_1.png") {
					t.Errorf("%s: the model was not told where the files are: %q", model, q)
				}
				images := asked.Messages[len(asked.Messages)-1].Images
				if got := len(images) == 1 && images[0] == png; got != shown || len(images) > 1 {
					t.Errorf("%s: the question's images are %.60q; want the image shown: %v", model, images, shown)
				}
				if err := asked.Check(); err != nil {
					t.Errorf("%s: a strict server would refuse the request: %v", model, err)
				}
				_, lb := env.get(aliceKey, env.http.URL+"/v1/containers/"+resp.Header.Get(openaiapi.ContainerHeader)+"/files")
				var files struct {
					Data []struct {
						Path  string `json:"path"`
						Bytes int64  `json:"bytes"`
					} `json:"data"`
				}
				if err := json.Unmarshal(lb, &files); err != nil {
					t.Fatal(err)
				}
				sizes := map[string]int64{}
				for _, f := range files.Data {
					sizes[f.Path] = f.Bytes
				}
				if sizes["/mnt/data/data.csv"] != 8 || sizes["/mnt/data/image_1.png"] != 18 {
					t.Errorf("%s: the container holds %v; want data.csv (8 bytes) and image_1.png (18 bytes)", model, sizes)
				}
			}
		})
	}
}

// A chat UI sends back only the history, never X-Terp-Container: the
// follow-up goes on in the container that gave the history's last answer,
// with its variables, whether that answer was streamed or not. Another key
// that sends the same history, or a history whose answer terp never gave,
// gets a container of its own.
func TestChatGoesOnFromTheHistoryAlone(t *testing.T) {
	for _, sb := range chatSandboxes() {
		t.Run(sb.name, func(t *testing.T) {
			first, second, want := sb.save("note.txt", "remembered 41"), "cat note.txt", "remembered 41"
			if sb.kernel {
				first, second, want = "x = 41\nprint('set')", "print(x + 1)", "42"
			}
			upstream := llmtest.New(t, llmtest.Fixed(llmtest.RunPython(first)), llmtest.Fixed(llmtest.Answer("Done, remembered.")),
				llmtest.Fixed(llmtest.RunPython(second)), answerFromOutput(t),
				llmtest.Fixed(llmtest.Answer("Bob's own.")), llmtest.Fixed(llmtest.Answer("A new one.")))
			env := newChatEnv(t, sb, upstream, chatOptions{})
			alice := env.client(aliceKey)
			s := chatStream(t, alice, openai.ChatCompletionNewParams{Model: "test-model", Messages: userMessages("Remember 41.")}, nil, codeInterpreter)
			cid := s.header.Get(openaiapi.ContainerHeader)
			// The history as a UI sends it: the answer's content as it
			// arrived, the steps (in reasoning_content) left out.
			history := []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Remember 41."),
				openai.AssistantMessage(s.content), openai.UserMessage("What was it, plus one?")}
			got, resp := chatNew(t, alice, openai.ChatCompletionNewParams{Model: "test-model", Messages: history}, codeInterpreter)
			if again := resp.Get(openaiapi.ContainerHeader); again != cid {
				t.Fatalf("the follow-up from the history ran in %q, not in %q", again, cid)
			}
			if msg := got.Choices[0].Message.Content; msg != "The code says: "+want {
				t.Errorf("content = %q, want what the first turn left: %q", msg, want)
			}
			if last := upstream.Requests()[2].LastUser(); strings.Contains(last, "(I asked earlier") {
				t.Errorf("the model was asked the history again: %q", last)
			}

			_, bob := chatNew(t, env.client(bobKey), openai.ChatCompletionNewParams{Model: "test-model", Messages: history}, codeInterpreter)
			if other := bob.Get(openaiapi.ContainerHeader); other == cid || other == "" {
				t.Errorf("bob's copy of alice's history ran in %q (alice's is %q)", other, cid)
			}
			forged := []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Remember 41."),
				openai.AssistantMessage("Done, remembered. (edited)"), openai.UserMessage("And now?")}
			_, fresh := chatNew(t, alice, openai.ChatCompletionNewParams{Model: "test-model", Messages: forged}, codeInterpreter)
			if other := fresh.Get(openaiapi.ContainerHeader); other == cid {
				t.Errorf("a history whose answer terp never gave went on in %q", cid)
			}
		})
	}
}

// A history whose container is gone (deleted here; expired alike) goes on
// in a new one that holds the files the messages attached, and the reply
// and the model both hear that variables and saved files are lost. Another
// key sending the same history hears nothing of alice's container.
func TestChatSaysWhenTheHistorysContainerIsGone(t *testing.T) {
	for _, sb := range chatSandboxes() {
		t.Run(sb.name, func(t *testing.T) {
			upstream := llmtest.New(t, llmtest.Fixed(llmtest.Answer("Loaded it.")), llmtest.Fixed(llmtest.Answer("Loaded it again.")),
				llmtest.Fixed(llmtest.Answer("Bob's.")))
			env := newChatEnv(t, sb, upstream, chatOptions{})
			csv := base64.StdEncoding.EncodeToString([]byte("a,b\n1,2\n"))
			ask := func(key string, messages string) (string, string) {
				t.Helper()
				body := `{"model": "test-model", "tools": [{"type": "code_interpreter"}], "messages": [` + messages + `]}`
				req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, env.http.URL+"/v1/chat/completions", strings.NewReader(body))
				req.Header.Set("Authorization", "Bearer "+key)
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				defer resp.Body.Close()
				var got struct {
					Choices []struct{ Message struct{ Content string } }
				}
				if err := json.NewDecoder(resp.Body).Decode(&got); err != nil || resp.StatusCode != http.StatusOK || len(got.Choices) != 1 {
					t.Fatalf("%d: %v", resp.StatusCode, err)
				}
				return resp.Header.Get(openaiapi.ContainerHeader), got.Choices[0].Message.Content
			}
			first := `{"role": "user", "content": [{"type": "text", "text": "Load this."},
				{"type": "file", "file": {"filename": "data.csv", "file_data": "data:text/csv;base64,` + csv + `"}}]}`
			cid, answer := ask(aliceKey, first)
			alice := env.client(aliceKey)
			if err := alice.Containers.Delete(t.Context(), cid); err != nil {
				t.Fatalf("deleting the container: %v", err)
			}
			quoted, _ := json.Marshal(answer)
			history := first + `, {"role": "assistant", "content": ` + string(quoted) + `}, {"role": "user", "content": "Again."}`
			again, content := ask(aliceKey, history)
			if again == cid || !strings.HasPrefix(content, "*This conversation's sandbox had expired") || !strings.HasSuffix(content, "Loaded it again.") {
				t.Errorf("the follow-up ran in %s (the gone one: %s) and answered %q; want a new container, saying so first", again, cid, content)
			}
			q := upstream.Requests()[1].LastUser()
			if !strings.Contains(q, "sandbox had expired") || !strings.Contains(q, "(I asked earlier: Load this.)") || !strings.Contains(q, "/mnt/data/data.csv") {
				t.Errorf("the model was not told the sandbox is new, the history and the file: %q", q)
			}
			if _, lb := env.get(aliceKey, env.http.URL+"/v1/containers/"+again+"/files"); !strings.Contains(string(lb), `"/mnt/data/data.csv"`) {
				t.Errorf("the new container lacks the history's file: %s", lb)
			}
			if _, content := ask(bobKey, history); strings.Contains(content, "expired") {
				t.Errorf("bob was told of alice's container: %q", content)
			}
		})
	}
}

// Chat completions pass temperature, top_p, stop and seed; max_tokens
// bounds the whole turn; the system message follows terp's system prompt.
func TestChatSamplingReachesTheModel(t *testing.T) {
	s := llmtest.New(t, llmtest.Fixed(llmtest.Reply{Content: "Un.", CompletionTokens: 5}))
	env := newChatEnv(t, chatSandboxes()[0], s, chatOptions{})
	c := env.client(aliceKey)
	_, err := c.Chat.Completions.New(t.Context(), openai.ChatCompletionNewParams{
		Model:       "test-model",
		Messages:    []openai.ChatCompletionMessageParamUnion{openai.DeveloperMessage("Answer in French."), openai.UserMessage("One?")},
		Temperature: openai.Float(0.2),
		TopP:        openai.Float(0.9),
		MaxTokens:   openai.Int(64),
		Stop:        openai.ChatCompletionNewParamsStopUnion{OfStringArray: []string{"END"}},
		Seed:        openai.Int(7),
	}, codeInterpreter)
	if err != nil {
		t.Fatal(err)
	}
	r := s.Requests()[0]
	if r.Temperature == nil || *r.Temperature != 0.2 || r.TopP == nil || *r.TopP != 0.9 || r.MaxTokens != 64 ||
		len(r.Stop) != 1 || r.Stop[0] != "END" || r.Seed == nil || *r.Seed != 7 {
		t.Errorf("upstream got temperature %v, top_p %v, max_tokens %d, stop %q, seed %v", r.Temperature, r.TopP, r.MaxTokens, r.Stop, r.Seed)
	}
	if !strings.HasSuffix(r.Messages[0].Content, "\n\nAnswer in French.") {
		t.Errorf("the system prompt does not end with the developer message: %q", r.Messages[0].Content)
	}
	for _, bad := range []struct{ body, param string }{
		{`{"model": "test-model", "tools": [{"type": "code_interpreter"}], "temperature": 3, "messages": [{"role": "user", "content": "x"}]}`, "temperature"},
		{`{"model": "test-model", "tools": [{"type": "code_interpreter"}], "stop": 5, "messages": [{"role": "user", "content": "x"}]}`, "stop"},
	} {
		if status, b := env.post(aliceKey, "/v1/chat/completions", bad.body, nil); status != http.StatusBadRequest || !strings.Contains(string(b), `"param":"`+bad.param+`"`) {
			t.Errorf("%s: %d %s; want 400 naming %s", bad.body, status, b, bad.param)
		}
	}
}
