package sandbox

import (
	"fmt"
	"strings"
	"sync"
	"time"
	"unicode/utf8"
)

// Capture is an io.Writer that keeps a bounded view of everything written to
// it: the first half of its limit as a head and the last half as a tail. A
// command may print gigabytes, but what reaches the model is its beginning
// (usually the headers and the first rows) and its end (usually the error or
// the result), so both are kept and the middle is counted and dropped.
//
// Memory never grows past the limit, however much is written: the head
// grows with what is written up to its half, and the tail is allocated
// whole once the head is full, so that a run that prints a line (most of
// them) costs a few bytes, not the limit zeroed. Once both are full, writes
// allocate nothing. Capture is safe for concurrent use; the usual pattern is
// one goroutine copying a command's output into it and String called after
// the command is done.
type Capture struct {
	mu       sync.Mutex
	head     []byte // the first bytes written, up to headSize
	headSize int
	tailSize int
	tail     []byte // ring buffer holding the last bytes written after head filled; nil until then
	pos      int    // where the next tail byte goes
	full     bool   // the ring has wrapped at least once
	total    int64
}

// NewCapture returns a Capture keeping at most limit bytes. A limit of zero or
// less keeps nothing and only counts.
func NewCapture(limit int) *Capture {
	if limit < 0 {
		limit = 0
	}
	return &Capture{headSize: limit / 2, tailSize: limit - limit/2}
}

// Write keeps what fits in the head and the tail and counts the rest. It never
// fails, so a command is never blocked or killed for printing too much.
func (c *Capture) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := len(p)
	c.total += int64(n)

	if room := c.headSize - len(c.head); room > 0 {
		k := min(room, len(p))
		if len(c.head)+k > cap(c.head) {
			// Doubling, as append would, but never past headSize.
			grown := make([]byte, len(c.head), min(max(2*cap(c.head), len(c.head)+k, 256), c.headSize))
			copy(grown, c.head)
			c.head = grown
		}
		c.head = append(c.head, p[:k]...)
		p = p[k:]
	}
	if len(p) == 0 || c.tailSize == 0 {
		return n, nil
	}
	if c.tail == nil {
		c.tail = make([]byte, c.tailSize)
	}
	if len(p) >= len(c.tail) {
		// Only the last len(tail) bytes can survive this write.
		copy(c.tail, p[len(p)-len(c.tail):])
		c.pos, c.full = 0, true
		return n, nil
	}
	k := copy(c.tail[c.pos:], p)
	if k < len(p) {
		copy(c.tail, p[k:])
		c.full = true
	}
	c.pos = (c.pos + len(p)) % len(c.tail)
	if c.pos == 0 {
		c.full = true
	}
	return n, nil
}

// Total is the number of bytes written, including those that were dropped.
func (c *Capture) Total() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.total
}

// String returns the head and the tail. When bytes were dropped between them,
// a marker line says how many. The result is always valid UTF-8: characters
// cut in half at the edges of the gap are dropped (and counted as omitted), and
// invalid bytes are replaced with U+FFFD, so the text can go into the JSON sent
// to the model.
func (c *Capture) String() string {
	c.mu.Lock()
	defer c.mu.Unlock()

	var tail []byte
	if c.full {
		tail = append(append(make([]byte, 0, len(c.tail)), c.tail[c.pos:]...), c.tail[:c.pos]...)
	} else {
		tail = c.tail[:c.pos]
	}
	head := c.head
	omitted := c.total - int64(len(head)) - int64(len(tail))
	if omitted == 0 {
		return strings.ToValidUTF8(string(head)+string(tail), "\uFFFD")
	}

	cutHead := trimPartialRuneEnd(head)
	cutTail := trimPartialRuneStart(tail)
	omitted += int64(len(head)-len(cutHead)) + int64(len(tail)-len(cutTail))

	var b strings.Builder
	b.Grow(len(cutHead) + len(cutTail) + 48)
	b.WriteString(strings.ToValidUTF8(string(cutHead), "\uFFFD"))
	fmt.Fprintf(&b, "\n"+omittedLine+"\n", omitted)
	b.WriteString(strings.ToValidUTF8(string(cutTail), "\uFFFD"))
	return b.String()
}

// trimPartialRuneEnd drops an incomplete UTF-8 sequence at the end of b, the
// first bytes of a character whose remaining bytes were dropped.
func trimPartialRuneEnd(b []byte) []byte {
	for i := 1; i <= utf8.UTFMax-1 && i <= len(b); i++ {
		if utf8.RuneStart(b[len(b)-i]) {
			if !utf8.FullRune(b[len(b)-i:]) {
				return b[:len(b)-i]
			}
			return b
		}
	}
	return b
}

// trimPartialRuneStart drops the continuation bytes at the start of b, the
// end of a character whose first bytes were dropped. At most three bytes go;
// anything stranger is left to strings.ToValidUTF8.
func trimPartialRuneStart(b []byte) []byte {
	i := 0
	for i < utf8.UTFMax-1 && i < len(b) && !utf8.RuneStart(b[i]) {
		i++
	}
	return b[i:]
}

// omittedLine is the line String puts where it cut the middle of long
// output.
const omittedLine = "[... %d bytes omitted ...]"

// Omitted reports whether line is the one String puts where it cut long
// output, and how many bytes it says were cut there, so that front-ends can
// show the cut as terp's doing, and count it when they fold the output.
func Omitted(line string) (int64, bool) {
	var n int64
	if _, err := fmt.Sscanf(line, omittedLine, &n); err != nil || fmt.Sprintf(omittedLine, n) != line {
		return 0, false
	}
	return n, true
}

// Captures are the two bounded buffers a backend's Exec reads a command's
// output into, as o's bounds say (zero: DefaultMaxOutput).
func (o ExecOptions) Captures() (stdout, stderr *Capture) {
	bound := func(n int) int {
		if n <= 0 {
			return DefaultMaxOutput
		}
		return n
	}
	return NewCapture(bound(o.MaxStdout)), NewCapture(bound(o.MaxStderr))
}

// Captured is the ExecResult of a command that exited with code after
// starting at start, with the output stdout and stderr kept; the backend
// adds TimedOut and Stopped.
func Captured(code int, stdout, stderr *Capture, start time.Time) ExecResult {
	return ExecResult{
		ExitCode:    code,
		Stdout:      stdout.String(),
		Stderr:      stderr.String(),
		StdoutBytes: stdout.Total(),
		StderrBytes: stderr.Total(),
		Duration:    time.Since(start),
	}
}
