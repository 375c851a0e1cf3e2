package agent

import (
	"fmt"

	"github.com/terpdev/terp/internal/llm"
)

// textModePrompt is added to the system prompt when tools are not sent
// (tool_dialect text, or after the server refused them): it tells the model
// how to call the tool without function calling.
const textModePrompt = "Function calling is not available here, so call " + ToolName +
	" by writing the Python code in a fenced block, like this:\n\n" +
	"```python\nprint(1234 * 5678)\n```\n\n" +
	"terp runs the python blocks of your reply and answers with their output " +
	"(exit code, stdout, stderr and the files saved) in a message that starts with \"Output of " + ToolName + "\". " +
	"Write one block per reply and wait for its output. When you have the answer, " +
	"reply in plain text with no python block."

// request is the next request for the model, as the current dialect wants
// it.
func (a *Agent) request() llm.Request {
	msgs := a.history
	text := a.dialect == llm.DialectText
	if (text || a.turnOpts.Instructions != "") && len(msgs) > 0 && msgs[0].Role == llm.RoleSystem {
		msgs = append([]llm.Message(nil), msgs...)
		if text {
			msgs[0].Content += "\n\n" + textModePrompt + clientToolsPrompt(a.cfg.ClientTools)
		}
		if a.turnOpts.Instructions != "" {
			msgs[0].Content += "\n\n" + a.turnOpts.Instructions
		}
	}
	sampling := a.turnOpts.Sampling
	if left := a.budget.outputLeft(); left > 0 && (sampling.MaxTokens == 0 || left < sampling.MaxTokens) {
		sampling.MaxTokens = left
	}
	return llm.Request{
		Sampling: sampling,
		Model:    a.cfg.Model,
		Messages: msgs,
		Tools:    append(a.cfg.tools(), a.cfg.ClientTools...),
		Dialect:  a.dialect,
		CodeTool: ToolName,
		// A model that has never called the tool may be one that cannot:
		// its ```python blocks are then its calls.
		FencedCode: a.dialect == llm.DialectText || (a.dialect == llm.DialectAuto && !a.calledTool),
	}
}

// assistantMessage is the reply as it goes into the history.
func (a *Agent) assistantMessage(reply llm.Response) llm.Message {
	m := reply.Message()
	if a.cfg.SendReasoning {
		m.Reasoning = reply.Reasoning
	}
	return m
}

// followDialect learns from a reply how the model calls the tool.
func (a *Agent) followDialect(reply llm.Response, send func(Event)) {
	if len(reply.ToolCalls) == 0 {
		return
	}
	if reply.CallFormat != llm.FormatPython {
		a.calledTool = true
		return
	}
	if a.dialect == llm.DialectAuto {
		a.dialect = llm.DialectText
		a.notice(send, "The model wrote its code in a ```python block instead of calling "+ToolName+
			": terp runs such blocks from now on, and the answer ends when the model replies without one "+
			"(tool_dialect = \"text\" says so from the start).")
	}
}

// refusedTools switches to text mode after the server refused tools, and
// says so. It reports whether the request is worth sending again.
func (a *Agent) refusedTools(e *llm.Error, send func(Event)) bool {
	if a.dialect != llm.DialectAuto {
		return false
	}
	a.dialect = llm.DialectText
	a.notice(send, fmt.Sprintf("%s terp goes on without function calling: the model writes its code in ```python "+
		"blocks and gets the output back as a message (tool_dialect = \"text\" skips the refused request).", e.Msg))
	return true
}

// notice tells the user something that does not end the turn.
func (a *Agent) notice(send func(Event), text string) {
	a.notices = append(a.notices, text)
	send(Notice{Text: text})
}

// calledTool reports whether a stored history shows the model calling the
// tool other than with a fenced code block.
func calledTool(history []llm.Message) bool {
	for _, m := range history {
		if m.Role == llm.RoleAssistant && len(m.ToolCalls) > 0 && m.Written == "" {
			return true
		}
	}
	return false
}
