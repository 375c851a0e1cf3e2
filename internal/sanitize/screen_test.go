package sanitize

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/terpdev/terp/internal/terptest"
)

// screenTests are what a terminal leaves of each input, written by hand
// from how a terminal (xterm, VTE) treats it.
var screenTests = []struct{ name, in, want string }{
	{"plain lines pass as they are", "revenue: 214,900\n\tup 14%\n", "revenue: 214,900\n\tup 14%\n"},
	{"an unfinished last line comes with Flush", "a\nb", "a\nb"},
	{"a redrawn line keeps its last state", "\r0%\r50%\r100%\n", "100%\n"},
	{"a shorter redraw leaves the rest", "abcdef\rXY\n", "XYcdef\n"},
	{"CR LF is a newline", "one\r\ntwo\r\n", "one\ntwo\n"},
	{"a redraw that print(end='') never ends", "\r1%\r2%\r3%", "3%"},
	{"tqdm's shape", "\r  0%|          | 0/3 [00:00<?, ?it/s]\r100%|##########| 3/3 [00:00<00:00, 44150.57it/s]\n",
		"100%|##########| 3/3 [00:00<00:00, 44150.57it/s]\n"},

	{"backspace overstrikes", "a\bb", "b"},
	{"man page underlining", "_\bw_\bo_\br_\bd\n", "word\n"},
	{"a spinner", "working |\b/\b-\b\\\bdone\n", "working done\n"},
	{"backspace stops at column 0", "\b\bab\b\b\bX\n", "Xb\n"},
	{"a tab is kept, one column", "a\tb\rX\n", "X\tb\n"},
	{"other C0 controls and DEL are dropped", "a\x00b\x07c\x0ed\x7fe\n", "abcde\n"},

	{"colours", "\x1b[1;31mred\x1b[0m and \x1b[38;2;255;0;0mtrue\x1b[m\n", "red and true\n"},
	{"private modes", "\x1b[?25lhidden\x1b[?25h\x1b[?2004h\n", "hidden\n"},
	{"cursor up and screen clears are dropped", "a\x1b[Ab\x1b[2J\x1b[H\n", "ab\n"},
	{"OSC ended by BEL", "\x1b]0;title\x07text\n", "text\n"},
	{"an unterminated OSC ends at maxString", "\x1b]0;" + strings.Repeat("x", maxString-2) + "shown\n", "shown\n"},
	{"OSC 8 hyperlink ended by ST", "\x1b]8;;https://example.com\x1b\\link\x1b]8;;\x1b\\\n", "link\n"},
	{"a UTF-8 title holding 0x9C", "\x1b]2;Ŝtatus\x07ok\n", "ok\n"},
	{"DCS", "\x1bPq#0;2;0;0;0#0~~\x1b\\after\n", "after\n"},
	{"SOS, PM and APC", "\x1bXs\x1b\\\x1b^p\x1b\\\x1b_a\x1b\\x\n", "x\n"},
	{"ESC ends a string and begins a sequence", "\x1b]0;t\x1b[31mred\n", "red\n"},
	{"two-byte escapes", "\x1b7saved\x1b8\x1b=\x1b>\x1bc\n", "saved\n"},
	{"escapes with intermediates", "\x1b(Bplain\x1b)0\x1b#8\n", "plain\n"},
	{"CAN cancels a sequence", "\x1b[31\x18mx\n", "mx\n"},
	{"ESC begins a sequence anew", "\x1b[31\x1b[32mx\n", "x\n"},
	{"a control inside a sequence is carried out", "ab\x1b[\r2mX\n", "Xb\n"},
	{"a malformed sequence is ignored to its end", "ab\x1b[1?2KX\n", "abX\n"},
	{"bare bytes 0x80-0x9F are legacy text, not C1 controls", "\x9b31m \x93quoted\x94 \x9d0;t\x9c\n", "\x9b31m \x93quoted\x94 \x9d0;t\x9c\n"},
	{"C1 controls in UTF-8 are dropped and start nothing", "\u009b31mred\u009b0m a\u0085b\n", "31mred0m ab\n"},

	{"erase to the end", "abcdef\x1b[3D\x1b[K\n", "abc\n"},
	{"erase to the end, explicitly", "abcdef\x1b[3D\x1b[0KX\n", "abcX\n"},
	{"erase through the cursor", "abcdef\x1b[3D\x1b[1KX\n", "   Xef\n"},
	{"erase the line, keeping the column", "abcdef\x1b[2KX\n", "      X\n"},
	{"CR and erase the line, as rich redraws", "old bar\r\x1b[2Knew\n", "new\n"},
	{"column", "abcdef\x1b[3GX\n", "abXdef\n"},
	{"column 1 by default", "abc\x1b[GX\n", "Xbc\n"},
	{"column past the end", "ab\x1b[5GX\n", "ab  X\n"},
	{"right", "abcdef\r\x1b[2CX\n", "abXdef\n"},
	{"right past the end", "abc\x1b[CX\n", "abc X\n"},
	{"left", "abcdef\x1b[2DX\n", "abcdXf\n"},
	{"left stops at column 0", "ab\x1b[9DX\n", "Xb\n"},
	{"blank columns only as far as dropped bytes pay", "a\x1b[99GX\n", "a     X\n"},
	{"moving past the end writes nothing by itself", "abc\x1b[9C\n", "abc\n"},

	{"UTF-8 overwritten by ASCII", "é\re\n", "e\n"},
	{"ASCII overwritten by UTF-8", "e\ré\n", "é\n"},
	{"wide characters are a column each", "日本語\rab\n", "ab語\n"},
	{"an emoji over ASCII", "abc\r😀\n", "😀bc\n"},
	{"backspace over UTF-8", "naïve\b\b\b\bX\n", "nXïve\n"},
	{"erase after UTF-8", "héllo\x1b[3D\x1b[K\n", "hé\n"},
	{"invalid UTF-8 passes", "caf\xe9 \xff\xfe\n", "caf\xe9 \xff\xfe\n"},
	{"an invalid byte is a column", "\xff\xfeab\rxy\n", "xyab\n"},
	{"an invalid lead byte stays", "\xc3(\n", "\xc3(\n"},
	{"a stray continuation byte below 0xA0 passes", "a\xe2\x82b\n", "a\xe2\x82b\n"},
	{"an unfinished character at the end comes with Flush", "ab\xe2\x82\xac\xe2", "ab€\xe2"},
}

func TestScreen(t *testing.T) {
	for _, tt := range screenTests {
		t.Run(tt.name, func(t *testing.T) {
			if got := screenAllWays(t, []byte(tt.in), inUse); got != tt.want {
				t.Errorf("Screen(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}

// chunking is a way to cut a Screen's input into writes: it returns the
// size of the next write, given how much is left.
type chunking struct {
	name string
	next func(left int) int
}

// chunkings are the ways every test input is also written, which must not
// change what comes out: whole, a byte at a time, every cut in two (for
// short inputs), and random pieces.
func chunkings(n int, seed uint64) []chunking {
	cs := []chunking{
		{"whole", func(left int) int { return left }},
		{"byte by byte", func(int) int { return 1 }},
	}
	if n <= 300 {
		for k := 1; k < n; k++ {
			first := true
			cs = append(cs, chunking{fmt.Sprintf("cut at %d", k), func(left int) int {
				if first {
					first = false
					return k
				}
				return left
			}})
		}
	}
	for i := range uint64(4) {
		r := rand.New(rand.NewPCG(seed, i))
		cs = append(cs, chunking{fmt.Sprintf("random %d/%d", seed, i), func(left int) int {
			return 1 + r.IntN(min(left, 1<<(1+i*3)))
		}})
	}
	return cs
}

// bounds are a Screen's line limit and width, smaller in tests than in
// use so that short inputs reach them.
type bounds struct{ limit, width int }

var inUse = bounds{maxLine, width}

// screenOnce writes in through a Screen with bounds b, in the pieces c
// gives, flushes it and returns what it forwarded.
func screenOnce(t testing.TB, in []byte, b bounds, c chunking) string {
	t.Helper()
	var out bytes.Buffer
	s := NewScreen(&out)
	s.limit, s.width = b.limit, b.width
	for p := in; len(p) > 0; {
		k := c.next(len(p))
		n, err := s.Write(p[:k])
		if n != k || err != nil {
			t.Fatalf("%s: Write = %d, %v; want %d, nil", c.name, n, err, k)
		}
		p = p[k:]
	}
	if err := s.Flush(); err != nil {
		t.Fatalf("%s: Flush: %v", c.name, err)
	}
	return out.String()
}

// screenAllWays returns what a Screen makes of in written whole, and fails
// t if any other chunking makes something else of it.
func screenAllWays(t testing.TB, in []byte, b bounds) string {
	t.Helper()
	cs := chunkings(len(in), 1)
	want := screenOnce(t, in, b, cs[0])
	for _, c := range cs[1:] {
		if got := screenOnce(t, in, b, c); got != want {
			t.Fatalf("written %s: %q; written whole: %q", c.name, got, want)
		}
	}
	return want
}

// TestScreenRecorded runs what real programs wrote through a Screen:
// testdata/screen/README.md says how each was recorded, and each .golden
// beside it is what comes out, for a person to read.
func TestScreenRecorded(t *testing.T) {
	ins, err := filepath.Glob("testdata/screen/*.in")
	if err != nil || len(ins) == 0 {
		t.Fatalf("no recordings: %v", err)
	}
	for _, path := range ins {
		name := strings.TrimSuffix(filepath.Base(path), ".in")
		t.Run(name, func(t *testing.T) {
			in, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			got := screenAllWays(t, in, inUse)
			if strings.ContainsAny(got, "\x1b\r\b") {
				t.Errorf("escape or control characters are left: %q", got)
			}
			terptest.Golden(t, strings.TrimSuffix(path, ".in")+".golden", []byte(got), nil)
		})
	}
}

// A progress bar redrawn 3,000 times reaches the model as one line, not
// 3,000.
func TestScreenLongProgress(t *testing.T) {
	var in strings.Builder
	for i := range 3001 {
		fmt.Fprintf(&in, "\r%3d%%|%-10s| %d/3000 [00:%02d<00:00, 1000.00it/s]", i/30, strings.Repeat("#", i/300), i, i/1000)
	}
	in.WriteString("\ndone\n")
	got := screenAllWays(t, []byte(in.String()), inUse)
	want := "100%|##########| 3000/3000 [00:03<00:00, 1000.00it/s]\ndone\n"
	if got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}

// A line longer than the limit goes out as it stands when the limit is
// reached, so a carriage return after it redraws only what came since,
// and never splits a character.
func TestScreenLineLimit(t *testing.T) {
	tests := []struct{ name, in, want string }{
		{"the part past the limit is redrawn", "abcdefghij\rXY\n", "abcdefghXY\n"},
		{"a character is not split", "aaaaaaa€b\rX\n", "aaaaaaaXb\n"},
		{"an invalid byte is a cell", "aaaaaaa\xe2(b\rX\n", "aaaaaaa\xe2Xb\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := screenAllWays(t, []byte(tt.in), bounds{8, width}); got != tt.want {
				t.Errorf("Screen(%q) with a limit of 8 bytes = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}

// A line longer than the width wraps, and only its last row can be
// redrawn, as on a terminal that wide.
func TestScreenWidth(t *testing.T) {
	tests := []struct{ name, in, want string }{
		{"a carriage return goes to the start of the last row", "abcdefghij\rXY\n", "abcdefghXY\n"},
		{"a full row keeps the cursor", "abcd\rX\n", "Xbcd\n"},
		{"a redraw wraps too", "ab\rXYZWV\rQ\n", "XYZWQ\n"},
		{"the cursor stops at the last column", "ab\x1b[99CX\rY\n", "Yb X\n"},
		{"columns are characters", "日本語日本\r語\n", "日本語日語\n"},
		{"erasing a wrapped line erases its last row", "abcdef\x1b[2KX\n", "abcd  X\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := screenAllWays(t, []byte(tt.in), bounds{maxLine, 4}); got != tt.want {
				t.Errorf("Screen(%q) 4 columns wide = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}

// A line without a newline costs the same memory however long it gets,
// and all of it goes out.
func TestScreenEndlessLine(t *testing.T) {
	chunk := bytes.Repeat([]byte("0123456789abcdef"), 4<<10)
	var out countWriter
	s := NewScreen(&out)
	const total = 16 << 20
	for range total / len(chunk) {
		s.Write(chunk)
	}
	if c := cap(s.line); c > 2*maxLine {
		t.Errorf("the held line grew to %d bytes", c)
	}
	if allocs := testing.AllocsPerRun(100, func() { s.Write(chunk) }); allocs != 0 {
		t.Errorf("a write allocates %v times", allocs)
	}
	s.Flush()
	if want := int64(total + 101*len(chunk)); out.n != want {
		t.Errorf("forwarded %d bytes, want %d", out.n, want)
	}
}

type countWriter struct{ n int64 }

func (w *countWriter) Write(p []byte) (int, error) {
	w.n += int64(len(p))
	return len(p), nil
}

// Flush forwards the line as it stands; what comes after begins a new one.
func TestScreenFlush(t *testing.T) {
	var out bytes.Buffer
	s := NewScreen(&out)
	io.WriteString(s, "50%\r7")
	if err := s.Flush(); err != nil || out.String() != "70%" {
		t.Fatalf("after Flush: %q, %v; want \"70%%\", nil", out.String(), err)
	}
	io.WriteString(s, "\rx\n")
	s.Flush()
	if out.String() != "70%x\n" {
		t.Errorf("after a second Flush: %q, want \"70%%x\\n\"", out.String())
	}
}

// Write fails only when the underlying writer does, and then keeps
// failing the same way.
func TestScreenWriteError(t *testing.T) {
	broken := errors.New("broken pipe")
	s := NewScreen(failWriter{broken})
	if n, err := io.WriteString(s, "held"); n != 4 || err != nil {
		t.Fatalf("Write of a held line = %d, %v; want 4, nil", n, err)
	}
	if _, err := io.WriteString(s, " line\n"); !errors.Is(err, broken) {
		t.Fatalf("Write = %v, want %v", err, broken)
	}
	if _, err := io.WriteString(s, "more"); !errors.Is(err, broken) {
		t.Errorf("a later Write = %v, want %v", err, broken)
	}
	if err := s.Flush(); !errors.Is(err, broken) {
		t.Errorf("Flush = %v, want %v", err, broken)
	}
}

type failWriter struct{ err error }

func (w failWriter) Write([]byte) (int, error) { return 0, w.err }

// FuzzScreen checks what holds for any input: the chunking never changes
// the output, the output is never longer than the input, holds no
// control characters but tab and newline, and is valid UTF-8 whenever the
// input is; with the bounds in use and with tiny ones.
func FuzzScreen(f *testing.F) {
	for _, tt := range screenTests {
		f.Add([]byte(tt.in), uint64(0))
	}
	ins, _ := filepath.Glob("testdata/screen/*.in")
	for _, path := range ins {
		in, err := os.ReadFile(path)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(in, uint64(0))
	}
	f.Fuzz(func(t *testing.T, in []byte, seed uint64) {
		for _, b := range []bounds{inUse, {utf8.UTFMax + int(seed%13), 1 + int(seed/13%7)}} {
			cs := chunkings(len(in), seed)
			want := screenOnce(t, in, b, cs[0])
			for _, c := range []chunking{cs[1], cs[len(cs)-1], cs[len(cs)-2]} {
				if got := screenOnce(t, in, b, c); got != want {
					t.Fatalf("%+v, written %s: %q; written whole: %q", b, c.name, got, want)
				}
			}
			if len(want) > len(in) {
				t.Fatalf("%+v: %d bytes out of %d in: %q", b, len(want), len(in), want)
			}
			if utf8.Valid(in) && !utf8.Valid([]byte(want)) {
				t.Fatalf("%+v: invalid UTF-8 out of valid: %q", b, want)
			}
			for i := 0; i < len(want); {
				r, size := utf8.DecodeRuneInString(want[i:])
				if size == 1 && r == utf8.RuneError && want[i] >= utf8.RuneSelf {
					i++ // an invalid byte, forwarded as it came
					continue
				}
				if r < 0x20 && r != '\t' && r != '\n' || r >= 0x7f && r <= 0x9f {
					t.Fatalf("%+v: control %#x at %d: %q", b, r, i, want)
				}
				i += size
			}
		}
	})
}

// nextSpecial's word-at-a-time tests find exactly the bytes a byte-by-byte
// test would, wherever they are in a word.
func TestNextSpecial(t *testing.T) {
	base := []byte(strings.Repeat("plain\ttext ~ with newlines\n", 3))
	for pos := range base {
		for b := range 256 {
			p := bytes.Clone(base)
			p[pos] = byte(b)
			want := len(p)
			if b < 0x20 && b != '\t' && b != '\n' || b >= del {
				want = pos
			}
			for _, from := range []int{0, pos % 8, pos} {
				if got := nextSpecial(p, from); got != want {
					t.Fatalf("byte %#x at %d, from %d: nextSpecial = %d, want %d", b, pos, from, got, want)
				}
			}
		}
	}
}
