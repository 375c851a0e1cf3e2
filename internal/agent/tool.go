package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/terpdev/terp/internal/kernel"
	"github.com/terpdev/terp/internal/llm"
	"github.com/terpdev/terp/internal/sandbox"
)

// ToolName is the one tool the model gets.
const ToolName = "run_python"

var toolParameters = json.RawMessage(`{"type":"object","properties":{"code":{"type":"string",` +
	`"description":"The complete Python source to run."}},"required":["code"]}`)

// tools is what the model is offered: run_python, described in the
// conversation's wording.
func (c Config) tools() []llm.Tool {
	w := wordingOf(c.Prompt)
	return []llm.Tool{{Name: ToolName, Description: w.tool(c.promptFacts(), w.dir), Parameters: toolParameters}}
}

// NetworkSentence tells the model what its code may reach, so that it
// neither tries downloads that cannot work nor gives up on ones that can; an
// MCP server's instructions say the same.
func NetworkSentence(n sandbox.Network) string {
	switch n.Mode {
	case sandbox.NetworkFull:
		return "The network is available."
	case sandbox.NetworkAllowlist:
		if len(n.Allow) == 0 {
			return "There is no network."
		}
		return "The network is limited to HTTP(S) to " + strings.Join(n.Allow, ", ") +
			", through a proxy already set in the environment (pip install works when the package index is listed)."
	}
	return "There is no network."
}

// callOutcome is what one tool call produced.
type callOutcome struct {
	content string // the tool message sent to the model
	saved   []sandbox.FileInfo
}

// toolResult is the JSON the model receives, shaped like the seed's.
type toolResult struct {
	ExitCode int      `json:"exit_code"`
	Stdout   string   `json:"stdout"`
	Stderr   string   `json:"stderr"`
	Files    []string `json:"files,omitempty"`
	// FilesSaved and FilesNote say how many files were saved when Files
	// names only some of them (see shown), or when names were removed to
	// fit the context window.
	FilesSaved int    `json:"files_saved,omitempty"`
	FilesNote  string `json:"files_note,omitempty"`
	TimedOut   bool   `json:"timed_out,omitempty"`
	// Note tells the model what happened to the session: a timeout, a
	// crash, variables lost.
	Note string `json:"note,omitempty"`
}

// toolError is the JSON the model receives when a call could not run.
type toolError struct {
	Error string `json:"error"`
}

// ToolMessage is a stored tool message read back, for a transcript or an
// export: a run's result (toolResult) or the error of a call that could
// not run (toolError, in Error).
type ToolMessage struct {
	ExitCode int      `json:"exit_code"`
	Stdout   string   `json:"stdout"`
	Stderr   string   `json:"stderr"`
	Files    []string `json:"files"`
	TimedOut bool     `json:"timed_out"`
	Note     string   `json:"note"`
	Error    string   `json:"error"`
}

// ReadToolMessage reads a stored tool message; ok is false when it is not
// the tool's JSON (a run cut short is told in plain text).
func ReadToolMessage(content string) (m ToolMessage, ok bool) {
	return m, json.Unmarshal([]byte(content), &m) == nil
}

// CallCode is the code of a run_python call as stored, or its arguments as
// they are when they hold no code.
func CallCode(call llm.ToolCall) string {
	var args struct {
		Code string `json:"code"`
	}
	if json.Unmarshal([]byte(call.Arguments), &args) != nil || args.Code == "" {
		return call.Arguments
	}
	return args.Code
}

func mustJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		// Only strings, ints and bools go in: this cannot happen.
		panic(err)
	}
	return string(b)
}

// runCall answers one tool call. Problems the model caused (an unknown tool,
// bad arguments) become a tool message it can recover from; only a failing
// sandbox or a cancelled context is returned as an error. A run that ctx cut
// short comes with its error and a tool message that tells what it printed
// (see stoppedRun); otherwise the outcome is empty.
func (a *Agent) runCall(ctx context.Context, step int, call llm.ToolCall, send func(Event)) (callOutcome, error) {
	code, problem := parseCall(call)
	if call.Name != ToolName && len(a.cfg.ClientTools) > 0 {
		names := []string{ToolName}
		for _, t := range a.cfg.ClientTools {
			names = append(names, t.Name)
		}
		problem = fmt.Sprintf("unknown tool %q: the tools are %s", call.Name, strings.Join(names, ", "))
	}
	send(ToolCall{Step: step, ID: call.ID, Name: call.Name, Code: code})
	if problem != "" {
		send(ToolOutput{Step: step, ID: call.ID, Error: problem})
		return callOutcome{content: mustJSON(toolError{Error: problem})}, nil
	}

	ex, err := a.execute(ctx, code, func(o kernel.Output) {
		send(OutputDelta{Step: step, ID: call.ID, Stream: o.Stream, Text: o.Text})
	})
	if err != nil {
		if ex.stopped && ctx.Err() != nil {
			return stoppedRun(ctx, step, call, ex.run, send), err
		}
		return callOutcome{}, err
	}
	run, saved, res := ex.run, ex.saved, ex.res
	out := ToolOutput{
		Step: step, ID: call.ID, ExitCode: res.ExitCode, Stdout: res.Stdout, Stderr: res.Stderr,
		TimedOut: res.TimedOut, Notice: res.Note, Files: res.Files, Value: run.Value, Duration: run.Duration,
	}
	send(out.withFacts(run))
	named := make(map[string]bool, len(res.Files))
	for _, n := range res.Files {
		named[n] = true
	}
	for _, f := range saved {
		if named[f.Path] {
			send(FileSaved{Path: f.Path, Bytes: f.Size})
		}
	}
	if a.listProblem != "" {
		res.FilesNote = strings.TrimSpace(res.FilesNote + " " + a.listProblem)
		a.notice(send, a.listProblem)
		a.listProblem = ""
	}
	if more := len(saved) - len(res.Files); more > 0 {
		a.notice(send, fmt.Sprintf("The code saved %s files in %s in this step; only %s of them are listed.",
			commas(len(saved)), wordingOf(a.cfg.Prompt).dir, commas(len(res.Files))))
	}
	return callOutcome{content: mustJSON(res), saved: saved}, nil
}

// withFacts is o with the run's facts beneath its words.
func (o ToolOutput) withFacts(run kernel.Result) ToolOutput {
	o.Cell, o.Figures, o.Outcome, o.Exception, o.Restart = run.Cell, run.Figures, run.Outcome, run.Exception, run.Restart
	return o
}

// execution is one run of code and what it left in /work, as both a
// model's step and a run without the model (Exec) see it.
type execution struct {
	run   kernel.Result
	saved []sandbox.FileInfo
	res   toolResult
	// stopped is set when the runner failed or ctx ended while the code
	// ran: run holds what it printed until then.
	stopped bool
}

// execute runs code through the agent's runner with its timeout, passing
// output to onOutput as it is printed, and builds the result the model
// would read: the output as the runner bounds it, and the files the run
// created or changed, of which as many are named as a tool result shows.
func (a *Agent) execute(ctx context.Context, code string, onOutput func(kernel.Output)) (execution, error) {
	live := ctx
	if onOutput != nil {
		live = kernel.WithOutput(ctx, onOutput)
	}
	run, err := a.runner.Run(live, code, a.cfg.Timeout)
	if err != nil {
		return execution{run: run, stopped: true}, fmt.Errorf("run the code: %w", err)
	}
	var saved []sandbox.FileInfo
	if err := a.snapshot(ctx, &saved); err != nil {
		return execution{run: run}, err
	}
	res := toolResult{ExitCode: run.ExitCode, Stdout: run.Stdout, Stderr: run.Stderr, TimedOut: run.TimedOut, Note: run.Notice}
	// The model and the user see the same short list; all the files are
	// in saved, for Result.Files and the downloads.
	res.Files = shown(saved)
	if len(res.Files) < len(saved) {
		res.FilesSaved, res.FilesNote = len(saved), filesNote(len(saved), len(res.Files))
	}
	return execution{run: run, saved: saved, res: res}, nil
}

// CodeRun is the outcome of code run without the model (Exec).
type CodeRun struct {
	// Result is the run's exit status and output, cut to the runner's
	// bounds as a model's step is.
	kernel.Result
	// Files are all the files the run created or changed in /work, in the
	// order they were listed.
	Files []sandbox.FileInfo
	// Shown are the paths of Files a list should name (all but when there
	// are very many, as in a step's tool result).
	Shown []string
	// FilesNote says, as a step's tool result would, that Files are more
	// than a list should name, or that /work was too full to list whole.
	FilesNote string
	// Content is the tool result a model would have read for the run.
	Content string
}

// Exec runs code in the conversation's sandbox as a model's run_python
// call would run (same runner, timeout, output bounds and files seen), for
// a client that runs code itself, such as an MCP client. It is not added
// to the history: the model never asked for it. A failure of the code is in
// CodeRun; the error is for the sandbox failing or ctx ending, and then
// CodeRun still holds what the code printed. onOutput gets the output as
// kernel.WithOutput gives it, for a person watching; with onOutput nil, a
// ctx made by kernel.WithAllOutput (a protocol that forwards every byte)
// is passed on as it is.
func (a *Agent) Exec(ctx context.Context, code string, onOutput func(kernel.Output)) (CodeRun, error) {
	ex, err := a.execute(ctx, code, onOutput)
	if err != nil {
		return CodeRun{Result: ex.run}, err
	}
	if a.listProblem != "" {
		ex.res.FilesNote = strings.TrimSpace(ex.res.FilesNote + " " + a.listProblem)
		a.listProblem = ""
	}
	return CodeRun{Result: ex.run, Files: ex.saved, Shown: ex.res.Files, FilesNote: ex.res.FilesNote, Content: mustJSON(ex.res)}, nil
}

// stoppedRun is the outcome of a run that the turn's end cut short: the
// user pressed Ctrl+C, or the time budget ran out. What it printed until
// then is kept, on the screen and for the model, which would otherwise
// never learn how far its code got; the tool message is plain text, cut
// like other output when the context fills.
func stoppedRun(ctx context.Context, step int, call llm.ToolCall, run kernel.Result, send func(Event)) callOutcome {
	who := "cancelled by the user"
	if errors.Is(context.Cause(ctx), errTimeBudget) {
		who = "stopped at the time budget"
	}
	why := fmt.Sprintf("%s after %.1f s", who, run.Duration.Seconds())
	out := ToolOutput{
		Step: step, ID: call.ID, ExitCode: run.ExitCode, Stdout: run.Stdout, Stderr: run.Stderr,
		Notice: run.Notice, Stopped: why, Duration: run.Duration,
	}
	send(out.withFacts(run))
	var b strings.Builder
	b.WriteString(why)
	if run.Stdout == "" && run.Stderr == "" {
		b.WriteString("; no output so far")
	} else {
		b.WriteString("; output so far:\n")
		b.WriteString(run.Stdout)
		if run.Stderr != "" {
			if run.Stdout != "" && !strings.HasSuffix(run.Stdout, "\n") {
				b.WriteString("\n")
			}
			b.WriteString("stderr:\n" + run.Stderr)
		}
	}
	if run.Notice != "" {
		b.WriteString("\n" + run.Notice)
	}
	return callOutcome{content: b.String()}
}

// parseCall extracts the code from a call, or says what was wrong in words
// the model can act on. A bare JSON string is accepted as the code: models
// often send it where an object was asked for.
func parseCall(call llm.ToolCall) (code, problem string) {
	if call.Name != ToolName {
		return "", fmt.Sprintf("unknown tool %q: the only tool is %s, called with {\"code\": \"<python source>\"}", call.Name, ToolName)
	}
	raw := strings.TrimSpace(call.Arguments)
	var s string
	if err := json.Unmarshal([]byte(raw), &s); err == nil {
		raw = s
		if !strings.HasPrefix(strings.TrimSpace(s), "{") {
			return checkCode(s)
		}
	}
	var args struct {
		Code *string `json:"code"`
	}
	if err := json.Unmarshal([]byte(raw), &args); err != nil {
		return "", fmt.Sprintf("the arguments are not valid JSON (%v). Call %s again with a JSON object "+
			"{\"code\": \"<python source>\"}, escaping newlines and quotes in the code.", err, ToolName)
	}
	if args.Code == nil {
		return "", fmt.Sprintf("the arguments have no \"code\" field. Call %s with {\"code\": \"<python source>\"}.", ToolName)
	}
	return checkCode(*args.Code)
}

func checkCode(code string) (string, string) {
	if strings.TrimSpace(code) == "" {
		return "", "the code is empty. Send the Python source to run in the \"code\" field."
	}
	return code, ""
}
