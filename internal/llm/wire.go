package llm

import (
	"bytes"
	"encoding/json"
	"strings"
	"unicode/utf8"
)

// reply is both a whole chat completion and one chunk of a streamed one:
// they differ only in whether a choice carries "message" or "delta", so one
// struct lets both go through the same assembler.
type reply struct {
	Choices []replyChoice   `json:"choices"`
	Usage   *Usage          `json:"usage"`
	Error   json.RawMessage `json:"error"`
}

type replyChoice struct {
	Delta        *replyMessage `json:"delta"`
	Message      *replyMessage `json:"message"`
	FinishReason string        `json:"finish_reason"`
}

type replyMessage struct {
	Content          flexText        `json:"content"`
	ReasoningContent flexText        `json:"reasoning_content"`
	Reasoning        flexText        `json:"reasoning"`
	ToolCalls        []replyToolCall `json:"tool_calls"`
}

// reasoningText returns the message's reasoning from whichever field the
// server used. Some servers fill both with the same text during a rename;
// it is counted once.
func (m *replyMessage) reasoningText() string {
	rc, r := string(m.ReasoningContent), string(m.Reasoning)
	switch {
	case rc == "":
		return r
	case r == "" || r == rc:
		return rc
	default:
		return rc + r
	}
}

type replyToolCall struct {
	// Index is nil when the server omitted it (Ollama before 0.4.7).
	Index    *int     `json:"index"`
	ID       flexText `json:"id"`
	Function struct {
		Name      flexText `json:"name"`
		Arguments flexArgs `json:"arguments"`
	} `json:"function"`
}

// flexText is a string field that servers also send as null, as a number
// (LM Studio's bare numeric ids) or as a list of content parts. Failing the
// whole reply over such a field would lose the answer, so it takes them all.
type flexText string

func (t *flexText) UnmarshalJSON(b []byte) error {
	switch b[0] {
	case '"':
		s, err := unquote(b)
		if err != nil {
			return err
		}
		*t = flexText(s)
	case 'n':
		*t = ""
	case '[':
		var parts []struct {
			Text string `json:"text"`
		}
		if err := json.Unmarshal(b, &parts); err != nil {
			return err
		}
		var sb strings.Builder
		for _, p := range parts {
			sb.WriteString(p.Text)
		}
		*t = flexText(sb.String())
	default:
		*t = flexText(b)
	}
	return nil
}

// flexArgs holds tool-call arguments, which are a JSON text inside a string
// in the OpenAI format but a bare JSON object from some servers (llama.cpp
// b8233). Both become the same JSON text.
type flexArgs string

func (a *flexArgs) UnmarshalJSON(b []byte) error {
	switch b[0] {
	case '"':
		s, err := unquote(b)
		if err != nil {
			return err
		}
		*a = flexArgs(s)
	case 'n':
		*a = ""
	default:
		var buf bytes.Buffer
		if json.Compact(&buf, b) != nil {
			*a = flexArgs(b)
			return nil
		}
		*a = flexArgs(buf.String())
	}
	return nil
}

// unquote decodes a JSON string the decoder has already validated. Most
// streamed tokens have no escapes and are copied as they are, which saves a
// second scan of every chunk.
func unquote(b []byte) (string, error) {
	inner := b[1 : len(b)-1]
	if bytes.IndexByte(inner, '\\') < 0 && utf8.Valid(inner) {
		return string(inner), nil
	}
	var s string
	err := json.Unmarshal(b, &s)
	return s, err
}
