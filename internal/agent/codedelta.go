package agent

import (
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// codeStream takes the pieces of one run_python call's JSON arguments as the
// model writes them and returns the text of its "code" string as it comes,
// for CodeDelta. It looks at the top-level object only, so a "code" inside
// another value is no key; it decodes escapes, holding back one cut between
// two pieces, and stops at the string's closing quote. Arguments of another
// shape (a bare string, a double-encoded object) give nothing: the ToolCall
// carries the code whole in any case.
type codeStream struct {
	state codeState
	// depth is the nesting of the arguments so far; object is set when the
	// top level is an object, and wantKey when a key comes next in it.
	depth           int
	object, wantKey bool
	// inString and escaped follow a string being skipped.
	inString, escaped bool
	key               []byte
	// esc is an escape of the code cut at the end of a piece.
	esc []byte
}

type codeState int

const (
	codeSeek       codeState = iota // looking for the "code" key
	codeKey                         // in a top-level key
	codeAfterKey                    // after the "code" key, before its colon
	codeAfterColon                  // after the colon, before the value
	codeValue                       // in the code string
	codeDone                        // past it, or there is none
)

// feed takes the next piece and returns the code it completes.
func (s *codeStream) feed(piece string) string {
	var out strings.Builder
	for i := 0; i < len(piece) && s.state != codeDone; i++ {
		s.byte(piece[i], &out)
	}
	return out.String()
}

func (s *codeStream) byte(c byte, out *strings.Builder) {
	switch s.state {
	case codeSeek:
		s.seek(c)
	case codeKey:
		switch {
		case s.escaped:
			s.escaped = false
		case c == '\\':
			s.escaped = true
		case c == '"':
			s.state = codeSeek
			if string(s.key) == "code" {
				s.state = codeAfterKey
			}
			return
		}
		s.key = append(s.key, c)
	case codeAfterKey:
		switch {
		case isSpace(c):
		case c == ':':
			s.state = codeAfterColon
		default:
			s.state = codeSeek
			s.seek(c)
		}
	case codeAfterColon:
		switch {
		case isSpace(c):
		case c == '"':
			s.state = codeValue
		default:
			s.state = codeDone // the code is not a string
		}
	case codeValue:
		if len(s.esc) > 0 || c == '\\' {
			s.esc = append(s.esc, c)
			s.unescape(out)
			return
		}
		if c == '"' {
			s.state = codeDone
			return
		}
		out.WriteByte(c)
	}
}

// seek follows the arguments outside the code, to find its key.
func (s *codeStream) seek(c byte) {
	if s.inString {
		switch {
		case s.escaped:
			s.escaped = false
		case c == '\\':
			s.escaped = true
		case c == '"':
			s.inString = false
		}
		return
	}
	switch c {
	case '{', '[':
		if s.depth == 0 {
			s.object = c == '{'
			s.wantKey = s.object
		}
		s.depth++
	case '}', ']':
		s.depth--
	case ',':
		s.wantKey = s.depth == 1 && s.object
	case '"':
		if s.depth == 1 && s.wantKey {
			s.state, s.key, s.wantKey = codeKey, s.key[:0], false
			return
		}
		s.inString = true
	}
}

// unescape writes the escape in s.esc once it is whole. A high surrogate
// waits for the low one that should follow it; what is not a valid escape
// becomes U+FFFD, as encoding/json makes it.
func (s *codeStream) unescape(out *strings.Builder) {
	e := s.esc
	if len(e) < 2 {
		return
	}
	if e[1] != 'u' {
		if r, ok := simpleEscapes[e[1]]; ok {
			out.WriteByte(r)
		} else {
			out.WriteRune(utf8.RuneError)
		}
		s.esc = s.esc[:0]
		return
	}
	if len(e) < 6 {
		return
	}
	r, ok := hex4(e[2:6])
	if !ok {
		out.WriteRune(utf8.RuneError)
		s.esc = s.esc[:0]
		return
	}
	if !utf16.IsSurrogate(r) || r >= 0xDC00 {
		out.WriteRune(r) // a lone low surrogate comes out as U+FFFD
		s.esc = s.esc[:0]
		return
	}
	// A high surrogate: a low one must follow, else it stands alone.
	switch {
	case len(e) == 6:
		return
	case e[6] != '\\' || (len(e) > 7 && e[7] != 'u'):
	case len(e) < 12:
		return
	default:
		if low, ok := hex4(e[8:12]); ok {
			if pair := utf16.DecodeRune(r, low); pair != utf8.RuneError {
				out.WriteRune(pair)
				s.esc = s.esc[:0]
				return
			}
		}
	}
	out.WriteRune(utf8.RuneError)
	rest := append([]byte(nil), e[6:]...)
	s.esc = s.esc[:0]
	for _, c := range rest {
		if s.state == codeDone {
			break
		}
		s.byte(c, out)
	}
}

var simpleEscapes = map[byte]byte{
	'"': '"', '\\': '\\', '/': '/', 'b': '\b', 'f': '\f', 'n': '\n', 'r': '\r', 't': '\t',
}

func hex4(h []byte) (rune, bool) {
	var r rune
	for _, c := range h {
		var v byte
		switch {
		case '0' <= c && c <= '9':
			v = c - '0'
		case 'a' <= c && c <= 'f':
			v = c - 'a' + 10
		case 'A' <= c && c <= 'F':
			v = c - 'A' + 10
		default:
			return 0, false
		}
		r = r<<4 | rune(v)
	}
	return r, true
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\r' || c == '\n' }
