package llm

import (
	"bytes"
	"encoding/json"
	"strings"

	openai "github.com/sashabaranov/go-openai"
)

// emptySchema stands in for a tool without parameters: servers reject a
// function whose parameters are null.
var emptySchema = json.RawMessage(`{"type":"object","properties":{}}`)

// emptyToolOutput stands in for a tool message with no text: go-openai omits
// an empty content, and vLLM rejects a tool message without one.
const emptyToolOutput = "(no output)"

// wireRequest converts req to go-openai's request type, so the body is the
// one OpenAI SDKs send.
func (c *Client) wireRequest(req Request) openai.ChatCompletionRequest {
	w := openai.ChatCompletionRequest{
		Model:    req.Model,
		Messages: make([]openai.ChatCompletionMessage, 0, len(req.Messages)),
		Stream:   c.cfg.Stream,
	}
	if c.cfg.Stream {
		w.StreamOptions = &openai.StreamOptions{IncludeUsage: true}
	}
	for _, m := range textForm(withoutEchoes(req.Messages, req.Tools), req.Dialect == DialectText) {
		w.Messages = append(w.Messages, wireMessage(m))
	}
	if req.Dialect == DialectText {
		// The server may refuse tools, or its template may not render
		// them: the caller's system prompt describes the tool instead.
		return w
	}
	for _, t := range req.Tools {
		params := t.Parameters
		if len(params) == 0 {
			params = emptySchema
		}
		w.Tools = append(w.Tools, openai.Tool{
			Type: openai.ToolTypeFunction,
			Function: &openai.FunctionDefinition{
				Name:        t.Name,
				Description: t.Description,
				Parameters:  params,
			},
		})
	}
	return w
}

func wireMessage(m Message) openai.ChatCompletionMessage {
	w := openai.ChatCompletionMessage{Role: m.Role, Content: m.Content, ToolCallID: m.ToolCallID, ReasoningContent: m.Reasoning}
	if m.Role == RoleTool && w.Content == "" {
		w.Content = emptyToolOutput
	}
	if len(m.Images) > 0 {
		// Parts: the text, then each image.
		w.MultiContent = []openai.ChatMessagePart{{Type: openai.ChatMessagePartTypeText, Text: m.Content}}
		for _, url := range m.Images {
			w.MultiContent = append(w.MultiContent, openai.ChatMessagePart{Type: openai.ChatMessagePartTypeImageURL, ImageURL: &openai.ChatMessageImageURL{URL: url}})
		}
		w.Content = ""
	}
	for _, tc := range m.ToolCalls {
		w.ToolCalls = append(w.ToolCalls, openai.ToolCall{
			ID:   tc.ID,
			Type: openai.ToolTypeFunction,
			Function: openai.FunctionCall{
				Name:      tc.Name,
				Arguments: wireArguments(tc.Arguments),
			},
		})
	}
	return w
}

// wireArguments makes a call's arguments safe to send back in the history.
// Servers parse them: Ollama rejects "" and anything but an object, and vLLM
// fails the whole request on invalid JSON. Arguments double-encoded as a
// string that holds the object go back as the object. The model's own text
// may be neither (the agent answered such a call with an error), so it is sent
// wrapped in an object that keeps it readable.
func wireArguments(args string) string {
	// A history saved before the assembler unwrapped double-encoded
	// arguments may still hold them.
	args = unwrapArguments(args)
	trimmed := strings.TrimSpace(args)
	if trimmed == "" {
		return "{}"
	}
	if trimmed[0] == '{' && json.Valid([]byte(trimmed)) {
		return args
	}
	b, _ := json.Marshal(map[string]string{"unparsed_arguments": args})
	return string(b)
}

// withReasoning copies each message's reasoning_content to "reasoning" as
// well: servers read one or the other (vLLM 0.10+ and Ollama "reasoning",
// older vLLM, SGLang and llama.cpp "reasoning_content"), and go-openai's
// message type has only the second.
func withReasoning(body []byte) ([]byte, error) {
	var v map[string]json.RawMessage
	if err := json.Unmarshal(body, &v); err != nil {
		return nil, err
	}
	var msgs []map[string]json.RawMessage
	if err := json.Unmarshal(v["messages"], &msgs); err != nil {
		return nil, err
	}
	for _, m := range msgs {
		if r, ok := m["reasoning_content"]; ok {
			m["reasoning"] = r
		}
	}
	raw, err := json.Marshal(msgs)
	if err != nil {
		return nil, err
	}
	v["messages"] = raw
	return json.Marshal(v)
}

// withSampling sets the sampling settings the client gave in body, as
// given: go-openai's request drops a temperature or top_p of 0, which
// asks for greedy decoding.
func withSampling(body []byte, s Sampling) ([]byte, error) {
	if s.Temperature == nil && s.TopP == nil && s.MaxTokens == 0 && s.Stop == nil && s.Seed == nil {
		return body, nil
	}
	var v map[string]any
	d := json.NewDecoder(bytes.NewReader(body))
	d.UseNumber() // the rest of the body as it was
	if err := d.Decode(&v); err != nil {
		return nil, err
	}
	if s.Temperature != nil {
		v["temperature"] = *s.Temperature
	}
	if s.TopP != nil {
		v["top_p"] = *s.TopP
	}
	if s.MaxTokens > 0 {
		v["max_tokens"] = s.MaxTokens
	}
	if len(s.Stop) > 0 {
		v["stop"] = s.Stop
	}
	if s.Seed != nil {
		v["seed"] = *s.Seed
	}
	return json.Marshal(v)
}

// sendsReasoning reports whether any message carries reasoning back.
func sendsReasoning(msgs []Message) bool {
	for _, m := range msgs {
		if m.Reasoning != "" {
			return true
		}
	}
	return false
}
