package llm

import "testing"

// However a reply's content is cut into pieces, the think blocks come out
// the same: every cut, and one character at a time.
func TestThinkSplitting(t *testing.T) {
	tests := []struct {
		name, text         string
		content, reasoning string
	}{
		{"no tags", "Just an answer.", "Just an answer.", ""},
		{"think block first", "<think>\nplan\n</think>\n\nanswer", "answer", "plan"},
		{"only a closing tag", "plan\n</think>\n\nanswer", "answer", "plan"},
		{"unclosed block", "<think>still thinking", "", "still thinking"},
		{"text around a block", "A <think>b</think> C", "A  C", "b"},
		{"a lone < is text", "x < y and a <b> tag", "x < y and a <b> tag", ""},
		{"almost a tag at the end", "compare a <thin", "compare a <thin", ""},
		{"stray closing tag after a block", "<think>a</think>b</think>c", "bc", "a"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			check := func(how string, pieces []string) {
				t.Helper()
				var a assembler
				for _, p := range pieces {
					a.think.feed(p, a.segment)
				}
				r := a.response()
				if r.ReasoningAsAnswer {
					r.Content, r.Reasoning = "", r.Content
				}
				if r.Content != tt.content || r.Reasoning != tt.reasoning {
					t.Errorf("%s %q: content %q, reasoning %q; want %q, %q", how, pieces, r.Content, r.Reasoning, tt.content, tt.reasoning)
				}
			}
			check("whole", []string{tt.text})
			for i := 1; i < len(tt.text); i++ {
				check("cut", []string{tt.text[:i], tt.text[i:]})
			}
			var chars []string
			for _, r := range tt.text {
				chars = append(chars, string(r))
			}
			check("by character", chars)
		})
	}
}

func TestPartialSuffix(t *testing.T) {
	tests := []struct {
		s, tag string
		want   int
	}{
		{"abc<", thinkOpen, 1},
		{"abc<thin", thinkOpen, 5},
		{"abc<think", thinkOpen, 6},
		{"abc<think>", thinkOpen, 0},
		{"abc</", thinkClose, 2},
		{"abc", thinkClose, 0},
		{"", thinkOpen, 0},
	}
	for _, tt := range tests {
		if got := partialSuffix(tt.s, tt.tag); got != tt.want {
			t.Errorf("partialSuffix(%q, %q) = %d, want %d", tt.s, tt.tag, got, tt.want)
		}
	}
}
