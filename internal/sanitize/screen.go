package sanitize

import (
	"bytes"
	"encoding/binary"
	"io"
	"math/bits"
	"slices"
	"unicode/utf8"
)

// maxLine is the most a Screen holds of a line waiting for its newline,
// in bytes. A later carriage return can rewrite a held line, so it cannot
// be forwarded early; but a line longer than this is not a progress bar
// (those fit a terminal's width, a few hundred columns), and it is already
// longer than everything sandbox.DefaultMaxOutput keeps of a run, so
// forwarding it in pieces of this size loses nothing the model would have
// read, and a 10 GB line without a newline costs what a short one does.
// It is also the size of a Linux pipe's buffer, the most one read of a
// program's output returns.
const maxLine = 64 << 10

// Screen is an io.Writer that forwards a program's output as a terminal
// would leave it. Progress bars redraw one line with carriage returns
// thousands of times, and colour codes wrap every word of a coloured
// traceback: forwarded raw, the redraws fill the model's output budget
// with copies of one line, and the codes bury the text in noise. What a
// person would read on their screen is the last state of each line, so
// that is what Screen forwards, line by line, as each newline ends one.
//
// On the line being built, a carriage return moves the cursor to column
// 0 and what follows overwrites the line one character at a time; a
// backspace moves one column left; and the control sequences that erase
// (CSI K, 1K, 2K) or move the cursor along the line (CSI G, C, D) do what
// they do on a terminal. Columns are characters (runes), not bytes: wide
// characters count as one. Every other escape sequence and control
// character but tab and newline is dropped, C1 controls too, whether
// encoded in UTF-8 or as bare 8-bit bytes that are not part of a UTF-8
// character. Invalid UTF-8 is otherwise forwarded byte for byte, each
// invalid byte a column of its own.
//
// Forwarded output is never longer than the input. Moving the cursor past
// the end of the line and writing there leaves blank columns, which become
// spaces only as far as the bytes Screen has dropped so far pay for them.
//
// Writes may split the output anywhere, inside an escape sequence or a
// UTF-8 character; the result is the same. Text without control bytes is
// forwarded as it stands, after one scan, without being copied but for its
// unfinished last line. The caller calls Flush when the output ends. A
// Screen is not safe for concurrent use.
type Screen struct {
	w   io.Writer
	err error // the first error from w, which every later call returns

	line  []byte // the line being built
	cur   int    // the cursor's byte offset in line
	pad   int    // columns the cursor stands past the end of line (then cur == len(line))
	slack int64  // input bytes dropped so far and not yet spent on blank columns
	limit int    // maxLine, smaller in tests

	state   parseState
	csi     csiSeq
	strNeed int  // continuation bytes that a UTF-8 character in a control string still needs
	strC2   bool // that character began with 0xC2, so it may be U+009C, the string terminator

	carry  [utf8.UTFMax]byte // an unfinished UTF-8 character at the end of the last write
	ncarry int
	final  bool // Flush is forwarding carry: an unfinished character will not be finished
}

// NewScreen returns a Screen that forwards to w.
func NewScreen(w io.Writer) *Screen {
	return &Screen{w: w, limit: maxLine}
}

type parseState uint8

const (
	ground    parseState = iota
	afterEsc             // ESC
	escInter             // ESC and intermediate bytes
	inCSI                // a control sequence's parameters and intermediates
	badCSI               // a malformed control sequence, ignored up to its final byte
	inString             // the body of an OSC, DCS, SOS, PM or APC string
	stringEsc            // ESC in a control string: the terminator if '\' follows
)

// csiSeq is what a control sequence has said so far. Only the first
// parameter matters: the sequences Screen carries out take one.
type csiSeq struct {
	n      int  // the first parameter, 0 if none
	more   bool // a separator ended the first parameter
	marked bool // a private marker (< = > ?) began the parameters
	inter  bool // an intermediate byte came
	begun  bool // a parameter byte came
}

const (
	bel = 0x07
	can = 0x18
	sub = 0x1a
	esc = 0x1b
	del = 0x7f
)

var (
	tab     = []byte{'\t'}
	newline = []byte{'\n'}
	blanks  = bytes.Repeat([]byte{' '}, 256)
)

// Write forwards what p completes and holds the rest. It fails only when
// the underlying writer does.
func (s *Screen) Write(p []byte) (int, error) {
	if s.err != nil {
		return 0, s.err
	}
	n := len(p)
	// Finish the character the last write ended inside, taking from p no
	// more than it needs, so that the bulk of p is not copied.
	for s.ncarry > 0 && len(p) > 0 {
		var buf [utf8.UTFMax]byte
		c := copy(buf[:], s.carry[:s.ncarry])
		k := 0
		for k < len(p) && !utf8.FullRune(buf[:c+k]) {
			buf[c+k] = p[k]
			k++
		}
		s.ncarry = 0
		s.write(buf[:c+k])
		p = p[k:]
	}
	s.write(p)
	if s.err != nil {
		return 0, s.err
	}
	return n, nil
}

// Flush forwards the unfinished last line as it stands, without a newline,
// for the end of the output. What is written after it begins a new line.
func (s *Screen) Flush() error {
	if s.ncarry > 0 && s.err == nil {
		c := s.carry
		n := s.ncarry
		s.ncarry = 0
		s.final = true
		s.write(c[:n])
		s.final = false
	}
	s.forward(s.line)
	s.line, s.cur, s.pad = s.line[:0], 0, 0
	return s.err
}

func (s *Screen) write(p []byte) {
	for len(p) > 0 && s.err == nil {
		if s.state != ground {
			p = p[s.escape(p):]
			continue
		}
		if n := plainLen(p); n > 0 {
			s.text(p[:n])
			p = p[n:]
			continue
		}
		n := s.special(p)
		if n == 0 {
			// p is the start of a character that the next write finishes.
			s.ncarry = copy(s.carry[:], p)
			return
		}
		p = p[n:]
	}
}

// plainLen returns how many bytes at the start of p are text to forward as
// it is: anything but control bytes other than tab and newline, C1
// controls, and a character left unfinished at the end of p.
func plainLen(p []byte) int {
	i := 0
	for {
		i = nextSpecial(p, i)
		if i == len(p) || p[i] < utf8.RuneSelf {
			return i
		}
		for i < len(p) && p[i] >= utf8.RuneSelf {
			r, size := utf8.DecodeRune(p[i:])
			switch {
			case size > 1 && r <= 0x9f:
				return i // a C1 control in UTF-8
			case size == 1 && (p[i] <= 0x9f || !utf8.FullRune(p[i:])):
				return i // an 8-bit C1 control, or a character to finish
			}
			i += size
		}
	}
}

// nextSpecial returns the index of the first byte at or after i that is a
// control byte other than tab and newline, DEL, or not ASCII, or len(p).
// It looks at eight bytes at a time: output is mostly plain text, and the
// standard library has no vectorised scan for a class of bytes
// (bytes.IndexAny goes byte by byte).
func nextSpecial(p []byte, i int) int {
	for ; i+8 <= len(p); i += 8 {
		if m := specialBytes(binary.LittleEndian.Uint64(p[i:])); m != 0 {
			return i + bits.TrailingZeros64(m)/8
		}
	}
	for ; i < len(p); i++ {
		if b := p[i]; b < 0x20 && b != '\t' && b != '\n' || b >= del {
			return i
		}
	}
	return i
}

// specialBytes sets the high bit of each byte of x that nextSpecial stops
// at, and no other bit. Each sum stays within its byte, so no byte's
// result depends on another's.
func specialBytes(x uint64) uint64 {
	const (
		ones = 0x0101010101010101
		high = 0x8080808080808080
	)
	low := x &^ high                              // each byte's low seven bits
	ctl := ^(low + 0x60*ones) & high              // below 0x20
	ht := ^((low ^ '\t'*ones) + 0x7f*ones) & high // equal to '\t'
	lf := ^((low ^ '\n'*ones) + 0x7f*ones) & high // equal to '\n'
	rub := (low + ones) & high                    // 0x7f
	return x&high | rub | ctl&^(ht|lf)
}

// special carries out what starts p, which plainLen stopped at, and returns
// how many bytes it took: 0 if p is a character that the next write
// finishes.
func (s *Screen) special(p []byte) int {
	b := p[0]
	if b < utf8.RuneSelf {
		s.control(b)
		return 1
	}
	if !utf8.FullRune(p) && !s.final {
		return 0
	}
	r, size := utf8.DecodeRune(p)
	switch {
	case size == 1 && b <= 0x9f:
		r = rune(b) // an 8-bit C1 control
	case size == 1 || r > 0x9f:
		s.text(p[:size]) // a character Flush will not see finished
		return size
	}
	s.slack += int64(size)
	s.c1(r)
	return size
}

// control carries out the C0 control b (or DEL), in text and in the middle
// of an escape sequence alike, as a terminal does.
func (s *Screen) control(b byte) {
	switch b {
	case '\n':
		s.endLine(newline)
		return
	case '\t':
		s.text(tab)
		return
	}
	s.slack++
	switch b {
	case '\r':
		s.cur, s.pad = 0, 0
	case '\b':
		s.moveLeft(1)
	case esc:
		s.state = afterEsc
	case can, sub:
		s.state = ground
	}
}

// c1 carries out the C1 control r: those that begin a sequence begin it,
// as ESC and the matching letter would; the others are dropped.
func (s *Screen) c1(r rune) {
	switch r {
	case 0x9b:
		s.startCSI()
	case 0x90, 0x98, 0x9d, 0x9e, 0x9f:
		s.startString()
	}
}

func (s *Screen) startCSI() {
	s.state, s.csi = inCSI, csiSeq{}
}

func (s *Screen) startString() {
	s.state, s.strNeed, s.strC2 = inString, 0, false
}

// escape reads p in the middle of an escape sequence and returns how many
// bytes it took: up to the end of the sequence, or up to a byte that
// cancels it, which is left for text.
func (s *Screen) escape(p []byte) int {
	for i := 0; i < len(p); i++ {
		b := p[i]
		if s.state == stringEsc {
			if b == '\\' {
				s.slack++
				s.state = ground
				return i + 1
			}
			// The ESC ended the string and begins a sequence of its own,
			// which b is part of.
			s.state = afterEsc
		}
		if s.state == inString {
			s.slack++
			if s.stringByte(b) {
				return i + 1
			}
			continue
		}
		switch {
		case b >= utf8.RuneSelf:
			s.state = ground
			return i
		case b < 0x20 || b == del:
			s.control(b)
			if s.state == ground {
				return i + 1
			}
		default:
			s.slack++
			if s.sequenceByte(b) {
				return i + 1
			}
		}
	}
	return len(p)
}

// stringByte reads b in the body of a control string and reports whether
// it ended the string. The body is dropped; only its end matters.
func (s *Screen) stringByte(b byte) bool {
	switch b {
	case bel, can, sub:
		s.state = ground
		return true
	case esc:
		s.state = stringEsc
		return false
	}
	// A title or a link is UTF-8, whose continuation bytes include 0x9C:
	// only a 0x9C that no character claims ends the string.
	if s.strNeed > 0 && b >= 0x80 && b <= 0xbf {
		s.strNeed--
		if s.strNeed == 0 && s.strC2 && b == 0x9c {
			s.state = ground
			return true
		}
		return false
	}
	s.strNeed, s.strC2 = 0, false
	switch {
	case b == 0x9c:
		s.state = ground
		return true
	case b >= 0xc2 && b <= 0xdf:
		s.strNeed, s.strC2 = 1, b == 0xc2
	case b >= 0xe0 && b <= 0xef:
		s.strNeed = 2
	case b >= 0xf0 && b <= 0xf4:
		s.strNeed = 3
	}
	return false
}

// sequenceByte reads b, a printable ASCII byte, after ESC or in a control
// sequence, and reports whether it ended the sequence.
func (s *Screen) sequenceByte(b byte) bool {
	switch s.state {
	case afterEsc:
		switch {
		case b == '[':
			s.startCSI()
			return false
		case b == ']' || b == 'P' || b == 'X' || b == '^' || b == '_':
			s.startString()
			return false
		case b < 0x30:
			s.state = escInter
			return false
		}
	case escInter:
		if b < 0x30 {
			return false
		}
	case inCSI:
		c := &s.csi
		switch {
		case b >= '0' && b <= '9' && !c.inter:
			if !c.more {
				c.n = min(c.n*10+int(b-'0'), s.limit)
			}
			c.begun = true
			return false
		case (b == ';' || b == ':') && !c.inter:
			c.more, c.begun = true, true
			return false
		case b >= '<' && b <= '?' && !c.begun && !c.inter:
			c.marked, c.begun = true, true
			return false
		case b < 0x30:
			c.inter = true
			return false
		case b < 0x40:
			s.state = badCSI
			return false
		}
		s.state = ground
		s.dispatch(b)
		return true
	case badCSI:
		if b < 0x40 {
			return false
		}
	}
	s.state = ground
	return true
}

// dispatch carries out the control sequence that final ends, if it is one
// that changes the current line; colours, cursor movement off the line and
// the rest change nothing a reader of the text needs.
func (s *Screen) dispatch(final byte) {
	c := s.csi
	if c.marked || c.inter {
		return
	}
	n := max(c.n, 1)
	switch final {
	case 'K':
		s.erase(c.n)
	case 'G', '`':
		s.cur, s.pad = 0, 0
		s.moveRight(n - 1)
	case 'C', 'a':
		s.moveRight(n)
	case 'D':
		s.moveLeft(n)
	}
}

// erase carries out CSI K with the parameter mode: 0 erases from the
// cursor to the end of the line, 1 from its start through the cursor, 2
// the whole line. The cursor stays in its column.
func (s *Screen) erase(mode int) {
	switch mode {
	case 0:
		s.slack += int64(len(s.line) - s.cur)
		s.line = s.line[:s.cur]
	case 1:
		if s.cur == len(s.line) {
			s.clearLine()
			return
		}
		// The erased columns become blanks, one byte each, and the text
		// after them keeps its columns.
		end := s.cur + cellLen(s.line[s.cur:])
		k := utf8.RuneCount(s.line[:end])
		n := copy(s.line[k:], s.line[end:])
		s.line = s.line[:k+n]
		for i := range k {
			s.line[i] = ' '
		}
		s.slack += int64(end - k)
		s.cur = k - 1
	case 2:
		s.clearLine()
	}
}

// clearLine empties the line, leaving the cursor in its column.
func (s *Screen) clearLine() {
	s.pad = min(utf8.RuneCount(s.line[:s.cur])+s.pad, s.limit)
	s.slack += int64(len(s.line))
	s.line, s.cur = s.line[:0], 0
}

// moveRight moves the cursor n columns right, past the end of the line if
// need be.
func (s *Screen) moveRight(n int) {
	for ; n > 0 && s.cur < len(s.line); n-- {
		s.cur += cellLen(s.line[s.cur:])
	}
	s.pad = min(s.pad+n, s.limit)
}

// moveLeft moves the cursor n columns left, stopping at column 0.
func (s *Screen) moveLeft(n int) {
	k := min(n, s.pad)
	s.pad -= k
	for n -= k; n > 0 && s.cur > 0; n-- {
		_, size := utf8.DecodeLastRune(s.line[:s.cur])
		s.cur -= size
	}
}

// cellLen is the length of the column that starts b: one character, or
// one byte of invalid UTF-8.
func cellLen(b []byte) int {
	if b[0] < utf8.RuneSelf {
		return 1
	}
	_, n := utf8.DecodeRune(b)
	return n
}

// text writes t, which holds no control bytes but tabs and newlines, at
// the cursor.
func (s *Screen) text(t []byte) {
	for len(t) > 0 {
		if s.cur == len(s.line) && s.pad == 0 {
			s.appendText(t)
			return
		}
		nl := bytes.IndexByte(t, '\n')
		if nl < 0 {
			s.put(t)
			return
		}
		s.put(t[:nl])
		s.endLine(newline)
		t = t[nl+1:]
	}
}

// appendText writes t at the end of the line: the fast path. The lines t
// completes go out as they stand, most of them straight from t, and only
// its unfinished last line is kept.
func (s *Screen) appendText(t []byte) {
	nl := bytes.IndexByte(t, '\n')
	if nl < 0 {
		s.hold(t)
		return
	}
	// The last line is usually short, so a backward scan finds its start
	// soon.
	last := nl + 1 + bytes.LastIndexByte(t[nl+1:], '\n')
	if len(s.line) == 0 {
		s.forward(t[:last+1])
	} else {
		s.endLine(t[:nl+1])
		s.forward(t[nl+1 : last+1])
	}
	s.hold(t[last+1:])
}

// hold appends t, which holds no newline, to the line, with the cursor at
// its end. A column that would make the line longer than the limit begins
// a new one instead, and the old one is forwarded as it stands.
func (s *Screen) hold(t []byte) {
	for len(s.line)+len(t) > s.limit {
		c := cellCut(t, s.limit-len(s.line))
		if c == 0 && len(s.line) == 0 {
			c = cellLen(t) // a limit shorter than one character
		}
		s.forward(s.line)
		s.forward(t[:c])
		s.line = s.line[:0]
		t = t[c:]
	}
	s.line = append(s.line, t...)
	s.cur = len(s.line)
}

// cellCut returns where in t the column holding t[x] begins, for t that
// begins a column.
func cellCut(t []byte, x int) int {
	for i := x; i >= 0 && i > x-utf8.UTFMax; i-- {
		if utf8.RuneStart(t[i]) {
			if i+cellLen(t[i:]) > x {
				return i
			}
			break // the bytes after that character are invalid, a column each
		}
	}
	return x
}

// put writes t, which holds no newline, at the cursor, which is not at
// the end of the line or past it: the slow path.
func (s *Screen) put(t []byte) {
	if len(t) == 0 {
		return // blank columns become spaces only under text
	}
	if s.pad > 0 {
		// The cursor is past the end of the line; the columns between are
		// blank, as spaces, as far as the slack pays.
		n := int(min(int64(s.pad), s.slack))
		s.slack -= int64(n)
		s.pad = 0
		for n > 0 {
			k := min(n, len(blanks))
			s.hold(blanks[:k])
			n -= k
		}
	}
	if s.cur < len(s.line) {
		t = s.overwrite(t)
	}
	if len(t) > 0 {
		s.hold(t)
	}
}

// overwrite writes t over the line from the cursor, a column for a
// column, and returns what is left of t past the end of the line.
func (s *Screen) overwrite(t []byte) []byte {
	i, j := 0, s.cur // ends of what is written in t and of what it replaces in the line
	full := false
	for i < len(t) && j < len(s.line) {
		n, o := cellLen(t[i:]), cellLen(s.line[j:])
		if len(s.line)+(i-(j-s.cur))+n-o > s.limit {
			full = true
			break
		}
		i, j = i+n, j+o
	}
	if i == j-s.cur {
		copy(s.line[s.cur:], t[:i])
	} else {
		s.line = slices.Replace(s.line, s.cur, j, t[:i]...)
	}
	s.slack += int64(j - s.cur)
	s.cur += i
	if full {
		s.forward(s.line)
		s.line, s.cur = s.line[:0], 0
	}
	return t[i:]
}

// endLine forwards the line followed by b, the end of it, and begins a new
// one.
func (s *Screen) endLine(b []byte) {
	if len(s.line) > 0 && len(b) <= cap(s.line)-len(s.line) {
		s.forward(append(s.line, b...))
	} else {
		s.forward(s.line)
		s.forward(b)
	}
	s.line, s.cur, s.pad = s.line[:0], 0, 0
}

func (s *Screen) forward(b []byte) {
	if len(b) == 0 || s.err != nil {
		return
	}
	_, s.err = s.w.Write(b)
}
