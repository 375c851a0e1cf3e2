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
	Content          wireText        `json:"content"`
	ReasoningContent wireText        `json:"reasoning_content"`
	Reasoning        wireText        `json:"reasoning"`
	ToolCalls        []replyToolCall `json:"tool_calls"`
	// FunctionCall is the legacy form of a single tool call, which servers
	// on the old `functions` API (llama-cpp-python's functionary handler,
	// some gateways) still send instead of tool_calls.
	FunctionCall *replyFunction `json:"function_call"`
}

// reasoningText returns the message's reasoning, still escaped, from
// whichever field the server used. Some servers fill both with the same text
// during a rename; it is counted once.
func (m *replyMessage) reasoningText() wireText {
	rc, r := m.ReasoningContent, m.Reasoning
	switch {
	case len(rc) == 0:
		return r
	case len(r) == 0 || bytes.Equal(r, rc):
		return rc
	default:
		return append(append(wireText(nil), rc...), r...)
	}
}

type replyToolCall struct {
	// Index is nil when the server omitted it (Ollama before 0.4.7).
	Index    *int          `json:"index"`
	ID       flexText      `json:"id"`
	Function replyFunction `json:"function"`
}

type replyFunction struct {
	Name      flexText `json:"name"`
	Arguments flexArgs `json:"arguments"`
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
// b8233). Both are kept as the body of a JSON string, still escaped (see
// wireText), so that the pieces of a stream are joined before they are
// decoded.
type flexArgs []byte

func (a *flexArgs) UnmarshalJSON(b []byte) error {
	switch b[0] {
	case '"':
		*a = append((*a)[:0], b[1:len(b)-1]...)
	case 'n':
		*a = nil
	default:
		var buf bytes.Buffer
		if json.Compact(&buf, b) != nil {
			*a = escapeText(string(b))
			return nil
		}
		*a = escapeText(buf.String())
	}
	return nil
}

// wireText is a text field as it came on the wire: the body of a JSON string,
// still escaped. Streamed pieces are joined before they are decoded, because
// servers cut characters between chunks: llama.cpp writes the raw bytes of a
// token that ends inside a multi-byte character, and Python servers that
// escape everything send the two halves of a UTF-16 surrogate pair as
// "\ud83d" in one chunk and "\ude00" in the next. Decoded alone, each half
// would become U+FFFD. Content sent as a list of parts, or as a number, is
// re-escaped into the same form.
type wireText []byte

func (t *wireText) UnmarshalJSON(b []byte) error {
	switch b[0] {
	case '"':
		*t = append((*t)[:0], b[1:len(b)-1]...)
	case 'n':
		*t = nil
	default:
		var f flexText
		if err := f.UnmarshalJSON(b); err != nil {
			return err
		}
		*t = escapeText(string(f))
	}
	return nil
}

// escapeText returns s as the body of a JSON string.
func escapeText(s string) []byte {
	b, _ := json.Marshal(s)
	return b[1 : len(b)-1]
}

// decodeText decodes the body of a JSON string. Most text has no escapes and
// is copied as it is, which saves a second scan. What cannot be decoded
// (half a character left at the end of a broken stream) becomes U+FFFD, as
// encoding/json makes it.
func decodeText(b []byte) string {
	if bytes.IndexByte(b, '\\') < 0 && utf8.Valid(b) {
		return string(b)
	}
	q := make([]byte, 0, len(b)+2)
	q = append(append(append(q, '"'), b...), '"')
	var s string
	if json.Unmarshal(q, &s) != nil {
		return strings.ToValidUTF8(string(b), "\uFFFD")
	}
	return s
}

// textDecoder decodes streamed text piece by piece, holding back a piece's
// tail while it may be the first part of a character the next piece
// completes, so that a Delta never carries half a character.
type textDecoder struct {
	tail []byte
}

// decode returns the text of piece that is complete so far.
func (d *textDecoder) decode(piece []byte) string {
	if len(d.tail) == 0 && bytes.IndexByte(piece, '\\') < 0 && utf8.Valid(piece) {
		return string(piece)
	}
	buf := append(d.tail, piece...)
	cut := incompleteTail(buf)
	s := decodeText(buf[:cut])
	d.tail = append([]byte(nil), buf[cut:]...)
	return s
}

// flush returns what is still held back, at the end of the reply.
func (d *textDecoder) flush() string {
	if len(d.tail) == 0 {
		return ""
	}
	s := decodeText(d.tail)
	d.tail = nil
	return s
}

// incompleteTail returns where a trailing partial character begins in the
// escaped text b: the first bytes of a multi-byte UTF-8 sequence, or the
// escape of a high surrogate whose low half has not come yet. It returns
// len(b) when b ends on a whole character.
func incompleteTail(b []byte) int {
	n := len(b)
	if n >= 6 && b[n-6] == '\\' && b[n-5] == 'u' && isHighSurrogate(b[n-4:]) && escapes(b[:n-6])%2 == 0 {
		return n - 6
	}
	for i := n - 1; i >= 0 && i >= n-utf8.UTFMax+1; i-- {
		if b[i] < utf8.RuneSelf {
			break
		}
		if utf8.RuneStart(b[i]) {
			if !utf8.FullRune(b[i:]) {
				return i
			}
			break
		}
	}
	return n
}

// isHighSurrogate reports whether the four hex digits h name U+D800 to U+DBFF.
func isHighSurrogate(h []byte) bool {
	return (h[0] == 'd' || h[0] == 'D') && strings.IndexByte("89abAB", h[1]) >= 0 &&
		isHex(h[2]) && isHex(h[3])
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

// escapes counts the backslashes that end b: an odd count means the byte
// after b is escaped.
func escapes(b []byte) int {
	n := 0
	for i := len(b) - 1; i >= 0 && b[i] == '\\'; i-- {
		n++
	}
	return n
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
