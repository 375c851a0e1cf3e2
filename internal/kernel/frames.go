package kernel

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"
	"time"
)

// errProtocol is wrapped by every error for a frame stream that breaks the
// protocol (see protocol.go), as opposed to one that simply ends.
var errProtocol = errors.New("protocol error")

// frameHeader is one parsed header line.
type frameHeader struct {
	nonce string
	kind  string
	size  int
}

// frameStall is how long the stream may stop inside a frame. The worker
// writes each frame whole, at once, so a frame that stops halfway was
// begun by something else (the code, writing into the channel), and the
// worker's next frames would vanish into it: its payload would swallow the
// end of the run, and terp would wait for a done that never comes.
const frameStall = 2 * time.Second

// frameReader reads frames from the worker's stdout. It trusts nothing: a
// header is read byte by byte up to maxHeader, and a payload is never
// buffered whole unless it is a control message within maxControl.
type frameReader struct {
	br    *bufio.Reader
	stall *stallWatch // nil unless watchStalls was called
}

func newFrameReader(r io.Reader) *frameReader {
	return &frameReader{br: bufio.NewReaderSize(r, maxChunk+maxHeader)}
}

// watchStalls makes the reader call broken, once and from another
// goroutine, if the stream stops inside a frame for limit. broken should
// end the stream (kill the worker), which the reader is blocked on.
func (fr *frameReader) watchStalls(limit time.Duration, broken func(error)) {
	fr.stall = &stallWatch{limit: limit, broken: broken}
}

// stallWatch is frameReader's timer for a frame that stops halfway. It is
// rearmed whenever a part of a frame arrives, and stopped between frames.
type stallWatch struct {
	limit  time.Duration
	broken func(error)

	mu       sync.Mutex
	timer    *time.Timer
	awaiting string    // the part of a frame still to come; "" between frames
	deadline time.Time // by when the next part must arrive
	complete uint64    // frames completed so far
	fired    bool
	// held is set while the reader hands a part on and reads nothing: a
	// consumer of every piece of output may take its time (WithAllOutput),
	// which is no stall of the stream's.
	held bool
}

// await notes that a frame has begun and part of it is still to come.
func (sw *stallWatch) await(part string) {
	if sw == nil {
		return
	}
	sw.mu.Lock()
	defer sw.mu.Unlock()
	sw.awaiting = part
	sw.held = false
	sw.deadline = time.Now().Add(sw.limit)
	if sw.timer == nil {
		sw.timer = time.AfterFunc(sw.limit, sw.check)
	} else {
		sw.timer.Reset(sw.limit)
	}
}

// idle notes that the frame is complete.
func (sw *stallWatch) idle() {
	if sw == nil {
		return
	}
	sw.mu.Lock()
	defer sw.mu.Unlock()
	sw.awaiting = ""
	sw.held = false
	sw.complete++
	if sw.timer != nil {
		sw.timer.Stop()
	}
}

// hold notes that the reader hands on what it read and reads nothing until
// the next await or idle, however long that takes.
func (sw *stallWatch) hold() {
	if sw == nil {
		return
	}
	sw.mu.Lock()
	sw.held = true
	sw.mu.Unlock()
}

// check runs when the timer fires. A frame that made progress since the
// timer was set has moved the deadline, and the timer was reset with it.
func (sw *stallWatch) check() {
	sw.mu.Lock()
	part := sw.awaiting
	stalled := part != "" && !sw.held && !sw.fired && !time.Now().Before(sw.deadline)
	if stalled {
		sw.fired = true
	}
	sw.mu.Unlock()
	if stalled {
		sw.broken(fmt.Errorf("%w: the stream stopped inside %s for %s", errProtocol, part, sw.limit))
	}
}

// progress says whether a frame is in progress, and how many frames have
// been completed: a caller about to kill the worker watches them to tell a
// stream that flows from one the code broke, which check will soon judge.
func (sw *stallWatch) progress() (busy bool, complete uint64) {
	if sw == nil {
		return false, 0
	}
	sw.mu.Lock()
	defer sw.mu.Unlock()
	return sw.awaiting != "", sw.complete
}

// header reads the next header line. A stream that ends before its first
// byte returns io.EOF; anything else that is not a valid header is a
// protocol error.
func (fr *frameReader) header() (frameHeader, error) {
	// A header that has arrived whole is taken at once; the worker writes
	// each frame in one call, so it nearly always has. The loop below
	// reads one that is still arriving, or one too long to be a header.
	if buffered, _ := fr.br.Peek(min(fr.br.Buffered(), maxHeader+1)); len(buffered) > 0 {
		if i := bytes.IndexByte(buffered, '\n'); i >= 0 {
			line := string(buffered[:i])
			_, _ = fr.br.Discard(i + 1)
			fr.stall.await("a frame header")
			h, err := parseHeader(line)
			if err == nil {
				fr.stall.await("a frame's payload")
			}
			return h, err
		}
	}
	var line []byte
	for {
		c, err := fr.br.ReadByte()
		if err == io.EOF && len(line) == 0 {
			return frameHeader{}, io.EOF
		}
		if err != nil {
			return frameHeader{}, fmt.Errorf("%w: stream ended inside a frame header", errProtocol)
		}
		if len(line) == 0 {
			fr.stall.await("a frame header")
		}
		if c == '\n' {
			break
		}
		if len(line) == maxHeader {
			return frameHeader{}, fmt.Errorf("%w: frame header longer than %d bytes, starting %q", errProtocol, maxHeader, line[:32])
		}
		line = append(line, c)
	}
	h, err := parseHeader(string(line))
	if err == nil {
		fr.stall.await("a frame's payload")
	}
	return h, err
}

// parseHeader checks a header line, without its newline, against
// "TERP <nonce> <kind> <n>" and the kind's size cap.
func parseHeader(line string) (frameHeader, error) {
	bad := func(why string) (frameHeader, error) {
		return frameHeader{}, fmt.Errorf("%w: bad frame header %.64q: %s", errProtocol, line, why)
	}
	f := strings.Split(line, " ")
	if len(f) != 4 || f[0] != "TERP" {
		return bad(`want "TERP <nonce> <kind> <n>"`)
	}
	h := frameHeader{nonce: f[1], kind: f[2]}
	if !isHex(h.nonce) || len(h.nonce) > 64 {
		return bad("the nonce is not 1 to 64 hex digits")
	}
	var limit int
	switch h.kind {
	case kindOut, kindErr:
		limit = maxChunk
	case kindReady, kindDone, kindWarm:
		limit = maxControl
	default:
		return bad("unknown kind")
	}
	n := f[3]
	if n == "" || len(n) > 8 || (len(n) > 1 && n[0] == '0') || strings.Trim(n, "0123456789") != "" {
		return bad("the size is not a decimal number")
	}
	h.size, _ = strconv.Atoi(n)
	if h.size > limit {
		return bad(fmt.Sprintf("%s frames are at most %d bytes", h.kind, limit))
	}
	return h, nil
}

func isHex(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// copyPayload copies the next n bytes to w straight from the reader's
// buffer, so output of any size costs no allocation and one copy fewer.
// w must not keep the slice it is given.
func (fr *frameReader) copyPayload(w io.Writer, n int) error {
	for n > 0 {
		// Whole pieces only, as many bytes as the buffer holds at most: the
		// part of a frame cut off halfway is never passed on.
		chunk, err := fr.br.Peek(min(n, fr.br.Size()))
		if err != nil {
			return fmt.Errorf("%w: stream ended inside a frame", errProtocol)
		}
		k := len(chunk)
		fr.stall.hold()
		_, err = w.Write(chunk)
		_, _ = fr.br.Discard(k)
		if err != nil {
			return err
		}
		n -= k
		if n > 0 {
			fr.stall.await("a frame's payload")
		}
	}
	fr.stall.idle()
	return nil
}

// payload reads the next n bytes, a control message already checked
// against maxControl.
func (fr *frameReader) payload(n int) ([]byte, error) {
	b := make([]byte, n)
	if _, err := io.ReadFull(fr.br, b); err != nil {
		return nil, fmt.Errorf("%w: stream ended inside a frame", errProtocol)
	}
	fr.stall.idle()
	return b, nil
}
