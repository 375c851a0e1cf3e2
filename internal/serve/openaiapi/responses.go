package openaiapi

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"path"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/terpdev/terp/internal/agent"
	"github.com/terpdev/terp/internal/conversation"
	"github.com/terpdev/terp/internal/llm"
	"github.com/terpdev/terp/internal/serve"
	"github.com/terpdev/terp/internal/serve/state"
)

// responseRequest is the body of POST /v1/responses, as far as terp reads
// it.
type responseRequest struct {
	Model              string            `json:"model"`
	Input              json.RawMessage   `json:"input"`
	Instructions       string            `json:"instructions"`
	Temperature        *float64          `json:"temperature"`
	TopP               *float64          `json:"top_p"`
	ToolChoice         json.RawMessage   `json:"tool_choice"`
	PreviousResponseID string            `json:"previous_response_id"`
	Store              *bool             `json:"store"`
	Include            []string          `json:"include"`
	Stream             bool              `json:"stream"`
	MaxOutputTokens    int               `json:"max_output_tokens"`
	Metadata           map[string]string `json:"metadata"`
	Tools              []toolSpec        `json:"tools"`
}

// toolSpec is one entry of tools.
type toolSpec struct {
	Type      string          `json:"type"`
	Container json.RawMessage `json:"container,omitempty"`
	// The fields of a function tool.
	Name        string          `json:"name,omitempty"`
	Description string          `json:"description,omitempty"`
	Parameters  json.RawMessage `json:"parameters,omitempty"`
	Strict      *bool           `json:"strict,omitempty"`
}

// autoContainer is a code_interpreter tool's {"type": "auto", ...}.
type autoContainer struct {
	Type        string         `json:"type"`
	FileIDs     []string       `json:"file_ids"`
	MemoryLimit string         `json:"memory_limit"`
	Network     *networkPolicy `json:"network_policy"`
}

// inputItem is one item of an input array: a message (with a role), or a
// function call's output.
type inputItem struct {
	Type    string          `json:"type"`
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
	CallID  string          `json:"call_id"`
	Output  json.RawMessage `json:"output"`
}

// outputText is a function_call_output's output: a string, or parts whose
// text is joined.
func (it inputItem) outputText() (string, bool) {
	var s string
	if json.Unmarshal(it.Output, &s) == nil {
		return s, true
	}
	var parts []inputPart
	if json.Unmarshal(it.Output, &parts) != nil {
		return "", false
	}
	var texts []string
	for _, p := range parts {
		texts = append(texts, p.Text)
	}
	return strings.Join(texts, "\n"), true
}

// inputPart is one part of a message's content.
type inputPart struct {
	Type     string `json:"type"`
	Text     string `json:"text"`
	FileID   string `json:"file_id"`
	Filename string `json:"filename"`
	FileData string `json:"file_data"`
	// ImageURL is an input_image's: a data URL, or an http(s) URL.
	ImageURL string `json:"image_url"`
}

// responseObject is OpenAI's response object.
type responseObject struct {
	ID                 string            `json:"id"`
	Object             string            `json:"object"`
	CreatedAt          int64             `json:"created_at"`
	Status             string            `json:"status"`
	Error              *responseError    `json:"error"`
	IncompleteDetails  *incomplete       `json:"incomplete_details"`
	Instructions       *string           `json:"instructions"`
	MaxOutputTokens    *int              `json:"max_output_tokens"`
	Model              string            `json:"model"`
	Output             []any             `json:"output"`
	ParallelToolCalls  bool              `json:"parallel_tool_calls"`
	PreviousResponseID *string           `json:"previous_response_id"`
	Store              bool              `json:"store"`
	Temperature        float64           `json:"temperature"`
	ToolChoice         string            `json:"tool_choice"`
	Tools              []toolSpec        `json:"tools"`
	TopP               float64           `json:"top_p"`
	Truncation         string            `json:"truncation"`
	Usage              *responseUsage    `json:"usage"`
	Metadata           map[string]string `json:"metadata"`
	Text               map[string]any    `json:"text"`
}

type responseError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

type incomplete struct {
	Reason string `json:"reason"`
}

type responseUsage struct {
	InputTokens         int            `json:"input_tokens"`
	InputTokensDetails  map[string]int `json:"input_tokens_details"`
	OutputTokens        int            `json:"output_tokens"`
	OutputTokensDetails map[string]int `json:"output_tokens_details"`
	TotalTokens         int            `json:"total_tokens"`
}

// codeCall is a code_interpreter_call output item.
type codeCall struct {
	Type        string       `json:"type"`
	ID          string       `json:"id"`
	Status      string       `json:"status"`
	Code        string       `json:"code"`
	ContainerID string       `json:"container_id"`
	Outputs     []codeOutput `json:"outputs"`
}

type codeOutput struct {
	Type string `json:"type"`
	Logs string `json:"logs,omitempty"`
	URL  string `json:"url,omitempty"`
}

// messageItem is an assistant message output item.
type messageItem struct {
	Type    string       `json:"type"`
	ID      string       `json:"id"`
	Status  string       `json:"status"`
	Role    string       `json:"role"`
	Content []outputText `json:"content"`
}

type outputText struct {
	Type        string       `json:"type"`
	Text        string       `json:"text"`
	Annotations []annotation `json:"annotations"`
	Logprobs    []any        `json:"logprobs"`
}

type annotation struct {
	Type        string `json:"type"`
	ContainerID string `json:"container_id"`
	FileID      string `json:"file_id"`
	Filename    string `json:"filename"`
	StartIndex  int    `json:"start_index"`
	EndIndex    int    `json:"end_index"`
	// URL is terp's: a link to the file as it was, which a browser opens
	// without a key (serve.Link), for clients that render the answer.
	URL string `json:"url,omitempty"`
}

// storedResponse is a response kept for GET, DELETE and
// previous_response_id: what the client was sent, and the whole history
// (code and outputs) the model had at its end.
type storedResponse struct {
	owner     string
	container string
	history   []llm.Message
	object    responseObject
	// parent is the response it went on from, when it was stored as the
	// messages it added to that one's history (storedHistory), and depth
	// how many such steps lead back to a whole history.
	parent *storedResponse
	depth  int
}

// maxResponses bounds the responses kept per key; past it the oldest are
// forgotten.
const maxResponses = 1000

// wholeEvery bounds the steps of a stored history back to a whole one: a
// response that goes on from another is stored as the messages it added,
// so that a long chat does not store its history again with each answer,
// and every wholeEvery-th is stored whole, so that reading one reads at
// most that many records and a forgotten old response breaks no chain
// that runs past the snapshot after it.
const wholeEvery = 16

// storedHistory is a history as a response's record keeps it: whole (a
// JSON array of messages, as terp has always stored it), or the messages
// added to the history of the response Parent names.
type storedHistory struct {
	Parent   string        `json:"parent"`
	Depth    int           `json:"depth"`
	Messages []llm.Message `json:"messages"`
}

// keep stores sr for GET and previous_response_id. A response that cannot
// be stored is logged: the client has its answer, and only a later
// previous_response_id naming it fails.
func (s *api) keep(ctx context.Context, sr *storedResponse) {
	obj, err := json.Marshal(sr.object)
	if err != nil {
		s.Log().Warn("storing response", "response", sr.object.ID, "error", err)
		return
	}
	var hist []byte
	if p := sr.parent; p != nil && p.depth+1 < wholeEvery && goesOn(sr.history, p.history) {
		hist, err = json.Marshal(storedHistory{Parent: p.object.ID, Depth: p.depth + 1, Messages: sr.history[len(p.history):]})
	} else {
		hist, err = json.Marshal(sr.history)
	}
	if err != nil {
		s.Log().Warn("storing response", "response", sr.object.ID, "error", err)
		return
	}
	rec := state.Response{ID: sr.object.ID, Owner: sr.owner, Container: sr.container, CreatedAt: time.Now(), Object: obj, History: hist}
	if err := s.State().SaveResponse(context.WithoutCancel(ctx), rec, maxResponses); err != nil {
		s.Log().Warn("storing response", "response", sr.object.ID, "error", err)
	}
}

// goesOn reports whether history begins with earlier, message for message
// as they are stored.
func goesOn(history, earlier []llm.Message) bool {
	if len(history) < len(earlier) {
		return false
	}
	a, err1 := json.Marshal(history[:len(earlier)])
	b, err2 := json.Marshal(earlier)
	return err1 == nil && err2 == nil && bytes.Equal(a, b)
}

// stored is owner's stored response id, with its whole history.
func (s *api) stored(ctx context.Context, owner, id string) (*storedResponse, error) {
	return s.storedAt(ctx, owner, id, wholeEvery)
}

// storedAt is stored, reading at most steps records back to a whole
// history; a deleted response is found only as another's parent.
func (s *api) storedAt(ctx context.Context, owner, id string, steps int) (*storedResponse, error) {
	rec, err := s.State().Response(ctx, owner, id)
	if err != nil {
		return nil, err
	}
	if isDeleted(rec) {
		if steps == wholeEvery {
			return nil, state.ErrNotFound
		}
		rec.Object = json.RawMessage(`{}`)
	}
	sr := &storedResponse{owner: rec.Owner, container: rec.Container}
	if err := json.Unmarshal(rec.Object, &sr.object); err != nil {
		return nil, fmt.Errorf("response %s is damaged: %w", id, err)
	}
	if len(rec.History) > 0 && rec.History[0] == '[' {
		if err := json.Unmarshal(rec.History, &sr.history); err != nil {
			return nil, fmt.Errorf("response %s is damaged: %w", id, err)
		}
		return sr, nil
	}
	var part storedHistory
	if err := json.Unmarshal(rec.History, &part); err != nil || part.Parent == "" || steps <= 1 {
		return nil, fmt.Errorf("response %s is damaged: its history is neither whole nor a part of one", id)
	}
	parent, err := s.storedAt(ctx, owner, part.Parent, steps-1)
	if errors.Is(err, state.ErrNotFound) {
		return nil, badParam("previous_response_id", fmt.Sprintf("response %s goes on from %s, which was forgotten (a key keeps its last %d responses): go on from a later response, or start anew", id, part.Parent, maxResponses))
	}
	if err != nil {
		return nil, err
	}
	sr.parent, sr.depth = parent, part.Depth
	sr.history = append(slices.Clip(parent.history), part.Messages...)
	return sr, nil
}

func (s *api) getResponse(w http.ResponseWriter, r *http.Request) {
	rec, err := s.State().Response(r.Context(), serve.Owner(r), r.PathValue("id"))
	if err == nil && isDeleted(rec) {
		err = state.ErrNotFound
	}
	if err != nil {
		stateError(w, err, "response", r.PathValue("id"))
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(append(rec.Object, '\n'))
}

// deleteResponse forgets a response for its client: GET and
// previous_response_id no longer find it. Its record stays, as a deleted
// one with its part of a history, for the responses that went on from it
// (storedHistory), until the key's oldest are forgotten.
func (s *api) deleteResponse(w http.ResponseWriter, r *http.Request) {
	id, owner := r.PathValue("id"), serve.Owner(r)
	rec, err := s.State().Response(r.Context(), owner, id)
	if err == nil && isDeleted(rec) {
		err = state.ErrNotFound
	}
	if err == nil {
		rec.Object = deletedObject
		err = s.State().SaveResponse(r.Context(), rec, maxResponses)
	}
	if err != nil {
		stateError(w, err, "response", id)
		return
	}
	writeJSON(w, http.StatusOK, deleted{ID: id, Object: "response", Deleted: true})
}

// deletedObject is the object of a deleted response's record.
var deletedObject = json.RawMessage(`{"deleted":true}`)

// isDeleted reports whether rec is a deleted response's.
func isDeleted(rec state.Response) bool { return bytes.Equal(rec.Object, deletedObject) }

// turnRequest is a response request read and checked: the question, the
// files to put in /work first, and the container to run in.
type turnRequest struct {
	question string
	// outputs answer the function calls the last response ended on.
	outputs []agent.ClientOutput
	// tools are the client's function tools.
	tools []llm.Tool
	files []namedFile
	prev  *storedResponse
	// lease is the container the turn runs in, leased.
	lease *serve.Lease
	logs  bool // include code_interpreter_call.outputs
	// options are the client's sampling, instructions and output budget.
	options agent.TurnOptions
}

type namedFile struct {
	name string
	data []byte      // inline file_data
	file *state.File // or an uploaded file
	// image is the data URL an image came as, which a model that takes
	// images sees.
	image string
	// fetch is an input_image's http(s) URL, fetched once the container's
	// network policy is known (fetchImages), at param.
	fetch, param string
}

// imagesOf are the images among files, as data URLs.
func imagesOf(files []namedFile) []string {
	var out []string
	for _, f := range files {
		if f.image != "" {
			out = append(out, f.image)
		}
	}
	return out
}

func (s *api) createResponse(w http.ResponseWriter, r *http.Request) {
	var req responseRequest
	if !decode(w, r, &req) {
		return
	}
	if !hasCodeInterpreter(req.Tools) {
		s.plainResponse(w, r, &req)
		return
	}
	owner := serve.Owner(r)
	var tr *turnRequest
	var b *outputBuilder
	s.RunTurn(w, r, serve.ModelTurn{
		Open: func(ctx context.Context) (*serve.Lease, error) {
			var perr *paramError
			if tr, perr = s.readTurn(ctx, owner, &req); perr != nil {
				return nil, perr
			}
			return tr.lease, nil
		},
		Ready: func(ctx context.Context, c *serve.Container) (conversation.TurnRequest, serve.TurnSink, error) {
			if err := s.putFiles(ctx, c, tr.files); err != nil {
				return conversation.TurnRequest{}, nil, err
			}
			b = s.newOutput(ctx, r, w, c, tr, &req)
			// The model, the client's tools and the history the turn goes
			// on from come with the turn, so that no other request on the
			// container comes between them and it. The history is the
			// previous response's, or none: a new line of questions in a
			// container used before keeps its files, not its history. A
			// rewind to the history the container has already costs
			// nothing.
			rewind := []llm.Message{}
			if tr.prev != nil {
				rewind = tr.prev.history
			}
			return conversation.TurnRequest{Question: tr.question, Outputs: tr.outputs, Options: tr.options, Images: imagesOf(tr.files),
				Model: req.Model, ClientTools: &tr.tools, Rewind: &rewind}, b, nil
		},
		After: func(ctx context.Context, c *serve.Container, turn conversation.Turn) {
			if b.resp.Store && turn.History != nil {
				s.keep(ctx, &storedResponse{owner: owner, container: c.ID, history: turn.History, object: *b.resp, parent: tr.prev})
			}
			s.Change(ctx, c, func(rec *state.Container) { rec.Last = b.resp.ID })
		},
	})
}

// newOutput is the sink of a response's turn: the response object, in
// progress, streamed from here on if the request asked.
func (s *api) newOutput(ctx context.Context, r *http.Request, w http.ResponseWriter, c *serve.Container, tr *turnRequest, req *responseRequest) *outputBuilder {
	// The model the turn runs on: the request's, which the turn switches
	// the container to, or the container's.
	model := req.Model
	if model == "" {
		model = c.Conversation().Info().Model
	}
	resp := newResponseObject(req, model)
	if tr.prev != nil {
		resp.PreviousResponseID = &req.PreviousResponseID
	}
	b := &outputBuilder{w: w, resp: resp, container: c, outputs: tr.logs, link: s.linker(ctx, r, c),
		fileID: func(p string) string { return s.FileID(ctx, c, p) }}
	if req.Stream {
		b.sse, _ = serve.StartSSE(w) // a connection that cannot stream gets the response whole
	}
	b.start()
	return b
}

// newResponseObject is the response to req, in progress, on model.
func newResponseObject(req *responseRequest, model string) *responseObject {
	resp := &responseObject{ID: serve.NewID("resp_"), Object: "response", CreatedAt: time.Now().Unix(), Status: "in_progress",
		Model: model, Output: []any{}, ParallelToolCalls: true, Store: req.Store == nil || *req.Store,
		Temperature: 1, TopP: 1, ToolChoice: "auto", Tools: req.Tools, Truncation: "disabled", Metadata: req.Metadata,
		Text: map[string]any{"format": map[string]string{"type": "text"}}}
	if resp.Metadata == nil {
		resp.Metadata = map[string]string{}
	}
	if resp.Tools == nil {
		resp.Tools = []toolSpec{}
	}
	if req.Instructions != "" {
		resp.Instructions = &req.Instructions
	}
	if req.MaxOutputTokens > 0 {
		resp.MaxOutputTokens = &req.MaxOutputTokens
	}
	if req.Temperature != nil {
		resp.Temperature = *req.Temperature
	}
	if req.TopP != nil {
		resp.TopP = *req.TopP
	}
	return resp
}

// readTurn checks a request and finds or makes its container.
func (s *api) readTurn(ctx context.Context, owner string, req *responseRequest) (*turnRequest, *paramError) {
	tr := &turnRequest{logs: slices.Contains(req.Include, "code_interpreter_call.outputs")}
	var tool *toolSpec
	for i := range req.Tools {
		switch t := req.Tools[i]; t.Type {
		case "code_interpreter":
			tool = &req.Tools[i]
		case "function":
			if t.Name == "" {
				return nil, badParam(fmt.Sprintf("tools[%d].name", i), "a function tool has a name")
			}
			params := t.Parameters
			if len(params) == 0 || string(params) == "null" {
				params = json.RawMessage(`{"type":"object","properties":{}}`)
			}
			tr.tools = append(tr.tools, llm.Tool{Name: t.Name, Description: t.Description, Parameters: params})
		default:
			return nil, badParam("tools", fmt.Sprintf("terp serve runs the code_interpreter tool; a %q tool is not supported yet", req.Tools[i].Type))
		}
	}
	q, files, outputs, instructions, perr := s.readInput(ctx, owner, req.Input)
	if perr != nil {
		return nil, perr
	}
	tr.question, tr.files, tr.outputs = q, files, outputs
	if len(outputs) > 0 && req.PreviousResponseID == "" {
		return nil, badParam("previous_response_id", "function_call_output items continue a response: give its id as previous_response_id")
	}
	if perr := checkSampling(req.Temperature, req.TopP, req.MaxOutputTokens, "max_output_tokens"); perr != nil {
		return nil, perr
	}
	if req.Instructions != "" {
		instructions = append([]string{req.Instructions}, instructions...)
	}
	tr.options = agent.TurnOptions{Instructions: strings.Join(instructions, "\n\n"), MaxOutputTokens: req.MaxOutputTokens,
		Sampling: llm.Sampling{Temperature: req.Temperature, TopP: req.TopP}}
	if req.PreviousResponseID != "" {
		var err error
		tr.prev, err = s.stored(ctx, owner, req.PreviousResponseID)
		var perr *paramError
		switch {
		case errors.As(err, &perr):
			return nil, perr
		case errors.Is(err, state.ErrNotFound):
			return nil, badParam("previous_response_id", fmt.Sprintf("no response found with id '%s'", req.PreviousResponseID))
		case err != nil:
			return nil, &paramError{err: err}
		}
	}
	// The container: the one named, else the previous response's, else a
	// new one.
	var named string
	var auto autoContainer
	if len(tool.Container) > 0 && string(tool.Container) != "null" {
		if json.Unmarshal(tool.Container, &named) != nil {
			if err := json.Unmarshal(tool.Container, &auto); err != nil || (auto.Type != "auto" && auto.Type != "") {
				return nil, badParam("tools.container", `container is a container id ("cntr_...") or {"type": "auto"}`)
			}
		}
	}
	// The tools are given with the turn; a set it would refuse is the
	// client's mistake, answered before anything runs.
	if err := agent.CheckClientTools(tr.tools); err != nil {
		return nil, badParam("tools", err.Error())
	}
	if named == "" && tr.prev == nil {
		network := networkPolicy{Type: "disabled"}
		if auto.Network != nil {
			network = *auto.Network
		}
		if perr := fetchImages(ctx, network, tr.files); perr != nil {
			return nil, perr
		}
		l, perr := s.newContainer(ctx, owner, containerOptions{FileIDs: auto.FileIDs, MemoryLimit: auto.MemoryLimit, Network: auto.Network})
		if perr != nil {
			return nil, perr
		}
		tr.lease = l
		return tr, nil
	}
	for _, id := range auto.FileIDs {
		f, perr := s.storedFile(ctx, owner, id, "tools.container.file_ids", fmt.Sprintf("no file found with id '%s'", id))
		if perr != nil {
			return nil, perr
		}
		tr.files = append(tr.files, namedFile{name: f.Filename, file: &f})
	}
	id, param, missing := named, "tools.container", fmt.Sprintf("no container found with id '%s'", named)
	if named == "" && tr.prev.container == "" {
		return nil, badParam("previous_response_id", fmt.Sprintf("response %s was answered without the code_interpreter tool, in no container: "+
			"give the tool a container (\"container\": {\"type\": \"auto\"}) without previous_response_id, and the earlier messages as input", req.PreviousResponseID))
	}
	if named == "" {
		id, param = tr.prev.container, "previous_response_id"
		missing = fmt.Sprintf("the container of response %s (%s) has expired; start a new response without previous_response_id", req.PreviousResponseID, tr.prev.container)
	}
	l, err := s.Acquire(ctx, owner, id)
	switch {
	case err != nil:
		return nil, &paramError{err: err}
	case l == nil:
		return nil, badParam(param, missing)
	}
	if perr := fetchImages(ctx, l.Container().Record().Network, tr.files); perr != nil {
		l.Release(ctx)
		return nil, perr
	}
	tr.lease = l
	return tr, nil
}

// readInput turns input (a string, or an array of items) into the question,
// the files it attaches, the function outputs it answers calls with, and
// the instructions of its system and developer messages.
func (s *api) readInput(ctx context.Context, owner string, raw json.RawMessage) (string, []namedFile, []agent.ClientOutput, []string, *paramError) {
	var text string
	if json.Unmarshal(raw, &text) == nil {
		if strings.TrimSpace(text) == "" {
			return "", nil, nil, nil, badParam("input", "input is empty")
		}
		return text, nil, nil, nil, nil
	}
	var items []inputItem
	if err := json.Unmarshal(raw, &items); err != nil {
		return "", nil, nil, nil, badParam("input", "input is a string or an array of input items")
	}
	var lines []string
	var files []namedFile
	var outputs []agent.ClientOutput
	var instructions []string
	images := 0
	for i, it := range items {
		switch {
		case it.Type == "function_call_output":
			if it.CallID == "" {
				return "", nil, nil, nil, badParam(fmt.Sprintf("input[%d].call_id", i), "a function_call_output names the call_id it answers")
			}
			out, ok := it.outputText()
			if !ok {
				return "", nil, nil, nil, badParam(fmt.Sprintf("input[%d].output", i), "a function_call_output's output is a string or an array of text parts")
			}
			outputs = append(outputs, agent.ClientOutput{CallID: it.CallID, Output: out})
			continue
		case it.Type == "function_call":
			continue // the call being answered, as the client echoes it
		case it.Type != "" && it.Type != "message":
			return "", nil, nil, nil, badParam(fmt.Sprintf("input[%d].type", i), fmt.Sprintf("input items of type %q are not supported", it.Type))
		}
		var parts []inputPart
		var plain string
		if json.Unmarshal(it.Content, &plain) == nil {
			parts = []inputPart{{Type: "input_text", Text: plain}}
		} else if err := json.Unmarshal(it.Content, &parts); err != nil {
			return "", nil, nil, nil, badParam(fmt.Sprintf("input[%d].content", i), "content is a string or an array of parts")
		}
		var said []string
		for j, p := range parts {
			param := fmt.Sprintf("input[%d].content[%d]", i, j)
			switch p.Type {
			case "input_text", "output_text", "text":
				said = append(said, p.Text)
			case "input_file":
				f, perr := s.inputFile(ctx, owner, p, param)
				if perr != nil {
					return "", nil, nil, nil, perr
				}
				files = append(files, f)
			case "input_image":
				images++
				f, perr := s.inputImage(ctx, owner, p, param, images)
				if perr != nil {
					return "", nil, nil, nil, perr
				}
				files = append(files, f)
			default:
				return "", nil, nil, nil, badParam(param+".type", fmt.Sprintf("content parts of type %q are not supported; send text, files as input_file, images as input_image", p.Type))
			}
		}
		body := strings.Join(said, "\n")
		switch it.Role {
		case "user", "":
			lines = append(lines, body)
		case "system", "developer":
			if strings.TrimSpace(body) != "" {
				instructions = append(instructions, body)
			}
		case "assistant":
			lines = append(lines, "(You answered earlier: "+body+")")
		default:
			return "", nil, nil, nil, badParam(fmt.Sprintf("input[%d].role", i), fmt.Sprintf("role %q is not one of user, assistant, system, developer", it.Role))
		}
	}
	q := strings.TrimSpace(strings.Join(lines, "\n\n"))
	switch {
	case q != "" || len(outputs) > 0:
	case len(files) > 0:
		q = "Look at the files I uploaded."
	default:
		return "", nil, nil, nil, badParam("input", "input has no text")
	}
	return q, files, outputs, instructions, nil
}

// checkSampling refuses sampling settings out of OpenAI's ranges, naming
// the field; maxName names the field of the output bound.
func checkSampling(temperature, topP *float64, maxTokens int, maxName string) *paramError {
	switch {
	case temperature != nil && (*temperature < 0 || *temperature > 2):
		return badParam("temperature", fmt.Sprintf("temperature is between 0 and 2, not %g", *temperature))
	case topP != nil && (*topP < 0 || *topP > 1):
		return badParam("top_p", fmt.Sprintf("top_p is between 0 and 1, not %g", *topP))
	case maxTokens < 0:
		return badParam(maxName, fmt.Sprintf("%s is a positive number of tokens, not %d", maxName, maxTokens))
	}
	return nil
}

// inputFile is an input_file part: an uploaded file by id, or inline data.
func (s *api) inputFile(ctx context.Context, owner string, p inputPart, param string) (namedFile, *paramError) {
	if p.FileID != "" {
		f, perr := s.storedFile(ctx, owner, p.FileID, param+".file_id", fmt.Sprintf("no file found with id '%s'", p.FileID))
		if perr != nil {
			return namedFile{}, perr
		}
		return namedFile{name: f.Filename, file: &f}, nil
	}
	if p.FileData == "" || p.Filename == "" {
		return namedFile{}, badParam(param, "an input_file has a file_id, or a filename and file_data")
	}
	data := p.FileData
	if i := strings.Index(data, ";base64,"); strings.HasPrefix(data, "data:") && i > 0 {
		data = data[i+len(";base64,"):]
	}
	b, err := base64.StdEncoding.DecodeString(data)
	if err != nil {
		return namedFile{}, badParam(param+".file_data", "file_data is base64, or a data: URL of it")
	}
	return namedFile{name: path.Base(p.Filename), data: b}, nil
}

// putFiles puts the files a request attaches in c's /work, before its turn.
func (s *api) putFiles(ctx context.Context, c *serve.Container, files []namedFile) error {
	for _, f := range files {
		if f.file != nil {
			if err := s.PutFile(ctx, c, *f.file); err != nil {
				return err
			}
			continue
		}
		if err := s.Put(ctx, c, f.name, bytes.NewReader(f.data)); err != nil {
			return err
		}
	}
	return nil
}

// outputBuilder turns a turn's events into the response's output items,
// and, when streaming, into OpenAI's events as they happen.
type outputBuilder struct {
	// w is the request's, for the log of a failure of terp's own.
	w         http.ResponseWriter
	resp      *responseObject
	container *serve.Container
	outputs   bool
	// link is the link to a file of the container's /work; see linker.
	link func(path string) string
	sse  *serve.SSE
	// fileID is the id of a file of the container's /work.
	fileID func(path string) string

	mu sync.Mutex
	// calls are the code_interpreter_call items by the model's call id.
	calls map[string]int
	// seq is the next event's sequence_number.
	seq int
	// terminal is the event that ends the stream, which End chooses and
	// Answer sends.
	terminal string
}

// emit sends one of OpenAI's streaming events, when streaming.
func (b *outputBuilder) emit(typ string, fields map[string]any) {
	if b.sse == nil {
		return
	}
	fields["type"] = typ
	fields["sequence_number"] = b.seq
	b.seq++
	b.sse.Send(typ, fields)
}

func (b *outputBuilder) Streaming() bool { return b.sse != nil }

// Answer writes the response whole, whatever its status, as OpenAI answers
// a response that failed, or ends its stream with the event that tells the
// outcome: only once the response is stored, so that a client that goes
// on from it at once finds it.
func (b *outputBuilder) Answer(w http.ResponseWriter) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.sse == nil {
		writeJSON(w, http.StatusOK, b.resp)
		return
	}
	b.emit(b.terminal, map[string]any{"response": b.resp})
}

func (b *outputBuilder) start() {
	b.calls = map[string]int{}
	b.emit("response.created", map[string]any{"response": b.resp})
	b.emit("response.in_progress", map[string]any{"response": b.resp})
}

// handle is the turn's send function.
func (b *outputBuilder) Handle(e agent.Event) {
	b.mu.Lock()
	defer b.mu.Unlock()
	switch e := e.(type) {
	case agent.CodeDelta:
		idx, ok := b.calls[e.ID]
		if !ok {
			idx = b.codeCall(e.ID, "")
		}
		item := b.resp.Output[idx].(*codeCall)
		item.Code += e.Text
		b.emit("response.code_interpreter_call_code.delta", map[string]any{"output_index": idx, "item_id": item.ID, "delta": e.Text})
	case agent.ToolCall:
		if e.Name != agent.ToolName {
			b.functionCall(e)
			return
		}
		// A call the model streamed has its item and its code deltas
		// already; one that came whole gets them now, the code in one delta.
		idx, streamed := b.calls[e.ID]
		if !streamed {
			idx = b.codeCall(e.ID, e.Code)
		}
		item := b.resp.Output[idx].(*codeCall)
		if !streamed {
			b.emit("response.code_interpreter_call_code.delta", map[string]any{"output_index": idx, "item_id": item.ID, "delta": e.Code})
		}
		// The ToolCall's code is what runs, whatever deltas were dropped.
		item.Code = e.Code
		b.emit("response.code_interpreter_call_code.done", map[string]any{"output_index": idx, "item_id": item.ID, "code": e.Code})
		item.Status = "interpreting"
		b.emit("response.code_interpreter_call.interpreting", map[string]any{"output_index": idx, "item_id": item.ID})
	case agent.ToolOutput:
		idx, ok := b.calls[e.ID]
		if !ok {
			return
		}
		item := b.resp.Output[idx].(*codeCall)
		item.Status = "completed"
		if e.Error != "" || e.Stopped != "" {
			item.Status = "incomplete"
		}
		if b.outputs {
			item.Outputs = b.codeOutputs(e)
		}
		b.emit("response.code_interpreter_call.completed", map[string]any{"output_index": idx, "item_id": item.ID})
		b.emit("response.output_item.done", map[string]any{"output_index": idx, "item": item})
	}
}

// codeCall adds the code_interpreter_call item of the model's call id, with
// the code so far, and returns its index in the output.
func (b *outputBuilder) codeCall(id, code string) int {
	item := &codeCall{Type: "code_interpreter_call", ID: serve.NewID("ci_"), Status: "in_progress", Code: code, ContainerID: b.container.ID}
	idx := len(b.resp.Output)
	b.resp.Output = append(b.resp.Output, item)
	b.calls[id] = idx
	b.emit("response.output_item.added", map[string]any{"output_index": idx, "item": item})
	b.emit("response.code_interpreter_call.in_progress", map[string]any{"output_index": idx, "item_id": item.ID})
	return idx
}

// functionCall adds a call of one of the client's function tools, which the
// client runs and answers with a function_call_output.
func (b *outputBuilder) functionCall(e agent.ToolCall) {
	item := &functionCallItem{Type: "function_call", ID: serve.NewID("fc_"), CallID: e.ID, Name: e.Name, Arguments: e.Arguments, Status: "in_progress"}
	idx := len(b.resp.Output)
	b.resp.Output = append(b.resp.Output, item)
	b.emit("response.output_item.added", map[string]any{"output_index": idx, "item": item})
	b.emit("response.function_call_arguments.delta", map[string]any{"output_index": idx, "item_id": item.ID, "delta": e.Arguments})
	b.emit("response.function_call_arguments.done", map[string]any{"output_index": idx, "item_id": item.ID, "arguments": e.Arguments})
	item.Status = "completed"
	b.emit("response.output_item.done", map[string]any{"output_index": idx, "item": item})
}

// functionCallItem is a function_call output item.
type functionCallItem struct {
	Type      string `json:"type"`
	ID        string `json:"id"`
	CallID    string `json:"call_id"`
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
	Status    string `json:"status"`
}

// codeOutputs are a run's logs and the images it saved.
func (b *outputBuilder) codeOutputs(e agent.ToolOutput) []codeOutput {
	logs := e.Stdout
	if e.Stderr != "" {
		logs = strings.TrimRight(logs+"\n"+e.Stderr, "\n") + "\n"
	}
	for _, note := range []string{e.Notice, e.Stopped, e.Error} {
		if note != "" {
			logs += note + "\n"
		}
	}
	out := []codeOutput{{Type: "logs", Logs: logs}}
	for _, f := range e.Files {
		if isImage(f) {
			url := b.link(f)
			if url == "" { // too large to link: its content is the container's
				url = fmt.Sprintf("/v1/containers/%s/files/%s/content", b.container.ID, b.fileID(f))
			}
			out = append(out, codeOutput{Type: "image", URL: url})
		}
	}
	return out
}

// end adds the answer, with a citation for each file the code saved,
// and the outcome.
func (b *outputBuilder) End(turn conversation.Turn, err error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	res := turn.Result
	u := res.Usage
	b.resp.Usage = &responseUsage{InputTokens: u.PromptTokens, OutputTokens: u.CompletionTokens, TotalTokens: u.TotalTokens,
		InputTokensDetails: map[string]int{"cached_tokens": 0}, OutputTokensDetails: map[string]int{"reasoning_tokens": 0}}
	switch {
	case err != nil:
		b.resp.Status = "failed"
		f := failure(b.w, err)
		code := f.code
		if code == "" {
			code = f.typ
		}
		b.resp.Error = &responseError{Code: code, Message: f.message}
		b.terminal = "response.failed"
		return
	case res.StopReason == agent.MaxSteps:
		b.resp.Status, b.resp.IncompleteDetails = "incomplete", &incomplete{Reason: "max_tool_calls"}
	case res.StopReason == agent.TokenBudget:
		b.resp.Status, b.resp.IncompleteDetails = "incomplete", &incomplete{Reason: "max_output_tokens"}
	case res.StopReason == agent.TimeBudget:
		b.resp.Status, b.resp.IncompleteDetails = "incomplete", &incomplete{Reason: "max_time"}
	default:
		b.resp.Status = "completed"
	}
	if res.Answer != "" {
		b.message(res)
	}
	b.terminal = "response.incomplete"
	if b.resp.Status == "completed" {
		b.terminal = "response.completed"
	}
}

// message adds the answer as an output message, streamed as one delta: the
// loop knows a reply is the answer only once it is whole.
func (b *outputBuilder) message(res agent.Result) {
	item := &messageItem{Type: "message", ID: serve.NewID("msg_"), Status: "in_progress", Role: "assistant", Content: []outputText{}}
	idx := len(b.resp.Output)
	b.resp.Output = append(b.resp.Output, item)
	b.emit("response.output_item.added", map[string]any{"output_index": idx, "item": item})
	part := outputText{Type: "output_text", Text: "", Annotations: []annotation{}, Logprobs: []any{}}
	b.emit("response.content_part.added", map[string]any{"item_id": item.ID, "output_index": idx, "content_index": 0, "part": part})
	text := res.Answer
	b.emit("response.output_text.delta", map[string]any{"item_id": item.ID, "output_index": idx, "content_index": 0, "delta": text, "logprobs": []any{}})
	for _, f := range res.Files {
		name := path.Base(f.Path)
		start := strings.Index(text, name)
		end := start + len(name)
		if start < 0 {
			start, end = len(text), len(text)
		}
		a := annotation{Type: "container_file_citation", ContainerID: b.container.ID, FileID: b.fileID(f.Path),
			Filename: name, StartIndex: start, EndIndex: end, URL: b.link(f.Path)}
		b.emit("response.output_text.annotation.added", map[string]any{"item_id": item.ID, "output_index": idx,
			"content_index": 0, "annotation_index": len(part.Annotations), "annotation": a})
		part.Annotations = append(part.Annotations, a)
	}
	part.Text = text
	b.emit("response.output_text.done", map[string]any{"item_id": item.ID, "output_index": idx, "content_index": 0, "text": text, "logprobs": []any{}})
	b.emit("response.content_part.done", map[string]any{"item_id": item.ID, "output_index": idx, "content_index": 0, "part": part})
	item.Status, item.Content = "completed", []outputText{part}
	b.emit("response.output_item.done", map[string]any{"output_index": idx, "item": item})
}
