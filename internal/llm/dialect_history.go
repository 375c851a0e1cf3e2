package llm

import (
	"encoding/json"
	"strings"
)

// textForm rewrites the history for a model that writes its calls as text.
// With all set (DialectText) every exchange is rewritten; otherwise only the
// assistant messages whose calls were recovered from text (Message.Written)
// and their results. An assistant message becomes the text the model wrote
// (or its calls written out as code), and the results of its calls become
// one user message, "Output of run_python: ...": a chat template without
// tool support cannot render role "tool", and a model that wrote its call as
// text understands a plain reply best.
func textForm(msgs []Message, all bool) []Message {
	if !all && !hasWritten(msgs) {
		return msgs
	}
	names := map[string]string{} // call id -> tool name, for rewritten calls
	out := make([]Message, 0, len(msgs))
	// results is the index in out of the user message that gathers the
	// current step's results, or -1.
	results := -1
	for _, m := range msgs {
		switch {
		case m.Role == RoleAssistant && len(m.ToolCalls) > 0 && (all || m.Written != ""):
			for _, c := range m.ToolCalls {
				names[c.ID] = c.Name
			}
			text := m.Written
			if text == "" {
				text = writeCalls(m.Content, m.ToolCalls)
			}
			out = append(out, Message{Role: RoleAssistant, Content: text, Reasoning: m.Reasoning})
			results = -1
		case m.Role == RoleTool && (all || names[m.ToolCallID] != ""):
			name := names[m.ToolCallID]
			if name == "" {
				name = "the tool"
			}
			content := m.Content
			if strings.TrimSpace(content) == "" {
				content = emptyToolOutput
			}
			text := "Output of " + name + ":\n" + content
			if results >= 0 {
				out[results].Content += "\n\n" + text
				continue
			}
			out = append(out, Message{Role: RoleUser, Content: text})
			results = len(out) - 1
		case m.Role == RoleUser && results >= 0 && results == len(out)-1:
			// Templates that want user and assistant turns to alternate
			// reject two user messages in a row.
			out[results].Content += "\n\n" + m.Content
			out[results].Images = append(out[results].Images, m.Images...)
			results = -1
		default:
			out = append(out, m)
			results = -1
		}
	}
	return out
}

// withoutEchoes cuts, from assistant messages that carry tool calls, the same
// calls written out in the content: a history saved before Response.Message
// dropped such echoes (see dropEchoes) would otherwise show the model each
// of those calls twice. The messages are copied only when one changes.
func withoutEchoes(msgs []Message, tools []Tool) []Message {
	var rec *recovery
	out := msgs
	for i, m := range msgs {
		if m.Role != RoleAssistant || len(m.ToolCalls) == 0 || m.Written != "" || !mayHoldCall(m.Content) {
			continue
		}
		if rec == nil {
			rec = &recovery{offer: newOffer(Request{Tools: tools})}
		}
		r := Response{Content: m.Content, ToolCalls: m.ToolCalls}
		rec.dropEchoes(&r)
		if r.Content == m.Content {
			continue
		}
		if &out[0] == &msgs[0] {
			out = append([]Message(nil), msgs...)
		}
		out[i].Content = r.Content
	}
	return out
}

// mayHoldCall is a cheap test that content may hold a call written as text,
// so that the history of every request is not parsed again.
func mayHoldCall(content string) bool {
	if strings.TrimSpace(content) == "" {
		return false
	}
	for _, m := range callMarkers {
		if strings.Contains(content, m) {
			return true
		}
	}
	t := strings.TrimSpace(content)
	return t[0] == '{' || t[0] == '['
}

func hasWritten(msgs []Message) bool {
	for _, m := range msgs {
		if m.Written != "" {
			return true
		}
	}
	return false
}

// writeCalls writes calls the server once sent natively as text, for a
// history that must now be plain text: code as a ```python block, any other
// call in the Hermes format.
func writeCalls(content string, calls []ToolCall) string {
	var b strings.Builder
	b.WriteString(content)
	for _, c := range calls {
		if b.Len() > 0 {
			b.WriteString("\n\n")
		}
		var args struct {
			Code *string `json:"code"`
		}
		if json.Unmarshal([]byte(c.Arguments), &args) == nil && args.Code != nil {
			b.WriteString("```python\n" + strings.TrimRight(*args.Code, "\n") + "\n```")
			continue
		}
		call, _ := json.Marshal(struct {
			Name      string          `json:"name"`
			Arguments json.RawMessage `json:"arguments"`
		}{c.Name, json.RawMessage(wireArguments(c.Arguments))})
		b.WriteString(hermesOpen + "\n" + string(call) + "\n" + hermesClose)
	}
	return b.String()
}
