// Package strict checks a chat completion request the way the strictest
// OpenAI-compatible servers do, so that a test fails where one of them would
// answer 400. Lenient servers render whatever history they get, and a
// history that only they accept breaks the day the user points terp at
// another one:
//
//   - OpenAI's API rejects a tool call without an id or with a type other
//     than "function", a tool message that answers no call of the assistant
//     message before it, and an assistant message whose calls are not each
//     answered before the conversation goes on.
//   - vLLM's chat templates json.loads each call's arguments and iterate
//     them as a mapping, and vLLM rejects a tool message without content.
//   - Mistral's templates and mistral_common match each tool message to one
//     call by id, and reject a call answered twice.
//   - Ollama decodes the arguments into an object and rejects anything else,
//     an empty string included.
//
// A call must also name one of the tools the request offers: a template
// renders the call under that name, and a name it was never told about is a
// history no model was trained on.
package strict

import (
	"encoding/json"
	"fmt"
	"strings"
)

type request struct {
	Messages []message `json:"messages"`
	Tools    []struct {
		Type     string `json:"type"`
		Function struct {
			Name string `json:"name"`
		} `json:"function"`
	} `json:"tools"`
}

type message struct {
	Role       string          `json:"role"`
	Content    json.RawMessage `json:"content"`
	ToolCallID string          `json:"tool_call_id"`
	ToolCalls  []struct {
		ID       string `json:"id"`
		Type     string `json:"type"`
		Function struct {
			Name      string          `json:"name"`
			Arguments json.RawMessage `json:"arguments"`
		} `json:"function"`
	} `json:"tool_calls"`
}

// Check returns what a strict server would reject in body, a chat completion
// request as it goes on the wire, or nil when it would accept it.
func Check(body []byte) error {
	var req request
	if err := json.Unmarshal(body, &req); err != nil {
		return fmt.Errorf("the body is not a chat request: %w", err)
	}
	offered := make(map[string]bool, len(req.Tools))
	for i, t := range req.Tools {
		if t.Type != "function" || t.Function.Name == "" {
			return fmt.Errorf("tools[%d]: want type \"function\" and a name, got %q %q", i, t.Type, t.Function.Name)
		}
		offered[t.Function.Name] = true
	}
	ids := map[string]bool{}
	// pending are the calls of the last assistant message not answered
	// yet, and asked the index of that message.
	var pending []string
	asked := -1
	unanswered := func(at int) error {
		return fmt.Errorf("messages[%d]: the calls %s of messages[%d] have no tool message before it",
			at, strings.Join(pending, ", "), asked)
	}
	for i, m := range req.Messages {
		switch m.Role {
		case "tool":
			k := index(pending, m.ToolCallID)
			if k < 0 {
				if ids[m.ToolCallID] {
					return fmt.Errorf("messages[%d]: tool_call_id %q answers a call already answered, or not of the assistant message before it", i, m.ToolCallID)
				}
				return fmt.Errorf("messages[%d]: tool_call_id %q answers no call", i, m.ToolCallID)
			}
			pending = append(pending[:k], pending[k+1:]...)
			if !isText(m.Content) {
				return fmt.Errorf("messages[%d]: a tool message needs content, got %s", i, orNothing(m.Content))
			}
			continue
		case "assistant":
		default:
			if len(pending) > 0 {
				return unanswered(i)
			}
			continue
		}
		if len(pending) > 0 {
			return unanswered(i)
		}
		for j, c := range m.ToolCalls {
			at := fmt.Sprintf("messages[%d].tool_calls[%d]", i, j)
			switch {
			case c.ID == "":
				return fmt.Errorf("%s: no id", at)
			case ids[c.ID]:
				return fmt.Errorf("%s: id %q is used twice", at, c.ID)
			case c.Type != "function":
				return fmt.Errorf("%s: type %q, want \"function\"", at, c.Type)
			case !offered[c.Function.Name]:
				return fmt.Errorf("%s: %q is not one of the tools offered", at, c.Function.Name)
			}
			if err := objectText(c.Function.Arguments); err != nil {
				return fmt.Errorf("%s: arguments %s: %v", at, orNothing(c.Function.Arguments), err)
			}
			ids[c.ID] = true
			pending = append(pending, c.ID)
		}
		asked = i
	}
	if len(pending) > 0 {
		return unanswered(len(req.Messages))
	}
	return nil
}

// objectText checks that raw is a JSON string whose text is a JSON object,
// as the OpenAI format has arguments.
func objectText(raw json.RawMessage) error {
	var s string
	if len(raw) == 0 || raw[0] != '"' || json.Unmarshal(raw, &s) != nil {
		return fmt.Errorf("are not a string")
	}
	var obj map[string]any
	if err := json.Unmarshal([]byte(s), &obj); err != nil {
		return fmt.Errorf("are not a JSON object: %v", err)
	}
	return nil
}

// isText reports whether content is a string or a list of parts, the two
// forms a message's content takes.
func isText(content json.RawMessage) bool {
	return len(content) > 0 && (content[0] == '"' || content[0] == '[')
}

func index(ids []string, id string) int {
	for i, p := range ids {
		if p == id {
			return i
		}
	}
	return -1
}

func orNothing(raw json.RawMessage) string {
	if len(raw) == 0 {
		return "(none)"
	}
	return string(raw)
}
