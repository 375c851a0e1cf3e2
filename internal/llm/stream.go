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
type brokenError struct {
	err error
	// retries is how many times the request was sent again before the
	// reply that broke, for the message.
	retries int
}

func (e *brokenError) Error() string {
	if e.err == nil {
		return "the stream ended before a finish_reason"
	}
	return "the reply broke off: " + e.err.Error()
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
		return &serverError{status: statusCode(code), message: msg, inBody: true, body: string(body)}
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
// parse, and which cannot join a chunk spread over several data lines.
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
			done, lerr := s.lines(line)
			if lerr != nil {
				return lerr
			}
			if done {
				return nil
			}
		}
		if err != nil {
			return s.end(err)
		}
	}
}

// sseState is what a stream has shown so far.
type sseState struct {
	a *assembler
	// event is the name from an "event:" line, which applies to the data
	// lines up to the next blank line.
	event string
	// data holds the data lines of an event that is not complete JSON yet,
	// joined with newlines as the specification says: a chunk
	// pretty-printed over several lines.
	data   []byte
	chunks int
	// junk is the first line that is no part of SSE, kept to explain a reply
	// that turns out to be no stream at all (an HTML page, say).
	junk string
	rep  reply
}

// lines handles what ReadSlice returned up to a line feed, which holds
// more than one line when a server ends its lines with a lone CR, as the
// specification allows. A stream that only ever uses lone CRs is read
// correctly, but its deltas arrive together at the end.
func (s *sseState) lines(b []byte) (done bool, err error) {
	for {
		i := bytes.IndexByte(b, '\r')
		if i < 0 || i == len(b)-1 || i == len(b)-2 && b[i+1] == '\n' {
			return s.line(b)
		}
		if done, err := s.line(b[:i]); done || err != nil {
			return done, err
		}
		b = b[i+1:]
	}
}

// line handles one line and reports whether the stream is done.
func (s *sseState) line(raw []byte) (done bool, err error) {
	line := bytes.TrimSpace(raw)
	switch {
	case len(line) == 0:
		// The blank line that ends an event.
		err = s.flush()
		s.event = ""
		return false, err
	case line[0] == ':':
		// A comment: servers send these as keep-alives during long prompts.
	case field(line, "data") != nil:
		return s.dataLine(field(line, "data"))
	case field(line, "error") != nil:
		// llama.cpp before September 2025: "error: {...}" instead of data.
		if err := s.flush(); err != nil {
			return false, err
		}
		return false, streamedError(field(line, "error"))
	case field(line, "event") != nil:
		// An event name starts a new event, so data held until now was a
		// whole one whose blank line the server left out.
		if err := s.flushWhole(); err != nil {
			return false, err
		}
		s.event = string(field(line, "event"))
	case field(line, "id") != nil, field(line, "retry") != nil:
	case line[0] == '{':
		// Chunks as JSON lines without the "data:" prefix.
		return s.dataLine(line)
	default:
		if s.junk == "" {
			s.junk = string(line)
		}
	}
	return false, nil
}

// dataLine takes the value of one data line. The specification dispatches
// an event only at a blank line, but many servers leave blank lines out
// between chunks, and waiting for one would hold text back: a line that is
// complete JSON by itself is a chunk at once (no JSON value can go on after
// a complete one), and data held from earlier lines is dispatched as soon
// as it is complete JSON and a new line arrives.
func (s *sseState) dataLine(data []byte) (done bool, err error) {
	if len(data) == 0 {
		return false, nil
	}
	if len(s.data) > 0 {
		if !json.Valid(s.data) {
			s.data = append(append(s.data, '\n'), data...)
			return false, nil
		}
		if err := s.flush(); err != nil {
			return false, err
		}
	}
	if string(data) == "[DONE]" {
		return true, nil
	}
	if s.event == "error" {
		if !json.Valid(data) {
			s.data = append(s.data, data...)
			return false, nil
		}
		return false, streamedError(data)
	}
	whole, err := s.chunk(data)
	if !whole {
		s.data = append(s.data, data...)
		return false, nil
	}
	return false, err
}

// flushWhole dispatches the held data if it is complete JSON, and keeps it
// otherwise.
func (s *sseState) flushWhole() error {
	if len(s.data) == 0 || !json.Valid(s.data) {
		return nil
	}
	return s.flush()
}

// flush dispatches the held data as one event.
func (s *sseState) flush() error {
	if len(s.data) == 0 {
		return nil
	}
	data := s.data
	s.data = s.data[:0]
	if s.event == "error" {
		return streamedError(data)
	}
	whole, err := s.chunk(data)
	if !whole {
		return &garbledError{data: string(data), err: err}
	}
	return err
}

// chunk decodes one chunk into the assembler. It reports whole false, and
// no error, when data is JSON cut short, which more data lines may finish.
func (s *sseState) chunk(data []byte) (whole bool, err error) {
	s.rep = reply{}
	if err := json.Unmarshal(data, &s.rep); err != nil {
		var syntax *json.SyntaxError
		if errors.As(err, &syntax) {
			return false, err
		}
		return true, &garbledError{data: string(data), err: err}
	}
	if present(s.rep.Error) {
		msg, code := errorValue(s.rep.Error)
		return true, &serverError{status: statusCode(code), message: msg, streamed: true}
	}
	s.chunks++
	s.a.add(&s.rep, false)
	return true, nil
}

// end judges a stream that ended without [DONE]: fine if the model finished,
// even when the connection then broke (err is not io.EOF) or the server cut
// an event short, and broken otherwise.
func (s *sseState) end(err error) error {
	if ferr := s.flush(); ferr != nil {
		var garbled *garbledError
		if !errors.As(ferr, &garbled) || s.a.finish == "" && err == io.EOF && s.chunks == 0 {
			return ferr
		}
		// An event cut short by the end of the body.
	}
	switch {
	case s.a.finish != "":
		return nil
	case err != io.EOF:
		return &brokenError{err: err}
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
