package openaiapi

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/terpdev/terp/internal/llm"
	"github.com/terpdev/terp/internal/serve"
	"github.com/terpdev/terp/internal/serve/state"
)

// A Responses request without the code_interpreter tool (Codex, an agent
// with tools of its own, a plain question) needs no sandbox: it is
// answered as an adapter onto the model server's chat completions. The
// input becomes chat messages, the function tools go upstream, the model's
// text and function calls come back as OpenAI's output items (streamed as
// OpenAI's events), and a function_call_output in the next request's input
// answers a call. No container is opened.

// hasCodeInterpreter reports whether tools hold the code_interpreter tool.
func hasCodeInterpreter(tools []toolSpec) bool {
	for _, t := range tools {
		if t.Type == "code_interpreter" {
			return true
		}
	}
	return false
}

// plainResponse answers req as the adapter.
func (s *api) plainResponse(w http.ResponseWriter, r *http.Request, req *responseRequest) {
	ctx, owner := r.Context(), serve.Owner(r)
	model := req.Model
	if model == "" {
		model = s.Settings().Model
	}
	msgs, prev, perr := s.plainMessages(ctx, owner, req, model)
	if perr != nil {
		perr.answer(w)
		return
	}
	tools, perr := plainTools(req)
	if perr != nil {
		perr.answer(w)
		return
	}
	if perr := checkSampling(req.Temperature, req.TopP, req.MaxOutputTokens, "max_output_tokens"); perr != nil {
		perr.answer(w)
		return
	}
	if err := s.CheckTokens(ctx, owner); err != nil {
		writeFailure(w, err)
		return
	}
	resp := newResponseObject(req, model)
	if prev != nil {
		resp.PreviousResponseID = &req.PreviousResponseID
	}
	b := &outputBuilder{w: w, resp: resp}
	if req.Stream {
		b.sse, _ = serve.StartSSE(w)
	}
	b.start()
	a := &adapted{b: b, calls: map[string]int{}}
	reply, err := s.Model().Complete(ctx, llm.Request{Model: model, Messages: msgs, Tools: tools, Dialect: llm.DialectNative,
		Sampling: llm.Sampling{Temperature: req.Temperature, TopP: req.TopP, MaxTokens: req.MaxOutputTokens}}, a.delta)
	u := reply.Usage
	s.CountTokens(context.WithoutCancel(ctx), owner, int64(u.TotalTokens))
	b.mu.Lock()
	defer b.mu.Unlock()
	if err != nil {
		if !b.Streaming() {
			writeFailure(w, err)
			return
		}
		f := failure(w, err)
		resp.Status, resp.Error = "failed", &responseError{Code: cmp.Or(f.code, f.typ), Message: f.message}
		b.emit("response.failed", map[string]any{"response": resp})
		return
	}
	a.finish(reply)
	resp.Usage = &responseUsage{InputTokens: u.PromptTokens, OutputTokens: u.CompletionTokens, TotalTokens: u.TotalTokens,
		InputTokensDetails: map[string]int{"cached_tokens": 0}, OutputTokensDetails: map[string]int{"reasoning_tokens": 0}}
	resp.Status, b.terminal = "completed", "response.completed"
	if reply.FinishReason == "length" {
		resp.Status, resp.IncompleteDetails, b.terminal = "incomplete", &incomplete{Reason: "max_output_tokens"}, "response.incomplete"
	}
	if resp.Store {
		s.keep(ctx, &storedResponse{owner: owner, history: append(msgs, reply.Message()), object: *resp, parent: prev})
	}
	if b.sse == nil {
		writeJSON(w, http.StatusOK, resp)
		return
	}
	b.emit(b.terminal, map[string]any{"response": resp})
}

// plainTools are req's function tools as the model server takes them. The
// tools OpenAI runs itself (web_search, file_search, ...) and the
// namespaces of tools Codex sends are not offered: the model server runs
// none of them, and terp serves only the code interpreter. A tool_choice
// of "none" offers none.
func plainTools(req *responseRequest) ([]llm.Tool, *paramError) {
	var tools []llm.Tool
	for i, t := range req.Tools {
		if t.Type != "function" {
			continue
		}
		if t.Name == "" {
			return nil, badParam(fmt.Sprintf("tools[%d].name", i), "a function tool has a name")
		}
		params := t.Parameters
		if len(params) == 0 || string(params) == "null" {
			params = json.RawMessage(`{"type":"object","properties":{}}`)
		}
		tools = append(tools, llm.Tool{Name: t.Name, Description: t.Description, Parameters: params})
	}
	var choice string
	if json.Unmarshal(req.ToolChoice, &choice) == nil && choice == "none" {
		return nil, nil
	}
	return tools, nil
}

// plainMessages are the chat messages of req: the previous response's
// history (one the adapter answered), the instructions as the system
// message, then the input items in order: messages, the function calls
// the client echoes, and their outputs as tool messages.
func (s *api) plainMessages(ctx context.Context, owner string, req *responseRequest, model string) ([]llm.Message, *storedResponse, *paramError) {
	var msgs []llm.Message
	var prev *storedResponse
	if req.PreviousResponseID != "" {
		var err error
		prev, err = s.stored(ctx, owner, req.PreviousResponseID)
		var perr *paramError
		switch {
		case errors.As(err, &perr):
			return nil, nil, perr
		case errors.Is(err, state.ErrNotFound):
			return nil, nil, badParam("previous_response_id", fmt.Sprintf("no response found with id '%s'", req.PreviousResponseID))
		case err != nil:
			return nil, nil, &paramError{err: err}
		}
		for _, m := range prev.history {
			if m.Role != llm.RoleSystem { // this request's instructions stand instead
				msgs = append(msgs, m)
			}
		}
	}
	if req.Instructions != "" {
		msgs = append([]llm.Message{{Role: llm.RoleSystem, Content: req.Instructions}}, msgs...)
	}
	var text string
	if json.Unmarshal(req.Input, &text) == nil {
		if strings.TrimSpace(text) == "" {
			return nil, nil, badParam("input", "input is empty")
		}
		return append(msgs, llm.Message{Role: llm.RoleUser, Content: text}), prev, nil
	}
	var items []struct {
		inputItem
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	}
	if err := json.Unmarshal(req.Input, &items); err != nil {
		return nil, nil, badParam("input", "input is a string or an array of input items")
	}
	images, shows := 0, s.Settings().ForModel(model).Images
	for i, it := range items {
		at := fmt.Sprintf("input[%d]", i)
		switch it.Type {
		case "function_call":
			call := llm.ToolCall{ID: it.CallID, Name: it.Name, Arguments: it.Arguments}
			if n := len(msgs); n > 0 && msgs[n-1].Role == llm.RoleAssistant {
				msgs[n-1].ToolCalls = append(msgs[n-1].ToolCalls, call)
			} else {
				msgs = append(msgs, llm.Message{Role: llm.RoleAssistant, ToolCalls: []llm.ToolCall{call}})
			}
			continue
		case "function_call_output":
			out, ok := it.outputText()
			if it.CallID == "" || !ok {
				return nil, nil, badParam(at, "a function_call_output has the call_id it answers and its output as a string")
			}
			msgs = append(msgs, llm.Message{Role: llm.RoleTool, ToolCallID: it.CallID, Content: out})
			continue
		case "reasoning":
			continue // the model's own, which is not sent back
		case "", "message":
		default:
			return nil, nil, badParam(at+".type", fmt.Sprintf("input items of type %q are not supported", it.Type))
		}
		var parts []inputPart
		var plain string
		if json.Unmarshal(it.Content, &plain) == nil {
			parts = []inputPart{{Type: "input_text", Text: plain}}
		} else if err := json.Unmarshal(it.Content, &parts); err != nil {
			return nil, nil, badParam(at+".content", "content is a string or an array of parts")
		}
		m := llm.Message{Role: cmpRole(it.Role)}
		var said []string
		for j, p := range parts {
			param := fmt.Sprintf("%s.content[%d]", at, j)
			switch p.Type {
			case "input_text", "output_text", "text":
				said = append(said, p.Text)
			case "input_image":
				images++
				f, perr := s.inputImage(ctx, owner, p, param, images)
				switch {
				case perr != nil:
					return nil, nil, perr
				case f.image == "":
					return nil, nil, badParam(param, "without the code_interpreter tool an input_image goes to the model: send a PNG, JPEG, GIF or WebP as a data URL or a file_id")
				case !shows:
					return nil, nil, badParam(param, fmt.Sprintf("the model %s takes no images (its profile says images = false); add the code_interpreter tool to give the image to the code instead", model))
				}
				m.Images = append(m.Images, f.image)
			default:
				return nil, nil, badParam(param+".type", fmt.Sprintf("content parts of type %q need the code_interpreter tool; without it send text and images", p.Type))
			}
		}
		switch m.Role {
		case llm.RoleUser, llm.RoleAssistant, llm.RoleSystem:
		default:
			return nil, nil, badParam(at+".role", fmt.Sprintf("role %q is not one of user, assistant, system, developer", it.Role))
		}
		m.Content = strings.Join(said, "\n")
		msgs = append(msgs, m)
	}
	if len(msgs) == 0 {
		return nil, nil, badParam("input", "input has no messages")
	}
	return msgs, prev, nil
}

// cmpRole is an input message's role as chat completions name it.
func cmpRole(role string) string {
	switch role {
	case "", "user":
		return llm.RoleUser
	case "developer", "system":
		return llm.RoleSystem
	}
	return role
}

// adapted streams one model reply as OpenAI's output items: a message
// whose text comes as it is written, and a function_call item per call
// whose arguments come as they are written.
type adapted struct {
	b *outputBuilder
	// text is the index of the message item once its text began; calls
	// are the function_call items by the call's id.
	text  *int
	calls map[string]int
}

// delta is the model client's onDelta.
func (a *adapted) delta(d llm.Delta) {
	b := a.b
	b.mu.Lock()
	defer b.mu.Unlock()
	switch d.Kind {
	case llm.DeltaContent:
		idx := a.message()
		item := b.resp.Output[idx].(*messageItem)
		b.emit("response.output_text.delta", map[string]any{"item_id": item.ID, "output_index": idx, "content_index": 0, "delta": d.Text, "logprobs": []any{}})
	case llm.DeltaArguments:
		idx, ok := a.calls[d.ID]
		if !ok {
			idx = a.call(d.ID, d.Name)
		}
		item := b.resp.Output[idx].(*functionCallItem)
		b.emit("response.function_call_arguments.delta", map[string]any{"output_index": idx, "item_id": item.ID, "delta": d.Text})
	}
}

// message is the index of the message item, added on first use.
func (a *adapted) message() int {
	if a.text != nil {
		return *a.text
	}
	b := a.b
	item := &messageItem{Type: "message", ID: serve.NewID("msg_"), Status: "in_progress", Role: "assistant", Content: []outputText{}}
	idx := len(b.resp.Output)
	a.text = &idx
	b.resp.Output = append(b.resp.Output, item)
	b.emit("response.output_item.added", map[string]any{"output_index": idx, "item": item})
	b.emit("response.content_part.added", map[string]any{"item_id": item.ID, "output_index": idx, "content_index": 0,
		"part": outputText{Type: "output_text", Annotations: []annotation{}, Logprobs: []any{}}})
	return idx
}

// call adds a function_call item for the call id, its arguments to come.
func (a *adapted) call(id, name string) int {
	b := a.b
	item := &functionCallItem{Type: "function_call", ID: serve.NewID("fc_"), CallID: id, Name: name, Status: "in_progress"}
	idx := len(b.resp.Output)
	a.calls[id] = idx
	b.resp.Output = append(b.resp.Output, item)
	b.emit("response.output_item.added", map[string]any{"output_index": idx, "item": item})
	return idx
}

// finish closes the items with what the reply holds in the end: its
// answer (reasoning and call markup taken out) and its calls' arguments,
// adding those no delta began. The caller holds b.mu.
func (a *adapted) finish(reply llm.Response) {
	b := a.b
	if reply.Content != "" || a.text != nil {
		idx := a.message()
		item := b.resp.Output[idx].(*messageItem)
		part := outputText{Type: "output_text", Text: reply.Content, Annotations: []annotation{}, Logprobs: []any{}}
		b.emit("response.output_text.done", map[string]any{"item_id": item.ID, "output_index": idx, "content_index": 0, "text": reply.Content, "logprobs": []any{}})
		b.emit("response.content_part.done", map[string]any{"item_id": item.ID, "output_index": idx, "content_index": 0, "part": part})
		item.Status, item.Content = "completed", []outputText{part}
		b.emit("response.output_item.done", map[string]any{"output_index": idx, "item": item})
	}
	for _, c := range reply.ToolCalls {
		idx, ok := a.calls[c.ID]
		if !ok {
			idx = a.call(c.ID, c.Name)
			b.emit("response.function_call_arguments.delta", map[string]any{"output_index": idx, "item_id": b.resp.Output[idx].(*functionCallItem).ID, "delta": c.Arguments})
		}
		item := b.resp.Output[idx].(*functionCallItem)
		item.Name, item.Arguments, item.Status = c.Name, c.Arguments, "completed"
		b.emit("response.function_call_arguments.done", map[string]any{"output_index": idx, "item_id": item.ID, "arguments": c.Arguments})
		b.emit("response.output_item.done", map[string]any{"output_index": idx, "item": item})
	}
}
