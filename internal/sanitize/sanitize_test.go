package sanitize

import "testing"

func TestTerminal(t *testing.T) {
	tests := []struct{ name, in, want string }{
		{"plain text is kept", "revenue: 214,900\n\tup 14%", "revenue: 214,900\n\tup 14%"},
		{"unicode is kept", "café ▀ 📈", "café ▀ 📈"},
		{"CSI clear screen", "\x1b[2Jdone", "^[[2Jdone"},
		{"OSC 52 clipboard write", "\x1b]52;c;cHduZWQ=\x07x", "^[]52;c;cHduZWQ=\uFFFDx"},
		{"title change with ST", "\x1b]0;owned\x1b\\", "^[]0;owned^[\\"},
		{"C1 CSI", "\u009b31m", "\uFFFD31m"},
		{"carriage return cannot overwrite the line", "ok\rFAIL", "ok\uFFFDFAIL"},
		{"backspace and DEL", "a\bb\x7f", "a\uFFFDb\uFFFD"},
		{"bidi override", "abc\u202edef", "abc\uFFFDdef"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Terminal(tt.in); got != tt.want {
				t.Errorf("Terminal(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}
