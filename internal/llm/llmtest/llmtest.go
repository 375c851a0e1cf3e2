// Package llmtest is a scripted OpenAI-compatible server for tests. It speaks
// the real wire format (JSON bodies and SSE streams) over a real HTTP
// listener, so tests exercise terp's whole client path; only the model's
// decisions are scripted. A script step sees the request it answers, so a
// test can make the model's answer depend on what the tool printed: a broken
// tool path then cannot pass.
package llmtest

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/terpdev/terp/internal/agent"
	"github.com/terpdev/terp/internal/llm/llmtest/strict"
)

// Request is the part of a chat completion request a script looks at.
type Request struct {
	Model    string    `json:"model"`
	Stream   bool      `json:"stream"`
	Messages []Message `json:"messages"`
	Tools    []struct {
		Type     string `json:"type"`
		Function struct {
			Name        string          `json:"name"`
			Description string          `json:"description"`
			Parameters  json.RawMessage `json:"parameters"`
		} `json:"function"`
	} `json:"tools"`
	// The sampling settings, as sent.
	Temperature *float64 `json:"temperature"`
	TopP        *float64 `json:"top_p"`
	MaxTokens   int      `json:"max_tokens"`
	Stop        []string `json:"stop"`
	Seed        *int     `json:"seed"`
	// body is the request as it came, for Check.
	body []byte
}

// Check returns what the strictest servers would reject in the request, or
// nil when they would all accept it (see package strict): the server here
// renders any history, as lenient servers do.
func (r Request) Check() error { return strict.Check(r.body) }

// Message is one message of a received request.
type Message struct {
	Role       string `json:"role"`
	Content    string `json:"content"`
	ToolCallID string `json:"tool_call_id"`
	// Reasoning and ReasoningContent are reasoning sent back, which terp
	// does only for models that need it.
	Reasoning        string `json:"reasoning,omitempty"`
	ReasoningContent string `json:"reasoning_content,omitempty"`
	ToolCalls        []struct {
		ID       string `json:"id"`
		Function struct {
			Name      string `json:"name"`
			Arguments string `json:"arguments"`
		} `json:"function"`
	} `json:"tool_calls"`
	// Images are the image_url parts of content sent as parts, whose
	// text parts Content joins.
	Images []string `json:"-"`
}

// UnmarshalJSON reads content as a string or as parts (text and
// image_url), as servers take it.
func (m *Message) UnmarshalJSON(b []byte) error {
	type plain Message
	var raw struct {
		plain
		Content json.RawMessage `json:"content"`
	}
	if err := json.Unmarshal(b, &raw); err != nil {
		return err
	}
	*m = Message(raw.plain)
	if len(raw.Content) == 0 || raw.Content[0] != '[' {
		return json.Unmarshal(orNull(raw.Content), &m.Content)
	}
	var parts []struct {
		Type     string `json:"type"`
		Text     string `json:"text"`
		ImageURL struct {
			URL string `json:"url"`
		} `json:"image_url"`
	}
	if err := json.Unmarshal(raw.Content, &parts); err != nil {
		return err
	}
	var text []string
	for _, p := range parts {
		switch p.Type {
		case "text":
			text = append(text, p.Text)
		case "image_url":
			m.Images = append(m.Images, p.ImageURL.URL)
		default:
			return fmt.Errorf("content part of type %q", p.Type)
		}
	}
	m.Content = strings.Join(text, "\n")
	return nil
}

func orNull(b json.RawMessage) json.RawMessage {
	if len(b) == 0 {
		return json.RawMessage("null")
	}
	return b
}

// LastTool returns the content of the last tool message, or "".
func (r Request) LastTool() string {
	for i := len(r.Messages) - 1; i >= 0; i-- {
		if r.Messages[i].Role == "tool" {
			return r.Messages[i].Content
		}
	}
	return ""
}

// LastUser returns the content of the last user message, or "": in text
// mode it carries the tool's output.
func (r Request) LastUser() string {
	for i := len(r.Messages) - 1; i >= 0; i-- {
		if r.Messages[i].Role == "user" {
			return r.Messages[i].Content
		}
	}
	return ""
}

// ToolResult decodes the last tool message as terp's run_python result.
func (r Request) ToolResult() (agent.ToolMessage, error) {
	var res agent.ToolMessage
	err := json.Unmarshal([]byte(r.LastTool()), &res)
	return res, err
}

// Reply is what the scripted model answers.
type Reply struct {
	Content   string
	Reasoning string
	// ReasoningField is the field Reasoning is sent in: "reasoning_content"
	// (the default) or "reasoning".
	ReasoningField string
	Calls          []Call
	// Status, when not 0 or 200, makes the server answer with this HTTP
	// status and Body instead of a completion.
	Status int
	Body   string
	// Usage is reported with the reply; zero values get a small default.
	PromptTokens, CompletionTokens int
}

// Call is one tool call in a Reply.
type Call struct {
	ID        string
	Name      string
	Arguments string
}

// RunPython is a Reply that calls run_python with code.
func RunPython(code string) Reply {
	args, _ := json.Marshal(map[string]string{"code": code})
	return Reply{Calls: []Call{{Name: "run_python", Arguments: string(args)}}}
}

// Answer is a Reply with plain text.
func Answer(text string) Reply { return Reply{Content: text} }

// Step answers one request.
type Step func(Request) Reply

// Fixed is a Step that always gives r.
func Fixed(r Reply) Step { return func(Request) Reply { return r } }

// Server is a running scripted model.
type Server struct {
	*httptest.Server
	t      testing.TB
	mu     sync.Mutex
	steps  []Step
	reqs   []Request
	calls  int
	models string
	// each, when set, answers every request instead of steps (Each).
	each Step
}

// New starts a server that answers the i-th chat request with steps[i]. A
// request beyond the script fails the test. The server is closed when the test
// ends.
func New(t testing.TB, steps ...Step) *Server {
	return start(&Server{t: t, steps: steps})
}

func start(s *Server) *Server {
	t := s.t
	s.models = `{"object":"list","data":[{"id":"test-model","object":"model"}]}`
	mux := http.NewServeMux()
	mux.HandleFunc("/v1/chat/completions", s.chat)
	mux.HandleFunc("/v1/models", func(w http.ResponseWriter, _ *http.Request) {
		s.mu.Lock()
		body := s.models
		s.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, body)
	})
	s.Server = httptest.NewServer(mux)
	t.Cleanup(s.Close)
	return s
}

// BaseURL returns the base URL to configure as terp's endpoint.
func (s *Server) BaseURL() string { return s.URL + "/v1" }

// ServeModels sets the body GET /v1/models answers with, such as a list
// whose entries carry vLLM's max_model_len.
func (s *Server) ServeModels(body string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.models = body
}

// Requests returns the requests received so far.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.reqs...)
}

func (s *Server) chat(w http.ResponseWriter, r *http.Request) {
	var req Request
	body, err := io.ReadAll(r.Body)
	if err == nil {
		err = json.Unmarshal(body, &req)
	}
	if err != nil {
		http.Error(w, `{"error":{"message":"bad json"}}`, http.StatusBadRequest)
		return
	}
	req.body = body
	s.mu.Lock()
	i := s.calls
	s.calls++
	step := s.each
	if step == nil {
		s.reqs = append(s.reqs, req)
		if i < len(s.steps) {
			step = s.steps[i]
		}
	}
	s.mu.Unlock()
	if step == nil {
		s.t.Errorf("llmtest: request %d is beyond the script of %d steps", i+1, len(s.steps))
		http.Error(w, `{"error":{"message":"script exhausted"}}`, http.StatusInternalServerError)
		return
	}
	reply := step(req)
	if reply.Status != 0 && reply.Status != http.StatusOK {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(reply.Status)
		fmt.Fprint(w, reply.Body)
		return
	}
	for j := range reply.Calls {
		if reply.Calls[j].ID == "" {
			reply.Calls[j].ID = fmt.Sprintf("call_%d_%d", i, j)
		}
	}
	if reply.PromptTokens == 0 {
		reply.PromptTokens = 100
	}
	if reply.CompletionTokens == 0 {
		reply.CompletionTokens = 10
	}
	if req.Stream {
		writeStream(w, reply)
	} else {
		writeJSON(w, reply)
	}
}

func finishReason(r Reply) string {
	if len(r.Calls) > 0 {
		return "tool_calls"
	}
	return "stop"
}

func usage(r Reply) map[string]int {
	return map[string]int{
		"prompt_tokens":     r.PromptTokens,
		"completion_tokens": r.CompletionTokens,
		"total_tokens":      r.PromptTokens + r.CompletionTokens,
	}
}

func toolCalls(r Reply, streamed bool) []map[string]any {
	var out []map[string]any
	for j, c := range r.Calls {
		tc := map[string]any{
			"id":   c.ID,
			"type": "function",
			"function": map[string]any{
				"name":      c.Name,
				"arguments": c.Arguments,
			},
		}
		if streamed {
			tc["index"] = j
		}
		out = append(out, tc)
	}
	return out
}

func writeJSON(w http.ResponseWriter, r Reply) {
	msg := map[string]any{"role": "assistant", "content": r.Content}
	if r.Reasoning != "" {
		msg[reasoningField(r)] = r.Reasoning
	}
	if len(r.Calls) > 0 {
		msg["tool_calls"] = toolCalls(r, false)
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{
		"id":      "chatcmpl-test",
		"object":  "chat.completion",
		"created": 1,
		"model":   "test-model",
		"choices": []any{map[string]any{"index": 0, "message": msg, "finish_reason": finishReason(r)}},
		"usage":   usage(r),
	})
}

// writeStream sends the reply the way vLLM does: role first, text in small
// pieces, each tool call's arguments split in two, finish_reason on a chunk of
// its own and usage last.
func writeStream(w http.ResponseWriter, r Reply) {
	w.Header().Set("Content-Type", "text/event-stream")
	chunk := func(delta map[string]any, finish any) {
		b, _ := json.Marshal(map[string]any{
			"id": "chatcmpl-test", "object": "chat.completion.chunk", "created": 1, "model": "test-model",
			"choices": []any{map[string]any{"index": 0, "delta": delta, "finish_reason": finish}},
		})
		fmt.Fprintf(w, "data: %s\n\n", b)
	}
	chunk(map[string]any{"role": "assistant", "content": ""}, nil)
	for _, piece := range pieces(r.Reasoning) {
		chunk(map[string]any{reasoningField(r): piece}, nil)
	}
	for _, piece := range pieces(r.Content) {
		chunk(map[string]any{"content": piece}, nil)
	}
	for j, c := range r.Calls {
		half := len(c.Arguments) / 2
		chunk(map[string]any{"tool_calls": []any{map[string]any{
			"index": j, "id": c.ID, "type": "function",
			"function": map[string]any{"name": c.Name, "arguments": c.Arguments[:half]},
		}}}, nil)
		chunk(map[string]any{"tool_calls": []any{map[string]any{
			"index": j, "function": map[string]any{"arguments": c.Arguments[half:]},
		}}}, nil)
	}
	chunk(map[string]any{}, finishReason(r))
	b, _ := json.Marshal(map[string]any{
		"id": "chatcmpl-test", "object": "chat.completion.chunk", "created": 1, "model": "test-model",
		"choices": []any{}, "usage": usage(r),
	})
	fmt.Fprintf(w, "data: %s\n\ndata: [DONE]\n\n", b)
}

func reasoningField(r Reply) string {
	if r.ReasoningField != "" {
		return r.ReasoningField
	}
	return "reasoning_content"
}

// pieces splits s into chunks of a few words, as servers stream tokens.
func pieces(s string) []string {
	if s == "" {
		return nil
	}
	var out []string
	words := strings.SplitAfter(s, " ")
	for i := 0; i < len(words); i += 3 {
		end := min(i+3, len(words))
		out = append(out, strings.Join(words[i:end], ""))
	}
	return out
}
