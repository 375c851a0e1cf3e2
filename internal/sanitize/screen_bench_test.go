package sanitize

import (
	"bytes"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/terpdev/terp/internal/sandbox"
)

// screenInputs are 16 MiB of each kind of output a run prints: plain
// lines of 80 bytes, the most common; lines of Cyrillic and CJK text;
// coloured lines, as tracebacks and ls --color print them; a progress
// bar redrawn with carriage returns, ending a line every 100 redraws; and
// the worst case for the row, a full row of 1,024 columns and then cursor
// jumps across it and erases through the cursor, end to end.
func screenInputs() []struct {
	name string
	data []byte
} {
	const size = 16 << 20
	fill := func(line func(i int) string) []byte {
		var b bytes.Buffer
		for i := 0; b.Len() < size; i++ {
			b.WriteString(line(i))
		}
		return b.Bytes()[:size]
	}
	return []struct {
		name string
		data []byte
	}{
		{"plain", fill(func(i int) string {
			return fmt.Sprintf("%-79s\n", fmt.Sprintf("2024-%02d  revenue %9d  units %7d  region north-east  ok", i%12+1, i*37, i))
		})},
		{"unicode", fill(func(i int) string {
			return fmt.Sprintf("выручка за месяц %6d — 收入 %6d 元, рост ↑ %3d%%\n", i*37, i, i%100)
		})},
		{"colour", fill(func(i int) string {
			return fmt.Sprintf("  File \x1b[35m\"/work/main.py\"\x1b[0m, line \x1b[35m%d\x1b[0m, in \x1b[35m<module>\x1b[0m\n", i)
		})},
		{"jumps", fill(func(i int) string {
			if i == 0 {
				return strings.Repeat("é", width)
			}
			return "\x1b[1Gx\x1b[1024G\x1b[1K"
		})},
		{"progress", fill(func(i int) string {
			s := fmt.Sprintf("\r%3d%%|%-10s| %d/1000 [00:01<00:02, 300.00it/s]", i%100, strings.Repeat("#", i%100/10), i%1000)
			if i%100 == 99 {
				s += "\n"
			}
			return s
		})},
	}
}

// BenchmarkScreen puts Screen beside its peer, the bare copy of the same
// output in 64 KiB reads (a pipe's buffer) into io.Discard, and beside a
// sandbox.Capture alone, the pipeline it joins.
func BenchmarkScreen(b *testing.B) {
	for _, in := range screenInputs() {
		run := func(name string, newWriter func() (io.Writer, func())) {
			b.Run(in.name+"/"+name, func(b *testing.B) {
				buf := make([]byte, 64<<10)
				b.ReportAllocs()
				b.SetBytes(int64(len(in.data)))
				for b.Loop() {
					w, done := newWriter()
					// The wrappers hide WriterTo and ReaderFrom, so every
					// variant reads 64 KiB at a time into buf and writes it.
					if _, err := io.CopyBuffer(struct{ io.Writer }{w}, struct{ io.Reader }{bytes.NewReader(in.data)}, buf); err != nil {
						b.Fatal(err)
					}
					done()
				}
			})
		}
		run("copy", func() (io.Writer, func()) { return io.Discard, func() {} })
		run("screen", func() (io.Writer, func()) {
			s := NewScreen(io.Discard)
			return s, func() { s.Flush() }
		})
		if in.name != "plain" {
			continue
		}
		run("capture", func() (io.Writer, func()) { return sandbox.NewCapture(sandbox.DefaultMaxOutput), func() {} })
		run("screen+capture", func() (io.Writer, func()) {
			s := NewScreen(sandbox.NewCapture(sandbox.DefaultMaxOutput))
			return s, func() { s.Flush() }
		})
	}
}
