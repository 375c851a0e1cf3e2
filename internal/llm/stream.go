package llm

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// brokenError means a reply stopped before the model finished: the
// connection dropped, or the stream ended with neither [DONE] nor a
// finish_reason, which go-openai would have taken for a normal end.
type brokenError struct{ err error }

func (e *brokenError) Error() string {
	if e.err == nil {
		return "the stream ended before a finish_reason"
	}
	return "the stream broke off: " + e.err.Error()
}

func (e *brokenError) Unwrap() error { return e.err }

// garbledError means a reply that is not the JSON or SSE the API defines.
type garbledError struct {
	data string
	err  error
}

func (e *garbledError) Error() string {
	if e.err == nil {
		return fmt.Sprintf("unexpected reply %q", clip(e.data))
	}
	return fmt.Sprintf("cannot decode %q: %v", clip(e.data), e.err)
}

func (e *garbledError) Unwrap() error { return e.err }

// isWhole reports whether the reply is one JSON document rather than an SSE
// stream. The body decides, not the request: some servers ignore "stream".
func isWhole(r *bufio.Reader) bool {
	for {
		b, err := r.Peek(1)
		if err != nil {
			return false
		}
		switch b[0] {
		case ' ', '\t', '\r', '\n':
			_, _ = r.ReadByte()
		default:
			return b[0] == '{'
		}
	}
}

// readWhole decodes a whole chat completion into a.
func readWhole(r io.Reader, a *assembler) error {
	body, err := io.ReadAll(r)
	if err != nil {
		return &brokenError{err: err}
	}
	var rep reply
	if err := json.Unmarshal(body, &rep); err != nil {
		return &garbledError{data: string(body), err: err}
	}
	if present(rep.Error) {
		msg, code := errorValue(rep.Error)
		return &serverError{status: statusCode(code), message: msg}
	}
	if len(rep.Choices) == 0 {
		return &garbledError{data: string(body), err: errors.New("no choices")}
	}
	a.add(&rep, true)
	return nil
}

// readStream decodes a server-sent-events stream of chunks into a, line by
// line. It reads the lines itself instead of through go-openai's reader,
// which drops llama.cpp's bare "error:" lines and error payloads it cannot
// parse.
func readStream(r *bufio.Reader, a *assembler) error {
	s := sseState{a: a}
	var long []byte
	for {
		line, err := r.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			// A line longer than the buffer: whole arguments in one chunk.
			long = append(long, line...)
			continue
		}
		if long != nil {
			line = append(long, line...)
			long = nil
		}
		if len(line) > 0 {
			done, lerr := s.line(line)
			if lerr != nil {
				return lerr
			}
			if done {
				return nil
			}
		}
		if err == io.EOF {
			return s.end()
		}
		if err != nil {
			return &brokenError{err: err}
		}
	}
}

// sseState is what a stream has shown so far.
type sseState struct {
	a *assembler
	// event is the name from an "event:" line, which applies to the data
	// lines up to the next blank line.
	event  string
	chunks int
	// junk is the first line that is no part of SSE, kept to explain a reply
	// that turns out to be no stream at all (an HTML page, say).
	junk string
	rep  reply
}

// line handles one line and reports whether the stream is done.
func (s *sseState) line(raw []byte) (done bool, err error) {
	line := bytes.TrimSpace(raw)
	switch {
	case len(line) == 0:
		s.event = ""
	case line[0] == ':':
		// A comment: servers send these as keep-alives during long prompts.
	case field(line, "data") != nil:
		data := field(line, "data")
		if len(data) == 0 {
			return false, nil
		}
		if string(data) == "[DONE]" {
			return true, nil
		}
		if s.event == "error" {
			return false, streamedError(data)
		}
		return false, s.chunk(data)
	case field(line, "error") != nil:
		// llama.cpp before September 2025: "error: {...}" instead of data.
		return false, streamedError(field(line, "error"))
	case field(line, "event") != nil:
		s.event = string(field(line, "event"))
	case field(line, "id") != nil, field(line, "retry") != nil:
	case line[0] == '{':
		// Chunks as JSON lines without the "data:" prefix.
		return false, s.chunk(line)
	default:
		if s.junk == "" {
			s.junk = string(line)
		}
	}
	return false, nil
}

func (s *sseState) chunk(data []byte) error {
	s.rep = reply{}
	if err := json.Unmarshal(data, &s.rep); err != nil {
		return &garbledError{data: string(data), err: err}
	}
	if present(s.rep.Error) {
		msg, code := errorValue(s.rep.Error)
		return &serverError{status: statusCode(code), message: msg, streamed: true}
	}
	s.chunks++
	s.a.add(&s.rep, false)
	return nil
}

// end judges a stream that ended without [DONE]: fine if the model finished,
// broken otherwise.
func (s *sseState) end() error {
	switch {
	case s.a.finish != "":
		return nil
	case s.chunks == 0 && s.junk != "":
		return &garbledError{data: s.junk}
	default:
		return &brokenError{}
	}
}

// field returns the value of an SSE line "name: value", or nil when the line
// is not that field.
func field(line []byte, name string) []byte {
	if len(line) <= len(name) || line[len(name)] != ':' || string(line[:len(name)]) != name {
		return nil
	}
	return bytes.TrimLeft(line[len(name)+1:], " ")
}

// streamedError reads an error sent inside a stream, in any of its shapes.
func streamedError(data []byte) *serverError {
	msg, code := errorMessage(data)
	return &serverError{status: statusCode(code), message: msg, streamed: true}
}

// statusCode keeps a code only when it is an HTTP status: servers also put
// strings and private numbers in "code".
func statusCode(code int) int {
	if code >= 400 && code <= 599 {
		return code
	}
	return 0
}
