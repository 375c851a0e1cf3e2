package agent

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/terpdev/terp/internal/llm"
)

// Client tools are function tools that the caller defines and runs itself:
// an API client of `terp serve` offers its own functions beside the code
// interpreter. terp cannot run them, so a reply that calls one ends the turn
// (StopReason ClientToolCalls) with the calls pending in the history; the
// caller runs them and hands their outputs to Continue, which goes on with
// the same loop. A pending call is answered by Continue, or closed with a
// note by the next Ask, so that the history every request carries stays one
// that servers accept: each call answered by a tool message.
//
// Where tools travel as text (DialectText, chosen or after the server
// refused tools), the system prompt describes the client tools and asks for
// their calls in the Hermes format (<tool_call>{...}</tool_call>), which the
// client recovers like any call written as text; their outputs go back as
// "Output of NAME" messages. A model may still write its code as a ```python
// block in the same reply: a reply is read in one format, so then only the
// call is seen, and the block stays text.

// ClientOutput is the caller's result of one pending client tool call.
type ClientOutput struct {
	// CallID is the id of the call it answers (llm.ToolCall.ID).
	CallID string
	// Output is what the model reads as the call's result.
	Output string
}

// ErrUnmatchedOutputs is wrapped by Continue's error when the outputs do not
// answer exactly the pending client tool calls; the history is left as it
// was, the calls still pending.
var ErrUnmatchedOutputs = errors.New("the tool outputs do not match the pending client tool calls")

// SetClientTools replaces the client tools for the following turns. A tool
// named like terp's own (run_python), one without a name or two with the
// same name are refused, and the tools stay as they were. Calls already
// pending are answered by their ids, whatever the tools are now. Like every
// method, it must not be called while a turn runs.
func (a *Agent) SetClientTools(tools []llm.Tool) error {
	if err := CheckClientTools(tools); err != nil {
		return err
	}
	a.cfg.ClientTools, a.clientErr = slices.Clone(tools), nil
	return nil
}

// CheckClientTools says what is wrong with a set of client tools, if
// anything: what SetClientTools would refuse. A front-end checks a
// request's tools with it before the turn that brings them, so that a
// mistake is the client's, answered before anything runs.
func CheckClientTools(tools []llm.Tool) error {
	seen := make(map[string]bool, len(tools))
	for _, t := range tools {
		switch {
		case strings.TrimSpace(t.Name) == "":
			return errors.New("a client tool has no name")
		case t.Name == ToolName:
			return fmt.Errorf("client tool %q clashes with terp's own tool of that name: rename it", t.Name)
		case seen[t.Name]:
			return fmt.Errorf("two client tools are named %q: tool names must be unique", t.Name)
		}
		seen[t.Name] = true
	}
	return nil
}

// isClientTool reports whether name is one of the caller's tools.
func (a *Agent) isClientTool(name string) bool {
	return slices.ContainsFunc(a.cfg.ClientTools, func(t llm.Tool) bool { return t.Name == name })
}

// PendingCalls returns the client tool calls that wait for their outputs: the
// Result.ClientCalls of the turn that ended with ClientToolCalls, or of a
// restored conversation that was stored that way.
func (a *Agent) PendingCalls() []llm.ToolCall { return slices.Clone(a.pending) }

// Continue answers the pending client tool calls with outputs, one for each
// call, adds question when it is not empty, and goes on with the turn as Ask
// does: the same events, the same Result, the same errors. Outputs that name
// an unknown call, answer one twice or leave one out are refused with an
// error that wraps ErrUnmatchedOutputs and names them; nothing is sent
// then, and the calls stay pending.
func (a *Agent) Continue(ctx context.Context, outputs []ClientOutput, question string, send func(Event)) (Result, error) {
	if err := a.matchOutputs(outputs); err != nil {
		return Result{StopReason: Errored}, err
	}
	return a.run(ctx, send, func(send func(Event)) {
		for _, o := range outputs {
			a.history = append(a.history, llm.Message{Role: llm.RoleTool, ToolCallID: o.CallID, Content: o.Output})
		}
		a.pending = nil
		// Notes (a sandbox replaced while the conversation was paused) and
		// uploads are told now, not with some later question: the code
		// the model writes next depends on them.
		if question == "" && len(a.notes) == 0 && len(a.uploaded) == 0 {
			return
		}
		// A user message straight after tool results is one that some
		// chat templates reject (see closeUnanswered).
		a.closeUnanswered("(the results of the client's tools came with a new message from the user)")
		a.addQuestion(question, send)
	})
}

// matchOutputs checks that outputs answer each pending call once.
func (a *Agent) matchOutputs(outputs []ClientOutput) error {
	if len(a.pending) == 0 {
		return fmt.Errorf("%w: no client tool call is pending", ErrUnmatchedOutputs)
	}
	want := make(map[string]bool, len(a.pending))
	for _, c := range a.pending {
		want[c.ID] = true
	}
	var unknown, twice []string
	got := make(map[string]bool, len(outputs))
	for _, o := range outputs {
		switch {
		case !want[o.CallID]:
			unknown = append(unknown, fmt.Sprintf("%q", o.CallID))
		case got[o.CallID]:
			twice = append(twice, fmt.Sprintf("%q", o.CallID))
		}
		got[o.CallID] = true
	}
	var missing []string
	for _, c := range a.pending {
		if !got[c.ID] {
			missing = append(missing, fmt.Sprintf("%q (%s)", c.ID, c.Name))
		}
	}
	var problems []string
	if len(unknown) > 0 {
		problems = append(problems, "no pending call has the id "+strings.Join(unknown, ", "))
	}
	if len(twice) > 0 {
		problems = append(problems, "answered twice: "+strings.Join(twice, ", "))
	}
	if len(missing) > 0 {
		problems = append(problems, "no output for "+strings.Join(missing, ", "))
	}
	if len(problems) == 0 {
		return nil
	}
	return fmt.Errorf("%w: %s; answer each pending call once: %s", ErrUnmatchedOutputs,
		strings.Join(problems, "; "), callList(a.pending))
}

func callList(calls []llm.ToolCall) string {
	names := make([]string, len(calls))
	for i, c := range calls {
		names[i] = fmt.Sprintf("%q (%s)", c.ID, c.Name)
	}
	return strings.Join(names, ", ")
}

// noClientResult answers a client call that the caller never answered.
const noClientResult = "the client gave no result for this call"

// closePending answers the pending client calls, when a new question comes
// instead of their outputs, with a tool message that says no result came,
// and closes the exchange with a note as closeUnanswered does, so that the
// question follows an assistant message.
func (a *Agent) closePending() {
	if len(a.pending) == 0 {
		return
	}
	for _, c := range a.pending {
		a.history = append(a.history, llm.Message{Role: llm.RoleTool, ToolCallID: c.ID,
			Content: mustJSON(toolError{Error: noClientResult})})
	}
	a.pending = nil
	a.closeUnanswered("(the client's tools were called, but the client gave no result)")
}

// pendingCalls returns the calls of the history's last assistant message
// that no tool message answers: client calls that wait for their outputs. A
// turn's other ends always answer every call, so only those are left open.
func pendingCalls(history []llm.Message) []llm.ToolCall {
	for i := len(history) - 1; i >= 0; i-- {
		m := history[i]
		if m.Role == llm.RoleTool {
			continue
		}
		if m.Role != llm.RoleAssistant || len(m.ToolCalls) == 0 {
			return nil
		}
		answered := map[string]bool{}
		for _, t := range history[i+1:] {
			answered[t.ToolCallID] = true
		}
		var out []llm.ToolCall
		for _, c := range m.ToolCalls {
			if !answered[c.ID] {
				out = append(out, c)
			}
		}
		return out
	}
	return nil
}

// lastQuestion is the index of the last question in history, as turnStart
// records it, or 0 when there is none.
func lastQuestion(history []llm.Message) int {
	for i := len(history) - 1; i >= 0; i-- {
		if m := history[i]; m.Role == llm.RoleUser && m.Content != EmptyReplyNudge {
			return i
		}
	}
	return 0
}

// clientToolsPrompt describes the client tools to a model that gets no tools
// (text mode), and says how to call them: in the Hermes format, which
// llm's recovery reads and which the history's text form writes back.
func clientToolsPrompt(tools []llm.Tool) string {
	if len(tools) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString("\n\nYou can also call these functions, which the user's application runs for you. " +
		"Write a call as\n\n<tool_call>\n{\"name\": \"NAME\", \"arguments\": {...}}\n</tool_call>\n\n" +
		"and wait for its result, in a message that starts with \"Output of NAME\":\n")
	for _, t := range tools {
		b.WriteString("- " + t.Name)
		if t.Description != "" {
			b.WriteString(": " + t.Description)
		}
		if len(t.Parameters) > 0 {
			b.WriteString(" Arguments (JSON Schema): " + string(t.Parameters))
		}
		b.WriteString("\n")
	}
	return strings.TrimRight(b.String(), "\n")
}
