package sandbox

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestCapture(t *testing.T) {
	tests := []struct {
		name   string
		limit  int
		writes []string
		want   string
	}{
		{name: "zero writes", limit: 10, want: ""},
		{name: "empty write", limit: 10, writes: []string{""}, want: ""},
		{name: "under limit", limit: 10, writes: []string{"abc"}, want: "abc"},
		{name: "exact limit", limit: 10, writes: []string{"0123456789"}, want: "0123456789"},
		{name: "exact limit in pieces", limit: 10, writes: []string{"012", "3456", "789"}, want: "0123456789"},
		{
			name: "one byte over", limit: 10, writes: []string{"0123456789X"},
			want: "01234\n[... 1 bytes omitted ...]\n6789X",
		},
		{
			name: "one big write", limit: 10, writes: []string{"abcdefghijKLMNOP"},
			want: "abcde\n[... 6 bytes omitted ...]\nLMNOP",
		},
		{
			name: "small writes wrap the ring", limit: 6, writes: []string{"ab", "cd", "ef", "gh", "ij", "k"},
			want: "abc\n[... 5 bytes omitted ...]\nijk",
		},
		{
			name: "write longer than the tail after the head is full", limit: 6, writes: []string{"abc", "0123456789"},
			want: "abc\n[... 7 bytes omitted ...]\n789",
		},
		{
			name: "odd limit gives the extra byte to the tail", limit: 5, writes: []string{"abcdefgh"},
			want: "ab\n[... 3 bytes omitted ...]\nfgh",
		},
		{
			name: "zero limit only counts", limit: 0, writes: []string{"hello"},
			want: "\n[... 5 bytes omitted ...]\n",
		},
		{
			// Head is "aé" cut after é's first byte: the half character goes.
			name: "two-byte character cut at the head edge", limit: 4, writes: []string{"aé", "----", "xy"},
			want: "a\n[... 6 bytes omitted ...]\nxy",
		},
		{
			// Tail starts with the last byte of "é".
			name: "two-byte character cut at the tail edge", limit: 4, writes: []string{"ab", "----é", "x"},
			want: "ab\n[... 6 bytes omitted ...]\nx",
		},
		{
			// "€" is 3 bytes; the tail keeps only its last two, counted as omitted.
			name: "three-byte character cut at the tail edge", limit: 6, writes: []string{"abc", "---€x"},
			want: "abc\n[... 6 bytes omitted ...]\nx",
		},
		{
			// "😀" is 4 bytes; the tail keeps its last three.
			name: "four-byte character cut at the tail edge", limit: 8, writes: []string{"abcd", "---😀x"},
			want: "abcd\n[... 7 bytes omitted ...]\nx",
		},
		{
			// The head ends with the first three bytes of "😀".
			name: "four-byte character cut at the head edge", limit: 8, writes: []string{"a😀", "----wxyz"},
			want: "a\n[... 8 bytes omitted ...]\nwxyz",
		},
		{
			name: "characters cut at both edges", limit: 8, writes: []string{"é€", "......", "€é"},
			want: "é\n[... 12 bytes omitted ...]\né",
		},
		{
			name: "invalid bytes are replaced", limit: 10, writes: []string{"a\xffb"},
			want: "a\uFFFDb",
		},
		{
			name: "invalid bytes are replaced after a cut", limit: 4, writes: []string{"\xfe\xff", "-----", "\xff\xfe"},
			want: "\uFFFD\n[... 5 bytes omitted ...]\n\uFFFD",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := NewCapture(tt.limit)
			var total int64
			for _, w := range tt.writes {
				n, err := c.Write([]byte(w))
				if err != nil || n != len(w) {
					t.Fatalf("Write(%q) = %d, %v", w, n, err)
				}
				total += int64(len(w))
			}
			if got := c.String(); got != tt.want {
				t.Errorf("String() = %q, want %q", got, tt.want)
			}
			if !utf8.ValidString(c.String()) {
				t.Errorf("String() is not valid UTF-8")
			}
			if c.Total() != total {
				t.Errorf("Total() = %d, want %d", c.Total(), total)
			}
		})
	}
}

// TestCaptureMatchesNaive compares Capture with the obvious implementation
// (keep everything, then slice) over random write sizes.
func TestCaptureMatchesNaive(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for round := range 500 {
		limit := r.IntN(40)
		c := NewCapture(limit)
		var all bytes.Buffer
		for range r.IntN(20) {
			p := make([]byte, r.IntN(30))
			for i := range p {
				p[i] = byte('a' + r.IntN(26))
			}
			c.Write(p)
			all.Write(p)
		}
		want := all.String()
		if all.Len() > limit {
			h := limit / 2
			tl := limit - h
			want = want[:h] + fmt.Sprintf("\n[... %d bytes omitted ...]\n", all.Len()-limit) + want[all.Len()-tl:]
		}
		if got := c.String(); got != want {
			t.Fatalf("round %d, limit %d: got %q, want %q", round, limit, got, want)
		}
	}
}

func TestCaptureMemoryIsFlat(t *testing.T) {
	c := NewCapture(1 << 10)
	chunk := bytes.Repeat([]byte("x"), 32<<10)
	allocs := testing.AllocsPerRun(100, func() { c.Write(chunk) })
	if allocs != 0 {
		t.Errorf("Write allocates %.1f times per call, want 0", allocs)
	}
	if got := len(c.String()); got > 1<<10+64 {
		t.Errorf("String() is %d bytes, want at most the limit plus the marker", got)
	}
	if !strings.Contains(c.String(), "bytes omitted") {
		t.Errorf("String() has no omission marker")
	}
}

// BenchmarkCapture writes 100 MB through a Capture in 32 KiB chunks, the size
// os/exec copies a command's output with, and reports allocations (there
// should be none per write).
func BenchmarkCapture(b *testing.B) {
	chunk := bytes.Repeat([]byte("0123456789abcdef"), 2<<10)
	const total = 100 << 20
	b.ReportAllocs()
	b.SetBytes(total)
	for b.Loop() {
		c := NewCapture(DefaultMaxOutput)
		for written := 0; written < total; written += len(chunk) {
			c.Write(chunk)
		}
		if c.Total() != total {
			b.Fatalf("Total() = %d", c.Total())
		}
	}
}

// Omitted recognises the line String writes where it cut, and only that
// line: output that merely mentions it stays output.
func TestOmitted(t *testing.T) {
	c := NewCapture(10)
	_, _ = c.Write([]byte(strings.Repeat("x", 1000)))
	lines := strings.Split(c.String(), "\n")
	if n, ok := Omitted(lines[1]); !ok || n != 990 {
		t.Errorf("Omitted(%q) = %d, %v; want 990, true", lines[1], n, ok)
	}
	for _, l := range []string{"", "xxxxx", "[... 12 bytes omitted ...] and more", " [... 12 bytes omitted ...]", "[... -1 bytes omitted ...]x"} {
		if _, ok := Omitted(l); ok {
			t.Errorf("Omitted(%q) = true; want false", l)
		}
	}
}
