package tui

import (
	"reflect"
	"strings"
	"testing"

	"github.com/terpdev/terp/internal/agent"
)

func TestTailKeepsWhatATerminalWouldShow(t *testing.T) {
	out := func(s string) agent.OutputDelta { return agent.OutputDelta{Stream: "stdout", Text: s} }
	errs := func(s string) agent.OutputDelta { return agent.OutputDelta{Stream: "stderr", Text: s} }
	line := func(s string) TailLine { return TailLine{Text: s} }
	errLine := func(s string) TailLine { return TailLine{Stderr: true, Text: s} }
	tests := []struct {
		name   string
		deltas []agent.OutputDelta
		n      int
		want   []TailLine
	}{
		{"last lines", []agent.OutputDelta{out("1\n2\n3\n"), out("4\n5\n")}, 3, []TailLine{line("3"), line("4"), line("5")}},
		{"a line in pieces", []agent.OutputDelta{out("hel"), out("lo\nwor"), out("ld")}, 4, []TailLine{line("hello"), line("world")}},
		{"a progress bar redraws its line", []agent.OutputDelta{errs("\r 10%"), errs("\r 50%"), errs("\r100%\n"), out("done\n")}, 4,
			[]TailLine{errLine("100%"), line("done")}},
		{"\\r\\n ends a line, even split", []agent.OutputDelta{out("a\r"), out("\nb\r\n")}, 4, []TailLine{line("a"), line("b")}},
		{"streams keep their own unfinished line", []agent.OutputDelta{out("out "), errs("warning\n"), out("more")}, 4,
			[]TailLine{errLine("warning"), line("out more")}},
		{"a character split between deltas", []agent.OutputDelta{out("caf\xc3"), out("\xa9\n")}, 1, []TailLine{line("café")}},
		{"a character still on its way", []agent.OutputDelta{out("caf\xc3")}, 1, []TailLine{line("caf")}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var tail Tail
			for _, d := range tt.deltas {
				tail.Add(d)
			}
			if got := tail.Last(tt.n); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("Last(%d) = %+v, want %+v", tt.n, got, tt.want)
			}
		})
	}
}

func TestTailIsBounded(t *testing.T) {
	var tail Tail
	for range 1000 {
		tail.Add(agent.OutputDelta{Stream: "stdout", Text: strings.Repeat("x", 5000) + "\n"})
	}
	tail.Add(agent.OutputDelta{Stream: "stdout", Text: strings.Repeat("y", 1<<20)})
	lines := tail.Last(1 << 10)
	if len(lines) > tailLines+1 {
		t.Errorf("the tail holds %d lines", len(lines))
	}
	for _, l := range lines {
		if len(l.Text) > tailWidth {
			t.Errorf("a line of %d bytes is kept", len(l.Text))
		}
	}
	if last := lines[len(lines)-1].Text; !strings.HasPrefix(last, "yyy") {
		t.Errorf("the unfinished line is %.10q…, want the y's", last)
	}
}
