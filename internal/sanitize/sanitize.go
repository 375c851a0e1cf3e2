// Package sanitize makes text from the model or the code safe to show on a
// terminal. Both are untrusted: a model can be talked into printing escape
// sequences, and code can print anything. terp draws its own escape
// sequences (colours, images) around text that has been through here.
// Screen, for the other reader of the code's output, the model, leaves
// of it what a terminal would show.
package sanitize

import (
	"strings"
	"unicode"
)

// Terminal neutralizes text from the model or the code before it reaches a
// terminal: escape sequences could otherwise move the cursor, retitle the
// window, write the clipboard or fake terp's own output. Newlines and tabs
// stay; every other control character is shown as a visible placeholder.
func Terminal(s string) string {
	clean := true
	for _, r := range s {
		if isUnsafe(r) {
			clean = false
			break
		}
	}
	if clean {
		return s
	}
	var b strings.Builder
	for _, r := range s {
		switch {
		case r == 0x1b:
			b.WriteString("^[")
		case isUnsafe(r):
			b.WriteRune('\uFFFD')
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

func isUnsafe(r rune) bool {
	if r == '\n' || r == '\t' {
		return false
	}
	// C0 and C1 controls and DEL; also the bidirectional overrides that can
	// make text read differently from what it is.
	return unicode.IsControl(r) || (r >= 0x202a && r <= 0x202e) || (r >= 0x2066 && r <= 0x2069)
}
