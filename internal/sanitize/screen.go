package sanitize

import (
	"bytes"
	"encoding/binary"
	"io"
	"math/bits"
	"unicode/utf8"
)

// maxLine is the most a Screen holds of a line waiting for its newline,
// in bytes. A later carriage return can rewrite a held line, so it cannot
// be forwarded early; but a line longer than this is not a progress bar,
// and it is already longer than everything sandbox.DefaultMaxOutput keeps
// of a run, so forwarding it in pieces of this size loses nothing the
// model would have read, and a 10 GB line without a newline costs what a
// short one does. It is also the size of a Linux pipe's buffer, the most
// one read of a program's output returns.
const maxLine = 64 << 10

// maxString bounds a control string (OSC, DCS, SOS, PM, APC) whose
// terminator has not come: a title or a hyperlink takes far less, and past
// it the string is taken to be text that began like one.
const maxString = 8 << 10

// width is the number of columns of the terminal Screen acts as. Programs
// that redraw a line keep it to the width they assume, 80 columns when
// they are not told (as they are not in the sandbox); a width far beyond
// that leaves every such line whole. Bounding it bounds the work of every
// cursor movement and erase, which would otherwise be the length of the
// line: a program that prints a long line and then floods it with escape
// sequences that jump across it costs the host tens of nanoseconds a byte
// at worst, not tens of microseconds.
const width = 1024

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
// character but tab and newline is dropped, C1 controls encoded in UTF-8
// too. Invalid UTF-8 is forwarded byte for byte, each invalid byte a column
// of its own: a bare byte from 0x80 to 0x9F is text in a legacy encoding
// (cp1252's quotes and dashes, a Latin-1 file sent through cat), not a C1
// control, as it is not to a terminal in a UTF-8 locale. A control string
// (a title, a hyperlink) that runs past maxString bytes without its
// terminator is taken for text that only looked like one, and what follows
// is shown: a terminal would swallow the rest of the output, and the model
// would never see it.
//
// The terminal is 1,024 columns wide: a line longer than that wraps, as
// it would on a terminal, and the cursor can only go back over its last
// row. A line held longer than 64 KiB without being redrawn goes out as
// it stands. Wrapping and that bound never add or remove a byte; they only
// decide what a carriage return can still redraw.
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

	// Until the cursor leaves the end of the line, the line is bytes,
	// appended to as they come; after, it is the row the cursor is on, a
	// cell per column, until the row ends.
	line   []byte // the line being built, the cursor at its end, when !onRow
	onRow  bool
	row    []rune // the row being built, when onRow
	col    int    // the cursor's column in row: from 0 to width (past the last column, a wrap pending)
	slack  int64  // input bytes dropped so far and not yet spent on blank columns
	limit  int    // maxLine, the bound of line; smaller in tests
	width  int    // width, the bound of row; smaller in tests
	encode []byte // where row is encoded to be forwarded

	state   parseState
	csi     csiSeq
	strLen  int  // bytes of the control string so far
	strNeed int  // continuation bytes that a UTF-8 character in a control string still needs
	strC2   bool // that character began with 0xC2, so it may be U+009C, the string terminator

	carry  [utf8.UTFMax]byte // an unfinished UTF-8 character at the end of the last write
	ncarry int
	final  bool // Flush is forwarding carry: an unfinished character will not be finished
}

// NewScreen returns a Screen that forwards to w.
func NewScreen(w io.Writer) *Screen {
	return &Screen{w: w, limit: maxLine, width: width}
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

// maxParam bounds a control sequence's parameter, far past any column,
// so that no number of digits overflows it.
const maxParam = 1 << 16

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
	s.endLine(nil)
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
			case size == 1 && !utf8.FullRune(p[i:]):
				return i // a character to finish
			}
			i += size
		}
	}
}

// nextSpecial returns the index of the first byte at or after i that is a
// control byte other than tab and newline, DEL, or not ASCII, or len(p).
// Output is mostly plain text, and the standard library has no vectorised
// scan for a class of bytes (bytes.IndexAny goes byte by byte), so it
// looks at 32 bytes at a time, as four words: a cheap test finds whether
// any byte is outside printable ASCII, and only then (mostly for a tab or
// a newline) does specialBytes look closer.
func nextSpecial(p []byte, i int) int {
	const (
		ones = 0x0101010101010101
		high = 0x8080808080808080
	)
	// The high bit of each byte of outside(w) is set only if some byte of w
	// is below 0x20 or from 0x7F up, and some is if one is: the borrows of
	// the subtraction and the carries of the sum start only at such bytes.
	outside := func(w uint64) uint64 { return (w-0x20*ones)&^w | (w + ones) | w }
	q := p[i:]
	for len(q) >= 32 {
		w0 := binary.LittleEndian.Uint64(q)
		w1 := binary.LittleEndian.Uint64(q[8:])
		w2 := binary.LittleEndian.Uint64(q[16:])
		w3 := binary.LittleEndian.Uint64(q[24:])
		if (outside(w0)|outside(w1)|outside(w2)|outside(w3))&high != 0 {
			for k, w := range [...]uint64{w0, w1, w2, w3} {
				if m := specialBytes(w); m != 0 {
					return len(p) - len(q) + 8*k + bits.TrailingZeros64(m)/8
				}
			}
		}
		q = q[32:]
	}
	for ; len(q) >= 8; q = q[8:] {
		if m := specialBytes(binary.LittleEndian.Uint64(q)); m != 0 {
			return len(p) - len(q) + bits.TrailingZeros64(m)/8
		}
	}
	for k, b := range q {
		if b < 0x20 && b != '\t' && b != '\n' || b >= del {
			return len(p) - len(q) + k
		}
	}
	return len(p)
}

// specialBytes sets the high bit of each byte of x that nextSpecial stops
// at, and no other bit. Each sum stays within its byte, so no byte's
// result depends on another's.
func specialBytes(x uint64) uint64 {
	const (
		ones = 0x0101010101010101
		high = 0x8080808080808080
	)
	low := x &^ high // each byte's low seven bits
	// The high bit of each sum says whether a byte is at least 0x20, is
	// 0x7F, and (with tab and newline turned into 1 and 2) is at least 1
	// and at least 3.
	atLeast20, is7F := low+0x20*3*ones, low+ones
	tabNL := low ^ 0x08*ones
	atLeast1, atLeast3 := tabNL+0x7f*ones, tabNL+0x7d*ones
	plain := (atLeast20&^is7F | atLeast1&^atLeast3) &^ x
	return high &^ plain
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
	if r, size := utf8.DecodeRune(p); size == 1 || r > 0x9f {
		s.text(p[:size]) // a character Flush will not see finished, or an invalid byte
		return size
	}
	// A C1 control in UTF-8 is dropped, and begins no sequence: nothing
	// that writes UTF-8 means one by it.
	s.slack += 2
	return 2
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
		if s.toRow() {
			s.col = 0
		}
	case '\b':
		s.moveLeft(1)
	case esc:
		s.state = afterEsc
	case can, sub:
		s.state = ground
	}
}

func (s *Screen) startCSI() {
	s.state, s.csi = inCSI, csiSeq{}
}

func (s *Screen) startString() {
	s.state, s.strLen, s.strNeed, s.strC2 = inString, 0, 0, false
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
			if s.strLen == maxString {
				// Past its bound the string is text after all.
				s.state = ground
				return i
			}
			s.strLen++
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
				c.n = min(c.n*10+int(b-'0'), maxParam)
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
	c := &s.csi
	if c.marked || c.inter {
		return
	}
	n := max(c.n, 1)
	switch final {
	case 'K':
		s.erase(c.n)
	case 'G', '`':
		s.makeRow()
		s.col = min(n-1, s.width-1)
	case 'C', 'a':
		s.makeRow()
		s.col = min(s.col+n, s.width-1)
	case 'D':
		s.moveLeft(n)
	}
}

// moveLeft moves the cursor n columns left, stopping at column 0.
func (s *Screen) moveLeft(n int) {
	if s.toRow() {
		s.col = max(min(s.col, s.width-1)-n, 0)
	}
}

// erase carries out CSI K with the parameter mode: 0 erases from the
// cursor to the end of the line, 1 from its start through the cursor, 2
// the whole line. The cursor stays in its column.
func (s *Screen) erase(mode int) {
	if mode > 2 || mode == 0 && !s.onRow {
		return // the cursor is at the end of a line of bytes: nothing follows it
	}
	if !s.toRow() {
		return // nothing precedes it either
	}
	if mode == 1 && s.col+1 < len(s.row) {
		// The erased columns become blanks, and the text after them keeps
		// its columns.
		for i, r := range s.row[:s.col+1] {
			s.slack += max(credit(r)-1, 0)
			s.row[i] = blank
		}
		return
	}
	from := 0
	if mode == 0 {
		from = min(s.col, len(s.row))
	}
	for _, r := range s.row[from:] {
		s.slack += credit(r)
	}
	s.row = s.row[:from]
}

// toRow makes the line a row of cells, for the cursor to leave its end,
// and reports whether the cursor is on a row now: on a line of no bytes
// there is nothing to go back over, and the line stays as it is.
func (s *Screen) toRow() bool {
	if !s.onRow && len(s.line) > 0 {
		s.makeRow()
	}
	return s.onRow
}

// makeRow makes the line a row of cells. A line longer than the width has
// wrapped, and only its last row, where the cursor is, can be redrawn:
// the rows before it go out as they stand.
func (s *Screen) makeRow() {
	if s.onRow {
		return
	}
	start := 0
	if n := utf8.RuneCount(s.line); n > s.width {
		// A full last row keeps the cursor, with a wrap pending, as a
		// terminal's does.
		for skip := (n - 1) / s.width * s.width; skip > 0; skip-- {
			_, size := utf8.DecodeRune(s.line[start:])
			start += size
		}
		s.forward(s.line[:start])
	}
	s.row = s.row[:0]
	for p := s.line[start:]; len(p) > 0; {
		r, size := decodeCell(p)
		s.row = append(s.row, r)
		p = p[size:]
	}
	s.line, s.onRow, s.col = s.line[:0], true, len(s.row)
}

// A cell is a character, an invalid byte kept as a surrogate (which no
// valid UTF-8 encodes) so that it goes out as it came, or a blank.
//
// blank is a column left blank, written as a space: one past the end of
// the row that the slack paid for, or one erased through the cursor.
// Erasing or overwriting it frees nothing, so that no sequence of moves
// and erases can make blanks over and over from the same dropped bytes:
// the blanks Screen ever makes are bounded by its input, and so is the
// work of making them.
const blank = 0xdc00 | ' '

// decodeCell returns the cell at the start of b and its length in b.
func decodeCell(b []byte) (rune, int) {
	if b[0] < utf8.RuneSelf {
		return rune(b[0]), 1
	}
	r, size := utf8.DecodeRune(b)
	if r == utf8.RuneError && size == 1 {
		r = 0xdc00 | rune(b[0])
	}
	return r, size
}

// appendCell appends the bytes of the cell r to b.
func appendCell(b []byte, r rune) []byte {
	if r < utf8.RuneSelf || r >= 0xdc00 && r <= 0xdcff {
		return append(b, byte(r))
	}
	return utf8.AppendRune(b, r)
}

// credit is what dropping the cell r adds to the slack: the input bytes
// it came from, none for a blank.
func credit(r rune) int64 {
	switch {
	case r == blank:
		return 0
	case r < utf8.RuneSelf || r >= 0xdc80 && r <= 0xdcff:
		return 1
	}
	return int64(utf8.RuneLen(r))
}

// text writes t, which holds no control bytes but tabs and newlines, at
// the cursor.
func (s *Screen) text(t []byte) {
	for len(t) > 0 {
		if !s.onRow {
			s.appendText(t)
			return
		}
		nl := bytes.IndexByte(t, '\n')
		if nl < 0 {
			t = s.put(t)
			continue
		}
		if rest := s.put(t[:nl]); len(rest) > 0 {
			t = t[nl-len(rest):] // the row filled up and wrapped
			continue
		}
		s.endLine(newline)
		t = t[nl+1:]
	}
}

// appendText writes t at the end of a line of bytes: the fast path. The
// lines t completes go out as they stand, straight from t, and only its
// unfinished last line is copied, to be kept.
func (s *Screen) appendText(t []byte) {
	nl := bytes.IndexByte(t, '\n')
	if nl < 0 {
		s.hold(t)
		return
	}
	// The last line is usually short, so a backward scan finds its start
	// soon.
	last := nl + 1 + bytes.LastIndexByte(t[nl+1:], '\n')
	s.forward(s.line) // the start of the first line t ends
	s.forward(t[:last+1])
	s.line = s.line[:0]
	s.hold(t[last+1:])
}

// hold appends t, which holds no newline, to the line of bytes. A cell
// that would make the line longer than the limit begins a new one
// instead, and the old one goes out as it stands.
func (s *Screen) hold(t []byte) {
	for len(s.line)+len(t) > s.limit {
		c := cellCut(t, s.limit-len(s.line))
		if c == 0 && len(s.line) == 0 {
			c = 1 // a limit shorter than one character
		}
		s.forward(s.line)
		s.forward(t[:c])
		s.line = s.line[:0]
		t = t[c:]
	}
	s.line = append(s.line, t...)
}

// cellCut returns where in t the cell holding t[x] begins, for t that
// begins a cell.
func cellCut(t []byte, x int) int {
	for i := x; i >= 0 && i > x-utf8.UTFMax; i-- {
		if utf8.RuneStart(t[i]) {
			if _, size := decodeCell(t[i:]); i+size > x {
				return i
			}
			break // the bytes after that character are invalid, a cell each
		}
	}
	return x
}

// put writes t, which holds no newline, on the row from the cursor, and
// returns what is left of t when the row fills up: it has wrapped, and
// the rest goes on a new line.
func (s *Screen) put(t []byte) []byte {
	for i := 0; i < len(t); {
		// Most redraws are ASCII over the row they redraw.
		for end := min(len(s.row), s.width); i < len(t) && t[i] < utf8.RuneSelf && s.col < end; i++ {
			s.slack += credit(s.row[s.col])
			s.row[s.col] = rune(t[i])
			s.col++
		}
		if i == len(t) {
			break
		}
		if s.col >= s.width {
			s.endLine(nil)
			return t[i:]
		}
		r, size := decodeCell(t[i:])
		if gap := s.col - len(s.row); gap > 0 {
			// The columns between the end of the row and the cursor are
			// blank, as spaces, as far as the slack pays.
			n := int(min(int64(gap), s.slack))
			s.slack -= int64(n)
			for range n {
				s.row = append(s.row, blank)
			}
			s.col = len(s.row)
		}
		if s.col < len(s.row) {
			s.slack += credit(s.row[s.col])
			s.row[s.col] = r
		} else {
			s.row = append(s.row, r)
		}
		s.col++
		i += size
	}
	return nil
}

// endLine forwards the line followed by b, the end of it (a newline, or
// nothing when the line only stops here), and begins a new one.
func (s *Screen) endLine(b []byte) {
	line := s.line
	if s.onRow {
		line = s.encode[:0]
		for _, r := range s.row {
			line = appendCell(line, r)
		}
		s.encode = line
	}
	if len(line) > 0 && len(b) <= cap(line)-len(line) {
		s.forward(append(line, b...))
	} else {
		s.forward(line)
		s.forward(b)
	}
	s.line, s.row, s.onRow, s.col = s.line[:0], s.row[:0], false, 0
}

func (s *Screen) forward(b []byte) {
	if len(b) == 0 || s.err != nil {
		return
	}
	_, s.err = s.w.Write(b)
}
