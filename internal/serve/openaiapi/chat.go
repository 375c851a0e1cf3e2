package openaiapi

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"path"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/terpdev/terp/internal/agent"
	"github.com/terpdev/terp/internal/conversation"
	"github.com/terpdev/terp/internal/llm"
	"github.com/terpdev/terp/internal/sandbox"
	"github.com/terpdev/terp/internal/serve"
	"github.com/terpdev/terp/internal/serve/state"
)

// ContainerHeader carries a chat completion's container: terp sends it with
// every answer that ran code, and a client sends it back to go on in the
// same container, with its variables and files.
const ContainerHeader = "X-Terp-Container"

// DefaultAliasSuffix is what a model name ends in to run the code
// interpreter without the tool, for clients that cannot add one.
const DefaultAliasSuffix = "+python"

// StepsModes are where a chat completion shows the steps (code and output):
// in reasoning_content, which chat UIs fold as thinking; in the content,
// before the answer; or nowhere. The first is the default.
var StepsModes = []string{"reasoning", "content", "none"}

// Bounds of one step as a chat completion shows it: the model is told the
// whole output, a chat window needs only enough to follow along.
const (
	maxShownCode   = 16 << 10
	maxShownOutput = 4 << 10
)

// chatRequest is the part of a chat completion request that decides how it
// is served; a request that passes through is sent upstream as it came.
type chatRequest struct {
	Model         string        `json:"model"`
	Messages      []chatMessage `json:"messages"`
	Stream        bool          `json:"stream"`
	StreamOptions *struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
	Tools []struct {
		Type string `json:"type"`
	} `json:"tools"`
	// TerpSteps is where the steps are shown, one of StepsModes; empty
	// means the server's default.
	TerpSteps string `json:"terp_steps"`
	// Sampling: max_tokens and max_completion_tokens bound what the model
	// writes in the whole turn, the one completion the client sees.
	Temperature         *float64        `json:"temperature"`
	TopP                *float64        `json:"top_p"`
	MaxTokens           int             `json:"max_tokens"`
	MaxCompletionTokens int             `json:"max_completion_tokens"`
	Stop                json.RawMessage `json:"stop"`
	Seed                *int            `json:"seed"`
}

// options are the turn's sampling and output budget as req gives them,
// with instructions.
func (req *chatRequest) options(instructions string) (agent.TurnOptions, *paramError) {
	maxTokens, name := req.MaxCompletionTokens, "max_completion_tokens"
	if maxTokens == 0 {
		maxTokens, name = req.MaxTokens, "max_tokens"
	}
	if perr := checkSampling(req.Temperature, req.TopP, maxTokens, name); perr != nil {
		return agent.TurnOptions{}, perr
	}
	var stop []string
	if len(req.Stop) > 0 && string(req.Stop) != "null" {
		var one string
		if json.Unmarshal(req.Stop, &one) == nil {
			stop = []string{one}
		} else if err := json.Unmarshal(req.Stop, &stop); err != nil || len(stop) > 4 {
			return agent.TurnOptions{}, badParam("stop", "stop is a string or up to 4 strings")
		}
	}
	return agent.TurnOptions{Instructions: instructions, MaxOutputTokens: maxTokens,
		Sampling: llm.Sampling{Temperature: req.Temperature, TopP: req.TopP, Stop: stop, Seed: req.Seed}}, nil
}

type chatMessage struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
}

// chatCompletion is OpenAI's chat.completion and, with Delta set instead
// of Message, its chat.completion.chunk.
type chatCompletion struct {
	ID      string       `json:"id"`
	Object  string       `json:"object"`
	Created int64        `json:"created"`
	Model   string       `json:"model"`
	Choices []chatChoice `json:"choices"`
	Usage   *chatUsage   `json:"usage,omitempty"`
}

type chatChoice struct {
	Index        int        `json:"index"`
	Message      *chatReply `json:"message,omitempty"`
	Delta        *chatReply `json:"delta,omitempty"`
	FinishReason *string    `json:"finish_reason"`
	Logprobs     *struct{}  `json:"logprobs"`
}

// chatReply is an assistant message, or a piece of one.
type chatReply struct {
	Role             string  `json:"role,omitempty"`
	Content          *string `json:"content,omitempty"`
	ReasoningContent string  `json:"reasoning_content,omitempty"`
	Refusal          *string `json:"refusal,omitempty"`
}

type chatUsage struct {
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
	TotalTokens      int `json:"total_tokens"`
}

// chatCompletions serves POST /v1/chat/completions: with the code_interpreter
// tool, or a model named with the alias suffix, terp runs the loop and
// answers with one assistant message; any other request goes to the model
// server upstream as it is.
func (s *api) chatCompletions(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		if refusal := serve.AsRefusal(err); refusal != nil {
			answerRefusal(w, refusal)
		} else {
			badRequest(w, "", "cannot read the request body: %v", err)
		}
		return
	}
	var req chatRequest
	if err := json.Unmarshal(body, &req); err != nil {
		badRequest(w, "", "the request body is not the JSON this endpoint takes: %v", err)
		return
	}
	tool := false
	for _, t := range req.Tools {
		tool = tool || t.Type == "code_interpreter"
	}
	model, alias := strings.CutSuffix(req.Model, s.aliasSuffix())
	alias = alias && model != ""
	if !tool && !alias {
		if err := s.CheckTokens(r.Context(), serve.Owner(r)); err != nil {
			writeFailure(w, err)
			return
		}
		s.passthrough(w, r, body)
		return
	}
	for i, t := range req.Tools {
		if t.Type != "code_interpreter" {
			badRequest(w, fmt.Sprintf("tools[%d].type", i), "terp serve runs the code_interpreter tool; a %q tool beside it is not supported yet", t.Type)
			return
		}
	}
	if !alias {
		model = req.Model
	}
	s.runChat(w, r, &req, model)
}

// aliasSuffix is the configured suffix, or the default.
func (s *api) aliasSuffix() string {
	if s.opts.AliasSuffix != "" {
		return s.opts.AliasSuffix
	}
	return DefaultAliasSuffix
}

// runChat runs one turn of the loop for a chat completion request, with
// model upstream ("" keeps the container's).
func (s *api) runChat(w http.ResponseWriter, r *http.Request, req *chatRequest, model string) {
	steps := req.TerpSteps
	if steps == "" {
		steps = s.opts.Steps
	}
	if steps == "" {
		steps = StepsModes[0]
	}
	if !slices.Contains(StepsModes, steps) {
		badRequest(w, "terp_steps", "terp_steps is one of %s, not %q", strings.Join(StepsModes, ", "), steps)
		return
	}
	owner, id := serve.Owner(r), serve.NewID("chatcmpl-")
	named := r.Header.Get(ContainerHeader)
	fromHistory, gone := false, false
	if named == "" {
		var err error
		named, gone, err = s.continued(r.Context(), owner, req.Messages)
		fromHistory = named != ""
		if err != nil {
			writeFailure(w, err)
			return
		}
	}
	question, files, perr := s.chatQuestion(r.Context(), owner, req.Messages, named != "", gone)
	if perr != nil {
		perr.answer(w)
		return
	}
	opts, perr := req.options(s.chatInstructions(r.Context(), owner, req.Messages))
	if perr != nil {
		perr.answer(w)
		return
	}
	var sink *chatTurn
	s.RunTurn(w, r, serve.ModelTurn{
		Open: func(ctx context.Context) (*serve.Lease, error) {
			var l *serve.Lease
			var err error
			if named != "" {
				l, err = s.Acquire(ctx, owner, named)
			}
			switch {
			case err != nil:
				return nil, err
			case l == nil && named != "" && !fromHistory:
				return nil, notFoundError("container", named)
			case l == nil && fromHistory:
				// The history's container expired since it was found: a
				// new one hears the whole history, with its files.
				gone = true
				if question, files, perr = s.chatQuestion(ctx, owner, req.Messages, false, true); perr != nil {
					return nil, perr
				}
			}
			if l != nil {
				return l, nil
			}
			made, merr := s.newContainer(ctx, owner, containerOptions{})
			if merr != nil {
				return nil, merr
			}
			return made, nil
		},
		Ready: func(ctx context.Context, c *serve.Container) (conversation.TurnRequest, serve.TurnSink, error) {
			if err := s.putFiles(ctx, c, files); err != nil {
				return conversation.TurnRequest{}, nil, err
			}
			if req.Model == "" { // and so model too: the container's goes on
				req.Model = c.Conversation().Info().Model
			}
			// Sent with every answer, errors too: the container exists, and
			// a client can go on in it.
			w.Header().Set(ContainerHeader, c.ID)
			ct := &chatTurn{w: w, c: c, steps: steps, stream: req.Stream, link: s.linker(ctx, r, c), gone: gone,
				usage: req.StreamOptions != nil && req.StreamOptions.IncludeUsage,
				head:  chatCompletion{ID: id, Created: time.Now().Unix(), Model: req.Model}}
			sink = ct
			// The model comes with the turn, so that no other request on
			// the container comes between them.
			return conversation.TurnRequest{Question: question, Model: model, Images: imagesOf(files), Options: opts}, ct, nil
		},
		After: func(ctx context.Context, c *serve.Container, _ conversation.Turn) {
			// The history is this completion's now, not that of the
			// response that ran last: a response that names that one
			// rewinds to it. The answer's digest lets a client that
			// sends back only the history go on here.
			reply := replyDigest(sink.content.String())
			s.Change(ctx, c, func(rec *state.Container) {
				rec.Last = id
				rec.Replies = append(rec.Replies, reply)
				if len(rec.Replies) > maxReplies {
					rec.Replies = rec.Replies[len(rec.Replies)-maxReplies:]
				}
			})
		},
	})
}

// maxReplies bounds the digests a container keeps of its answers: a chat
// client that goes on from an answer older than these gets a container of
// its own.
const maxReplies = 64

// replyDigest is the digest of an answer's content as the client has it,
// trimmed of the white space a UI may add or drop at its ends.
func replyDigest(content string) string {
	sum := sha256.Sum256([]byte(strings.TrimSpace(strings.ReplaceAll(content, "\r\n", "\n"))))
	return hex.EncodeToString(sum[:16])
}

// continued is the container a history without X-Terp-Container goes on
// in: the owner's one that gave the history's last assistant message as an
// answer; "" when none did (a new conversation, an answer of another key's,
// or one forged). gone says the answer was the owner's, in a container
// removed since (expired, or deleted).
func (s *api) continued(ctx context.Context, owner string, msgs []chatMessage) (id string, gone bool, err error) {
	var answer string
	for i := len(msgs) - 1; i >= 0 && answer == ""; i-- {
		if msgs[i].Role == "assistant" {
			text, _, perr := s.chatContent(ctx, owner, msgs[i].Content, "", new(int))
			if perr != nil {
				return "", false, nil // not an answer of terp's: a new container
			}
			answer = text
		}
	}
	if strings.TrimSpace(answer) == "" {
		return "", false, nil
	}
	want := replyDigest(answer)
	recs, err := s.State().Containers(ctx, owner)
	if err != nil {
		return "", false, err
	}
	for _, rec := range recs {
		if rec.Origin == "" && slices.Contains(rec.Replies, want) {
			return rec.ID, false, nil
		}
	}
	gone, err = s.State().Gone(ctx, owner, want)
	return "", gone, err
}

// goneNote is what the model and the user are told when a history's
// container is gone, as terp chat --resume tells them of a sandbox that
// expired.
const goneNote = "This conversation's sandbox had expired, so a new one was created: variables and files saved by earlier steps are gone; files attached to the messages were uploaded again."

// chatQuestion is the question a chat completion asks: its last message,
// a user's. In a container that goes on, the earlier messages are in its
// history already; in a new one they come before the question, as notes.
// Files the messages attach (file parts, and images as data URLs) are put
// in /work before the turn, those of the earlier messages too in a new
// container, and the question says where they are. gone tells the model
// that the history's container is gone.
func (s *api) chatQuestion(ctx context.Context, owner string, msgs []chatMessage, goesOn, gone bool) (string, []namedFile, *paramError) {
	if len(msgs) == 0 {
		return "", nil, badParam("messages", "messages is empty: give at least one user message")
	}
	last := len(msgs) - 1
	if msgs[last].Role != "user" {
		return "", nil, badParam(fmt.Sprintf("messages[%d].role", last), "the last message is the question the code interpreter answers: make it a user message")
	}
	var lines []string
	if gone {
		lines = append(lines, "("+goneNote+")")
	}
	var files []namedFile
	images := 0
	for i, m := range msgs {
		if goesOn && i < last {
			continue
		}
		text, attached, perr := s.chatContent(ctx, owner, m.Content, fmt.Sprintf("messages[%d].content", i), &images)
		if perr != nil {
			return "", nil, perr
		}
		files = append(files, attached...)
		switch {
		case i == last:
			if strings.TrimSpace(text) == "" && len(attached) == 0 {
				return "", nil, badParam(fmt.Sprintf("messages[%d].content", i), "the question is empty")
			}
			lines = append(lines, text)
		case strings.TrimSpace(text) == "":
		case m.Role == "system" || m.Role == "developer": // chatInstructions
		case m.Role == "user":
			lines = append(lines, "(I asked earlier: "+text+")")
		case m.Role == "assistant":
			lines = append(lines, "(You answered earlier: "+text+")")
		default:
			return "", nil, badParam(fmt.Sprintf("messages[%d].role", i),
				fmt.Sprintf("role %q is not one of user, assistant, system, developer: function tools are not supported with the code interpreter yet", m.Role))
		}
	}
	if len(files) > 0 {
		names := make([]string, len(files))
		for i, f := range files {
			names[i] = path.Join(sandbox.DataDir, f.name)
		}
		lines = append(lines, "(Files attached: "+strings.Join(names, ", ")+")")
	}
	return strings.TrimSpace(strings.Join(lines, "\n\n")), files, nil
}

// chatInstructions are the texts of the system and developer messages,
// which follow terp's system prompt (agent.TurnOptions.Instructions):
// every request of a chat sends them again.
func (s *api) chatInstructions(ctx context.Context, owner string, msgs []chatMessage) string {
	var out []string
	for _, m := range msgs {
		if m.Role != "system" && m.Role != "developer" {
			continue
		}
		if text, _, perr := s.chatContent(ctx, owner, m.Content, "", new(int)); perr == nil && strings.TrimSpace(text) != "" {
			out = append(out, text)
		}
	}
	return strings.Join(out, "\n\n")
}

// chatPart is a content part of a chat message: text, a file, or an image.
type chatPart struct {
	Type string `json:"type"`
	Text string `json:"text"`
	File *struct {
		FileID   string `json:"file_id"`
		Filename string `json:"filename"`
		FileData string `json:"file_data"`
	} `json:"file"`
	ImageURL *struct {
		URL string `json:"url"`
	} `json:"image_url"`
}

// chatContent is a message's content: its text (a string, null, or text
// parts) and the files it attaches. images counts the images attached so
// far, which are named by their number, as they come without a name.
func (s *api) chatContent(ctx context.Context, owner string, raw json.RawMessage, param string, images *int) (string, []namedFile, *paramError) {
	if len(raw) == 0 || string(raw) == "null" {
		return "", nil, nil
	}
	var text string
	if json.Unmarshal(raw, &text) == nil {
		return text, nil, nil
	}
	var parts []chatPart
	if err := json.Unmarshal(raw, &parts); err != nil {
		return "", nil, badParam(param, "content is a string or an array of parts")
	}
	var said []string
	var files []namedFile
	for j, p := range parts {
		at := fmt.Sprintf("%s[%d]", param, j)
		switch {
		case p.Type == "text":
			said = append(said, p.Text)
		case p.Type == "file" && p.File != nil:
			f, perr := s.inputFile(ctx, owner, inputPart{FileID: p.File.FileID, Filename: p.File.Filename, FileData: p.File.FileData}, at+".file")
			if perr != nil {
				return "", nil, perr
			}
			files = append(files, f)
		case p.Type == "image_url" && p.ImageURL != nil:
			*images++
			f, perr := imageFile(p.ImageURL.URL, at+".image_url.url", *images)
			if perr != nil {
				return "", nil, perr
			}
			files = append(files, f)
		default:
			return "", nil, badParam(at+".type", fmt.Sprintf("content parts of type %q are not supported with the code interpreter; send text, files and images as data URLs", p.Type))
		}
	}
	return strings.Join(said, "\n"), files, nil
}

// chatTurn turns a turn's events into a chat completion: the steps, as they
// happen when streaming, then the answer. It is the chat completions' sink
// of runTurn.
type chatTurn struct {
	w     http.ResponseWriter
	c     *serve.Container
	steps string
	// link is the link to a file of the container's /work; see linker.
	link func(path string) string
	// gone says the history's container is gone: the answer begins by
	// saying so.
	gone   bool
	stream bool
	usage  bool // stream_options.include_usage
	head   chatCompletion

	mu sync.Mutex
	// sse is the stream, once its status and first chunk were sent.
	sse *serve.SSE
	// shown is the steps so far, for an answer that is not streamed; tail
	// is the end of what was shown in the steps' field, to separate the
	// next block from it.
	shown strings.Builder
	tail  string
	// out is the whole answer, or failed the error, that answer writes.
	out    *chatCompletion
	failed error
	// content is the message's content as the client has it once the
	// turn is over, streamed or not: what it sends back in its history.
	content strings.Builder
	// final sends a stream's last chunks.
	final func()
}

// handle is the turn's send function.
func (ct *chatTurn) Handle(e agent.Event) {
	ct.mu.Lock()
	defer ct.mu.Unlock()
	switch e := e.(type) {
	case agent.ReasoningDelta:
		if ct.steps == "reasoning" {
			ct.show(e.Text)
		}
	case agent.ToolCall:
		ct.block(fenced("python", bounded(e.Code, maxShownCode)))
	case agent.ToolOutput:
		ct.block(fenced("", bounded(stepOutput(e), maxShownOutput)))
	case agent.Notice:
		ct.block("> " + strings.ReplaceAll(strings.TrimSpace(e.Text), "\n", "\n> ") + "\n")
	case agent.OutputDelta:
		// From the runner's goroutine, while the code runs; ToolOutput
		// carries it whole.
		return
	}
	if ct.stream {
		ct.start()
	}
}

// block shows a Markdown block, on lines of its own.
func (ct *chatTurn) block(text string) {
	if ct.tail != "" && !strings.HasSuffix(ct.tail, "\n\n") {
		if strings.HasSuffix(ct.tail, "\n") {
			text = "\n" + text
		} else {
			text = "\n\n" + text
		}
	}
	ct.show(text)
}

// show adds text to the steps, where the mode says.
func (ct *chatTurn) show(text string) {
	if ct.steps == "none" || text == "" {
		return
	}
	if ct.steps == "content" {
		ct.content.WriteString(text)
	}
	ct.tail = lastBytes(ct.tail+text, 2)
	if !ct.stream {
		ct.shown.WriteString(text)
		return
	}
	ct.start()
	d := &chatReply{}
	if ct.steps == "reasoning" {
		d.ReasoningContent = text
	} else {
		d.Content = &text
	}
	ct.chunk(d, nil, nil)
}

// start sends the stream's status and its first chunk. It waits for the
// turn's first event, so that a turn refused at once (a busy container) is
// answered with its status, not in a stream. A connection that cannot
// stream gets the answer whole.
func (ct *chatTurn) start() {
	if ct.sse != nil || !ct.stream {
		return
	}
	if ct.sse, ct.stream = serve.StartSSE(ct.w); ct.sse == nil {
		return
	}
	empty := ""
	ct.chunk(&chatReply{Role: "assistant", Content: &empty}, nil, nil)
}

func (ct *chatTurn) Streaming() bool {
	ct.mu.Lock()
	defer ct.mu.Unlock()
	return ct.sse != nil
}

// chunk sends one chat.completion.chunk; with choices empty when usage is
// set, as OpenAI sends the usage.
func (ct *chatTurn) chunk(delta *chatReply, finish *string, usage *chatUsage) {
	c := ct.head
	c.Object = "chat.completion.chunk"
	c.Choices = []chatChoice{}
	if usage == nil {
		c.Choices = []chatChoice{{Delta: delta, FinishReason: finish}}
	}
	c.Usage = usage
	ct.sse.Send("", c)
}

// End sets down the answer, with a link to each file the code saved, or
// the error that ended the turn, for Answer to send.
func (ct *chatTurn) End(turn conversation.Turn, err error) {
	ct.mu.Lock()
	defer ct.mu.Unlock()
	res := turn.Result
	if err != nil {
		if ct.sse == nil {
			ct.failed = err
			return
		}
		f := failure(ct.w, err)
		e := apiError{Message: f.message, Type: f.typ}
		if f.code != "" {
			e.Code = &f.code
		}
		ct.final = func() { ct.sse.Send("", map[string]apiError{"error": e}) }
		return
	}
	answer := res.Answer
	if answer == "" {
		answer = "*" + unanswered[res.StopReason] + "*"
	}
	if links := ct.links(res); links != "" {
		answer = strings.TrimRight(answer, "\n") + "\n\n" + links
	}
	if ct.gone {
		answer = "*" + goneNote + "*\n\n" + answer
	}
	finish := "stop"
	if res.StopReason == agent.MaxSteps || res.StopReason == agent.TokenBudget || res.StopReason == agent.TimeBudget {
		finish = "length"
	}
	u := &chatUsage{PromptTokens: res.Usage.PromptTokens, CompletionTokens: res.Usage.CompletionTokens, TotalTokens: res.Usage.TotalTokens}
	if ct.steps == "content" && ct.tail != "" {
		answer = strings.Repeat("\n", 2-strings.Count(ct.tail, "\n")) + answer
	}
	ct.content.WriteString(answer)
	if ct.stream {
		ct.start()
	}
	if ct.sse != nil {
		ct.final = func() {
			ct.chunk(&chatReply{Content: &answer}, nil, nil)
			ct.chunk(&chatReply{}, &finish, nil)
			if ct.usage {
				ct.chunk(nil, nil, u)
			}
			ct.sse.Done()
		}
		return
	}
	msg := &chatReply{Role: "assistant"}
	switch ct.steps {
	case "reasoning":
		msg.ReasoningContent = ct.shown.String()
	case "content":
		answer = ct.shown.String() + answer
	}
	msg.Content = &answer
	out := ct.head
	out.Object = "chat.completion"
	out.Choices = []chatChoice{{Message: msg, FinishReason: &finish}}
	out.Usage = u
	ct.out = &out
}

// Answer writes the answer, or the stream's last chunks: only once the
// turn is recorded, so that a client that goes on from it at once (its
// history names the container by this answer) finds it.
func (ct *chatTurn) Answer(w http.ResponseWriter) {
	ct.mu.Lock()
	defer ct.mu.Unlock()
	switch {
	case ct.failed != nil:
		writeFailure(w, ct.failed)
	case ct.out != nil:
		writeJSON(w, http.StatusOK, ct.out)
	case ct.final != nil:
		ct.final()
	}
}

// unanswered says why a turn that ended without an error has no answer.
var unanswered = map[agent.StopReason]string{
	agent.MaxSteps:    "terp stopped at the step limit before an answer.",
	agent.TokenBudget: "terp stopped at the token budget before an answer.",
	agent.TimeBudget:  "terp stopped at the time budget before an answer.",
	agent.Answered:    "The model answered with no text.",
}

// links are Markdown links to the files the code saved this turn, one a
// line, images shown: links a browser opens without a key (serve.Link).
func (ct *chatTurn) links(res agent.Result) string {
	var lines []string
	for _, f := range res.Files {
		name := markdownEscaper.Replace(path.Base(f.Path))
		url := ct.link(f.Path)
		switch {
		case url == "":
			lines = append(lines, fmt.Sprintf("%s (not linked: it could not be copied for a link; it is in %s while the container lives)",
				name, path.Join(sandbox.DataDir, f.Path)))
		case isImage(f.Path):
			lines = append(lines, fmt.Sprintf("![%s](%s)", name, url))
		default:
			lines = append(lines, fmt.Sprintf("[%s](%s)", name, url))
		}
	}
	return strings.Join(lines, "\n")
}

// markdownEscaper keeps a file name from closing its link's text.
var markdownEscaper = strings.NewReplacer(`\`, `\\`, `[`, `\[`, `]`, `\]`)

// stepOutput is what a run printed and what happened to it, as one text.
func stepOutput(e agent.ToolOutput) string {
	var parts []string
	for _, p := range []string{e.Stdout, e.Stderr, e.Notice, e.Stopped, e.Error} {
		if p = strings.TrimRight(p, "\n"); p != "" {
			parts = append(parts, p)
		}
	}
	if len(parts) == 0 {
		return "(no output)"
	}
	return strings.Join(parts, "\n")
}

// fenced is text in a Markdown code block whose fence no run of backticks
// in it can close.
func fenced(lang, text string) string {
	fence := "```"
	for strings.Contains(text, fence) {
		fence += "`"
	}
	return fence + lang + "\n" + strings.TrimRight(text, "\n") + "\n" + fence + "\n"
}

// bounded is text cut to about n bytes, keeping its start and its end
// (where a traceback ends) and saying how much was left out.
func bounded(text string, n int) string {
	if len(text) <= n {
		return text
	}
	head, tail := cutUTF8(text, n*2/3), text[len(text)-n/3:]
	for len(tail) > 0 && tail[0]&0xC0 == 0x80 {
		tail = tail[1:] // not inside a character
	}
	return fmt.Sprintf("%s\n[... %d bytes left out ...]\n%s", head, len(text)-len(head)-len(tail), tail)
}

// cutUTF8 is the longest start of s of at most n bytes that ends between
// characters.
func cutUTF8(s string, n int) string {
	for n > 0 && n < len(s) && s[n]&0xC0 == 0x80 {
		n--
	}
	return s[:n]
}

func lastBytes(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[len(s)-n:]
}

// upstreamURL is the model server's endpoint p.
func (s *api) upstreamURL(p string) string {
	return strings.TrimRight(s.Settings().BaseURL, "/") + p
}

// upstreamRequest is a request to the model server, with its key: never the
// client's, which is a key of terp's.
func (s *api) upstreamRequest(r *http.Request, method, url string, body []byte) (*http.Request, error) {
	req, err := http.NewRequestWithContext(r.Context(), method, url, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if a := r.Header.Get("Accept"); a != "" {
		req.Header.Set("Accept", a)
	}
	if key, _ := s.Settings().APIKey(); key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	return req, nil
}

// unreachable is the 502 of a model server that gave no answer.
func unreachable(w http.ResponseWriter, url string, err error) {
	writeError(w, http.StatusBadGateway, "upstream_error", "upstream_unreachable",
		fmt.Sprintf("Cannot reach the model server at %s: %v. Check that it is running and that terp serve's --base-url is right.", url, err), "")
}

// passthrough sends a chat completion request to the model server as it
// came, and its answer back as it arrives, streamed or not.
func (s *api) passthrough(w http.ResponseWriter, r *http.Request, body []byte) {
	url := s.upstreamURL("/chat/completions")
	req, err := s.upstreamRequest(r, http.MethodPost, url, body)
	if err != nil {
		serverError(w, err)
		return
	}
	resp, err := s.Upstream().Do(req)
	if err != nil {
		if r.Context().Err() == nil {
			unreachable(w, url, err)
		}
		return
	}
	defer resp.Body.Close()
	for _, h := range []string{"Content-Type", "Cache-Control", "Retry-After"} {
		if v := resp.Header.Get(h); v != "" {
			w.Header().Set(h, v)
		}
	}
	w.WriteHeader(resp.StatusCode)
	meter := newTokenMeter(resp.Header.Get("Content-Type"))
	defer func() { s.CountTokens(r.Context(), serve.Owner(r), meter.tokens()) }()
	f, _ := w.(http.Flusher)
	buf := make([]byte, 32<<10)
	for {
		n, err := resp.Body.Read(buf)
		if n > 0 {
			_, _ = meter.Write(buf[:n])
			if _, werr := w.Write(buf[:n]); werr != nil {
				return
			}
			if f != nil {
				f.Flush()
			}
		}
		if err != nil {
			return
		}
	}
}

// listModels serves GET /v1/models: the model server's models, and for each
// its alias that runs the code interpreter.
func (s *api) listModels(w http.ResponseWriter, r *http.Request) {
	url := s.upstreamURL("/models")
	req, err := s.upstreamRequest(r, http.MethodGet, url, nil)
	if err != nil {
		serverError(w, err)
		return
	}
	resp, err := s.Upstream().Do(req)
	if err != nil {
		unreachable(w, url, err)
		return
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, serve.MaxUpstreamBody))
	if err != nil {
		unreachable(w, url, err)
		return
	}
	if resp.StatusCode != http.StatusOK {
		writeError(w, http.StatusBadGateway, "upstream_error", "upstream_error",
			fmt.Sprintf("The model server at %s answered the model list with %s: %s", url, resp.Status, bytes.TrimSpace(b[:min(len(b), 500)])), "")
		return
	}
	var upstream struct {
		Data []json.RawMessage `json:"data"`
	}
	if err := json.Unmarshal(b, &upstream); err != nil || upstream.Data == nil {
		writeError(w, http.StatusBadGateway, "upstream_error", "upstream_bad_response",
			fmt.Sprintf("The model server at %s answered the model list with something that is not one (%d bytes of %s)", url, len(b), resp.Header.Get("Content-Type")), "")
		return
	}
	suffix := s.aliasSuffix()
	out := make([]any, 0, 2*len(upstream.Data))
	var aliases []any
	for _, raw := range upstream.Data {
		out = append(out, raw)
		var m struct {
			ID      string `json:"id"`
			Created int64  `json:"created"`
		}
		if json.Unmarshal(raw, &m) != nil || m.ID == "" || strings.HasSuffix(m.ID, suffix) {
			continue
		}
		aliases = append(aliases, map[string]any{"id": m.ID + suffix, "object": "model", "created": m.Created, "owned_by": "terp"})
	}
	writeJSON(w, http.StatusOK, map[string]any{"object": "list", "data": append(out, aliases...)})
}
