// Package agent runs the code-interpreter loop: it sends the conversation to
// the model, runs the code the model asks for in a sandbox, sends the output
// back and repeats until the model answers in plain text or the step cap is
// reached. It reports what happens as events and knows nothing about
// terminals, so the same loop serves `terp ask`, the chat UI and batch runs.
package agent

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/terpdev/terp/internal/kernel"
	"github.com/terpdev/terp/internal/llm"
	"github.com/terpdev/terp/internal/sandbox"
)

// Completer is the one thing the loop needs from a model client.
type Completer interface {
	Complete(ctx context.Context, req llm.Request, onDelta func(llm.Delta)) (llm.Response, error)
}

// Config holds the loop's settings.
type Config struct {
	Model    string
	MaxSteps int
	// Timeout bounds one run of the code (the seed's 2m).
	Timeout time.Duration
	// ExecMode is how the runner runs code; the model is told.
	ExecMode kernel.Mode
	// Network is what the sandbox lets the code reach; the model is told.
	Network sandbox.Network
	// Checkpoint, when set, is called after every completed step with the
	// conversation so far, so that it can be saved: a terp killed mid-step
	// then loses at most that step. An error from it ends the turn.
	Checkpoint func(Checkpoint) error

	// Dialect is how tool calls travel (see llm.Dialect); "" means auto,
	// which falls back to text when the server refuses tools.
	Dialect llm.Dialect
	// ContextWindow is the model's context in tokens as the user gave it;
	// 0 means ask the server, else use ProfileWindow (see context.go).
	ContextWindow int
	// ProfileWindow is what a built-in model profile expects; 0 if none.
	ProfileWindow int
	// SendReasoning keeps the model's reasoning in the history and sends it
	// back, for models that need it between tool calls (gpt-oss).
	SendReasoning bool
	// MaxTokens and MaxTime cap one turn (0: no cap); see budget.go.
	MaxTokens int
	MaxTime   time.Duration
	// Prompt names the wording of the system prompt and the tool (see
	// prompt.go); "" is the default one.
	Prompt Prompt
	// ClientTools are function tools the caller runs itself, offered to
	// the model beside run_python (see client.go); SetClientTools changes
	// them between turns. A set that SetClientTools would refuse fails
	// every turn with its error.
	ClientTools []llm.Tool
}

// Checkpoint is the state of a conversation after a completed step.
type Checkpoint struct {
	Messages []llm.Message
	// Usage and Steps count the whole conversation, every turn.
	Usage llm.Usage
	Steps int
	// TurnDone is set on the checkpoint that ends a turn.
	TurnDone bool
}

// StopReason tells why a turn ended. The values are part of `ask --json`.
type StopReason string

// Reasons a turn ends.
const (
	Answered  StopReason = "answered"
	MaxSteps  StopReason = "max_steps"
	Errored   StopReason = "error"
	Cancelled StopReason = "cancelled"
	// TokenBudget and TimeBudget end a turn that reached Config.MaxTokens
	// or Config.MaxTime without an answer.
	TokenBudget StopReason = "token_budget"
	TimeBudget  StopReason = "time_budget"
	// ClientToolCalls ends a turn whose model called client tools
	// (Config.ClientTools): Result.ClientCalls wait for the caller's
	// outputs, which Continue takes.
	ClientToolCalls StopReason = "client_tool_calls"
)

// Result is the outcome of one turn.
type Result struct {
	// Answer is the model's answer; with ClientToolCalls, the text it
	// wrote beside its calls, often none.
	Answer     string
	StopReason StopReason
	// Steps counts the model requests this turn made.
	Steps int
	// Files are the files the code created or changed in /work this turn,
	// in the order they first appeared.
	Files []sandbox.FileInfo
	Usage llm.Usage
	// Notices are the turn's Notice texts: what the user should know that
	// did not end it.
	Notices []string
	// ClientCalls are the client tool calls the turn ended on
	// (ClientToolCalls), in the order the model made them.
	ClientCalls []llm.ToolCall
}

// Agent holds one conversation: its history, its sandbox and what it knows of
// the files in /work.
type Agent struct {
	model   Completer
	sbx     sandbox.Sandbox
	runner  kernel.Runner
	cfg     Config
	history []llm.Message
	// stamps records size and modification time of every file in /work as
	// of the last look, to tell which files a run created or changed.
	stamps map[string]stamp
	// listProblem says that a look at /work left files out (see list),
	// until the user and the model are told.
	listProblem string
	// uploaded lists files uploaded since the model was last told of them,
	// notes what else it must hear with the next question, and images
	// what it must see with it (Show).
	uploaded []string
	notes    []string
	images   []string
	// turnOpts are the client's settings of the turns (SetTurnOptions),
	// and budget the running turn's budgets, nil between turns.
	turnOpts TurnOptions
	budget   *budget
	// usage and steps count the whole conversation.
	usage llm.Usage
	steps int
	// dialect is how tool calls travel now; calledTool is set once the
	// model has called the tool other than with a fenced code block.
	dialect    llm.Dialect
	calledTool bool
	// window is what is known of the model's context (context.go);
	// turnStart is the index of the current question in history; sent is
	// the estimate of the last request, in tokens.
	window    window
	turnStart int
	sent      int
	// notices are this turn's Notice texts, for Result.
	notices []string
	// pending are the client tool calls that wait for the caller's
	// outputs; clientErr is what is wrong with Config.ClientTools.
	pending   []llm.ToolCall
	clientErr error
}

type stamp struct {
	size    int64
	modTime int64 // nanoseconds: List and walk.py make the same number, not always the same time.Time
}

// New returns an agent for a new conversation in sbx, whose code runs
// through runner (on the same sandbox).
func New(model Completer, sbx sandbox.Sandbox, runner kernel.Runner, cfg Config) *Agent {
	if cfg.MaxSteps <= 0 {
		cfg.MaxSteps = 8
	}
	if cfg.ExecMode == "" {
		cfg.ExecMode = kernel.ModeScript
	}
	if cfg.Dialect == "" {
		cfg.Dialect = llm.DialectAuto
	}
	return &Agent{model: model, sbx: sbx, runner: runner, cfg: cfg, stamps: map[string]stamp{},
		dialect: cfg.Dialect, window: newWindow(cfg), clientErr: CheckClientTools(cfg.ClientTools)}
}

// SetModel switches the model for the following turns; the history is kept.
// Like every method, it must not be called while a turn runs.
func (a *Agent) SetModel(name string) { a.cfg.Model = name }

// SetMaxSteps changes the step cap for the following turns.
func (a *Agent) SetMaxSteps(n int) {
	if n > 0 {
		a.cfg.MaxSteps = n
	}
}

// Restore continues a stored conversation: history as it was saved, with
// its usage and step count. /work is looked at now, so that files already
// there are not reported as saved by the next step.
func (a *Agent) Restore(ctx context.Context, history []llm.Message, usage llm.Usage, steps int) error {
	a.history = append([]llm.Message(nil), history...)
	a.usage, a.steps = usage, steps
	a.calledTool = calledTool(a.history)
	a.turnStart = lastQuestion(a.history)
	// A turn that ended on client tool calls waits for Continue; one saved
	// without its end (terp killed or cancelled mid-turn) is closed as Ask
	// closes one.
	a.pending = pendingCalls(a.history)
	a.closeUnanswered(unansweredNotes[""])
	return a.snapshot(ctx, nil)
}

// Rebind moves the conversation to another sandbox and runner, as when a
// paused sandbox was resumed or replaced, and looks at /work anew.
func (a *Agent) Rebind(ctx context.Context, sbx sandbox.Sandbox, runner kernel.Runner) error {
	a.sbx, a.runner = sbx, runner
	return a.snapshot(ctx, nil)
}

// Note queues text the model must read with the next question, such as
// that its variables were reset while the conversation was paused.
// The same note twice (a sandbox renewed before the turn and again before
// its downloads) is told once.
func (a *Agent) Note(text string) {
	if !slices.Contains(a.notes, text) {
		a.notes = append(a.notes, text)
	}
}

// TakeNotes returns the notes queued for the next question and forgets
// them: a client that writes the code itself (conversation.Run) asks no
// question that would carry them, and is the one that must hear them.
func (a *Agent) TakeNotes() []string {
	notes := a.notes
	a.notes = nil
	return notes
}

// TurnOptions are a client's settings of its turns: how the model
// samples, what it is told besides terp's system prompt, and how much it
// may write.
type TurnOptions struct {
	Sampling llm.Sampling
	// Instructions follow terp's system prompt in every request of the
	// turn; they are not kept in the history.
	Instructions string
	// MaxOutputTokens bounds the tokens the model writes in a turn, its
	// replies together (0: no bound): each request asks for at most what
	// is left, and the turn stops at TokenBudget when it is used.
	MaxOutputTokens int
}

// SetTurnOptions sets the client's settings of the following turns.
func (a *Agent) SetTurnOptions(o TurnOptions) { a.turnOpts = o }

// Show queues images (data URLs) for the model to see with the next
// question: images a user attached, for a model that takes them.
func (a *Agent) Show(images []string) { a.images = append(a.images, images...) }

// checkpoint hands the conversation to Config.Checkpoint.
func (a *Agent) checkpoint(done bool) error {
	if a.cfg.Checkpoint == nil {
		return nil
	}
	if err := a.cfg.Checkpoint(Checkpoint{Messages: a.Messages(), Usage: a.usage, Steps: a.steps, TurnDone: done}); err != nil {
		return fmt.Errorf("save the conversation: %w", err)
	}
	return nil
}

// Messages returns the conversation so far, as sent to the model.
func (a *Agent) Messages() []llm.Message { return append([]llm.Message(nil), a.history...) }

// Upload copies r to /work/name before the next question. The file is listed
// to the model and is not reported back as a file the code saved.
func (a *Agent) Upload(ctx context.Context, name string, r io.Reader) error {
	if err := a.sbx.WriteFile(ctx, path.Join(sandbox.WorkDir, name), r); err != nil {
		return fmt.Errorf("upload %s: %w", name, err)
	}
	a.uploaded = append(a.uploaded, name)
	return a.snapshot(ctx, nil)
}

// Place writes r to /work/name as a file the code did not save, so that
// the next run does not report it, nor the model hear of it: a client's
// own copy of a file, put back.
func (a *Agent) Place(ctx context.Context, name string, r io.Reader) error {
	if err := a.sbx.WriteFile(ctx, path.Join(sandbox.WorkDir, name), r); err != nil {
		return fmt.Errorf("write %s: %w", name, err)
	}
	return a.snapshot(ctx, nil)
}

// Ask runs one turn: question in, answer (or a stop reason) out. send receives
// the turn's events; it may be nil. It is never called twice at once, but
// OutputDelta events come from another goroutine than the rest (the
// runner's), while the code runs: send must not wait long for them. The
// returned error is set when the turn ended in error or was cancelled;
// Result is filled in either way. Client tool calls still pending are
// closed first, as calls the client gave no result for.
func (a *Agent) Ask(ctx context.Context, question string, send func(Event)) (Result, error) {
	return a.run(ctx, send, func(send func(Event)) {
		a.closePending()
		a.addQuestion(question, send)
	})
}

// run runs a turn whose start adds to the history what the model is to
// read first: Ask's question, Continue's outputs.
func (a *Agent) run(ctx context.Context, send func(Event), start func(send func(Event))) (Result, error) {
	if send == nil {
		send = func(Event) {}
	}
	a.notices = nil
	res, err := a.turn(ctx, start, send)
	res.Notices = a.notices
	switch {
	case err == nil:
	case ctx.Err() != nil:
		res.StopReason = Cancelled
		err = ctx.Err()
	default:
		res.StopReason = Errored
		send(Failed{Err: err})
	}
	if res.StopReason != Answered && res.StopReason != ClientToolCalls {
		a.closeUnanswered(unansweredNotes[res.StopReason])
	}
	return res, err
}

// unansweredNotes close the history of a turn that ended without an answer,
// saying why; the empty reason is a history stored that way.
var unansweredNotes = map[StopReason]string{
	Cancelled:   "(cancelled by the user before an answer)",
	MaxSteps:    "(stopped at the step limit before an answer)",
	TokenBudget: "(stopped at the token budget before an answer)",
	TimeBudget:  "(stopped at the time budget before an answer)",
	Errored:     "(stopped by an error before an answer)",
	"":          "(the question went unanswered)",
}

// closeUnanswered ends the history of a turn that ended without an answer
// with a short assistant note, unless it already ends with one. Without it
// the next question would follow this one, or its tool results, directly,
// and some Mistral and Llama chat templates reject a history whose user and
// assistant turns do not alternate; the note also tells the model why the
// question went unanswered. Client calls that are pending wait for their
// outputs: the history is left open for them.
func (a *Agent) closeUnanswered(note string) {
	n := len(a.history)
	if n == 0 || len(a.pending) > 0 {
		return
	}
	if last := a.history[n-1]; last.Role == llm.RoleSystem || (last.Role == llm.RoleAssistant && len(last.ToolCalls) == 0) {
		return
	}
	a.history = append(a.history, llm.Message{Role: llm.RoleAssistant, Content: note})
}

func (a *Agent) turn(ctx context.Context, start func(send func(Event)), send func(Event)) (Result, error) {
	var res Result
	if a.clientErr != nil {
		return res, a.clientErr
	}
	files, err := a.list(ctx)
	if err != nil {
		return res, err
	}
	if len(a.history) == 0 {
		a.history = append(a.history, llm.Message{Role: llm.RoleSystem, Content: wordingOf(a.cfg.Prompt).systemPrompt(Visible(files))})
		a.uploaded = nil
	}
	start(send)
	// Saved before the first model call, so that a request that fails, or
	// a terp killed while it waits, leaves a conversation that says what
	// was asked.
	if err := a.checkpoint(false); err != nil {
		return res, err
	}
	ctx, b := a.startBudget(ctx)
	a.budget = b
	defer func() { b.stop(); a.budget = nil }()

	// step is the step in progress; codes follows the code of each of its
	// run_python calls as it streams, by call id (nil for other tools).
	var step int
	codes := map[string]*codeStream{}
	onDelta := func(d llm.Delta) {
		switch d.Kind {
		case llm.DeltaReasoning:
			send(ReasoningDelta{Text: d.Text})
		case llm.DeltaContent:
			send(TextDelta{Text: d.Text})
		case llm.DeltaArguments:
			code, seen := codes[d.ID]
			if !seen {
				if d.Name == ToolName {
					code = new(codeStream)
				}
				codes[d.ID] = code
			}
			if code == nil {
				return
			}
			if text := code.feed(d.Text); text != "" {
				send(CodeDelta{Step: step, ID: d.ID, Text: text})
			}
		}
	}
	nudged := false
	// where indexes res.Files by path: a step may save tens of thousands.
	where := map[string]int{}
	for step = 1; step <= a.cfg.MaxSteps; step++ {
		clear(codes)
		if reason := b.exceeded(); reason != "" {
			return a.stopOverBudget(res, reason, b, send)
		}
		res.Steps = step
		send(StepStarted{Step: step, MaxSteps: a.cfg.MaxSteps})
		reply, err := a.complete(ctx, onDelta, send)
		if err != nil {
			if b.timeUp() {
				return a.stopOverBudget(res, TimeBudget, b, send)
			}
			return res, err
		}
		b.count(reply, a.sent)
		res.Usage = res.Usage.Add(reply.Usage)
		a.usage = a.usage.Add(reply.Usage)
		a.steps++
		send(UsageUpdated{Usage: res.Usage})
		if len(reply.ToolCalls) == 0 && strings.TrimSpace(reply.Content) == "" && !nudged {
			// An empty reply is no answer. Small models produce one now
			// and then (a stop token straight after thinking); asking once
			// more usually gets the answer.
			nudged = true
			a.history = append(a.history, llm.Message{Role: llm.RoleUser, Content: EmptyReplyNudge})
			continue
		}
		// Reasoning is not sent back (unless the model needs it): the
		// assistant message carries the answer text and the calls, and how
		// the model wrote calls it wrote as text.
		a.history = append(a.history, a.assistantMessage(reply))
		if len(reply.ToolCalls) == 0 {
			res.Answer = strings.TrimSpace(reply.Content)
			res.StopReason = Answered
			send(Answer{Text: res.Answer})
			return res, a.checkpoint(true)
		}
		// Client calls are the caller's to run: they are announced, and
		// wait for Continue once terp's own calls have run.
		var clients []llm.ToolCall
		for i, call := range reply.ToolCalls {
			if a.isClientTool(call.Name) {
				send(ToolCall{Step: step, ID: call.ID, Name: call.Name, Arguments: call.Arguments})
				clients = append(clients, call)
				continue
			}
			out, err := a.runCall(ctx, step, call, send)
			if err != nil {
				// Every call gets a tool message, or the history a chat
				// goes on with after Ctrl+C is one servers reject. The
				// call that was running says what it printed.
				rest := reply.ToolCalls[i:]
				if out.content != "" {
					a.history = append(a.history, llm.Message{Role: llm.RoleTool, ToolCallID: call.ID, Content: out.content})
					rest = rest[1:]
				}
				for _, c := range append(clients, rest...) {
					why := "not run to the end: "
					if a.isClientTool(c.Name) {
						why = "not passed to the client: "
					}
					a.history = append(a.history, llm.Message{Role: llm.RoleTool, ToolCallID: c.ID,
						Content: mustJSON(toolError{Error: why + err.Error()})})
				}
				// The step is whole now, so it is saved: a conversation
				// continued later tells the model what the run printed.
				if cerr := a.checkpoint(false); cerr != nil {
					err = errors.Join(err, cerr)
				}
				if b.timeUp() {
					return a.stopOverBudget(res, TimeBudget, b, send)
				}
				return res, err
			}
			for _, f := range out.saved {
				res.Files = appendFile(res.Files, where, f)
			}
			a.history = append(a.history, llm.Message{Role: llm.RoleTool, ToolCallID: call.ID, Content: out.content})
		}
		if len(clients) > 0 {
			// The step is saved with its calls open, so that a stored
			// conversation can go on with their outputs; the question is
			// not done until the model answers it.
			a.pending = clients
			res.StopReason, res.ClientCalls = ClientToolCalls, slices.Clone(clients)
			res.Answer = strings.TrimSpace(reply.Content)
			return res, a.checkpoint(false)
		}
		if err := a.checkpoint(false); err != nil {
			return res, err
		}
	}
	res.StopReason = MaxSteps
	steps := fmt.Sprintf("%d steps", a.cfg.MaxSteps)
	if a.cfg.MaxSteps == 1 {
		steps = "1 step"
	}
	res.Answer = fmt.Sprintf("Stopped after %s without a final answer: the step cap was reached. "+
		"Raise it with --max-steps, or ask a narrower question.", steps)
	send(Answer{Text: res.Answer})
	return res, a.checkpoint(true)
}

// EmptyReplyNudge is sent, once per turn, when the model replies with
// neither text nor a tool call.
const EmptyReplyNudge = "Your reply was empty. Answer the question in plain text, or call run_python to compute what you need."

// addQuestion adds a question to the history, with what the model must hear
// before it, and tells the user what the model is told.
func (a *Agent) addQuestion(question string, send func(Event)) {
	a.turnStart = len(a.history)
	notes := a.notes
	a.history = append(a.history, llm.Message{Role: llm.RoleUser, Content: a.withUploads(question), Images: a.images})
	a.images = nil
	// What the model is told about its session (restarted, a new sandbox)
	// the user is told too.
	for _, n := range notes {
		a.notice(send, n)
	}
}

// withUploads tells the model about files uploaded since it last heard, and
// anything else queued with Note.
func (a *Agent) withUploads(question string) string {
	var pre []string
	if len(a.uploaded) > 0 {
		names := make([]string, len(a.uploaded))
		for i, n := range a.uploaded {
			names[i] = path.Join(wordingOf(a.cfg.Prompt).dir, n)
		}
		pre = append(pre, "(New files uploaded: "+strings.Join(names, ", ")+")")
	}
	for _, n := range a.notes {
		pre = append(pre, "("+n+")")
	}
	a.uploaded, a.notes = nil, nil
	if len(pre) == 0 {
		return question
	}
	if question == "" {
		return strings.Join(pre, "\n")
	}
	return strings.Join(pre, "\n") + "\n\n" + question
}

// appendFile adds f to files, replacing an earlier entry for the same path so
// that a file saved twice is listed once with its final size. where maps
// the paths in files to their index.
func appendFile(files []sandbox.FileInfo, where map[string]int, f sandbox.FileInfo) []sandbox.FileInfo {
	if i, ok := where[f.Path]; ok {
		files[i] = f
		return files
	}
	where[f.Path] = len(files)
	return append(files, f)
}

// snapshot records the current state of /work. When saved is not nil, files
// that are new or changed since the last snapshot are appended to it. The
// listing is complete however many files there are (see list), or a file
// saved beside many others would never be reported nor downloaded.
func (a *Agent) snapshot(ctx context.Context, saved *[]sandbox.FileInfo) error {
	files, err := a.list(ctx)
	if err != nil {
		return err
	}
	seen := make(map[string]stamp, len(files))
	for _, f := range Visible(files) {
		st := stamp{size: f.Size, modTime: f.ModTime.UnixNano()}
		seen[f.Path] = st
		if old, ok := a.stamps[f.Path]; saved != nil && (!ok || old != st) {
			*saved = append(*saved, f)
		}
	}
	a.stamps = seen
	return nil
}

// Visible drops terp's own files (the script, the kernel's worker, caches
// under /work/.terp) from a listing of /work: they are neither shown to the
// model and the user nor downloaded.
func Visible(files []sandbox.FileInfo) []sandbox.FileInfo {
	out := files[:0:0]
	for _, f := range files {
		if f.Path == kernel.InternalDir || strings.HasPrefix(f.Path, kernel.InternalDir+"/") {
			continue
		}
		out = append(out, f)
	}
	return out
}
