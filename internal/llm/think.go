package llm

import "strings"

const (
	thinkOpen  = "<think>"
	thinkClose = "</think>"
)

// segmentKind tells the assembler what a run of content text is.
type segmentKind int

const (
	segContent segmentKind = iota
	segReasoning
	// segWasReasoning says that the content seen so far was reasoning: a
	// </think> arrived without a <think>, because the chat template put the
	// <think> in the prompt (Qwen3 thinking models, DeepSeek-R1).
	segWasReasoning
)

type segment struct {
	kind segmentKind
	text string
}

// thinkSplitter separates <think> blocks from the content of a reply that
// arrives in pieces. A tag may be split across pieces ("<thi" + "nk>"), so a
// piece's tail that could begin a tag is held back until the next piece shows
// whether it does.
type thinkSplitter struct {
	inside bool
	// seen is set once any think tag was seen; only the first tag can tell
	// that the reply began inside a think block.
	seen bool
	held string
}

// feed passes the runs of text in piece to emit, in order.
func (s *thinkSplitter) feed(piece string, emit func(segment)) {
	buf := piece
	if s.held != "" {
		buf = s.held + piece
		s.held = ""
	}
	for buf != "" {
		if s.inside {
			i := strings.Index(buf, thinkClose)
			if i < 0 {
				s.hold(buf, segReasoning, emit, thinkClose)
				return
			}
			emitText(emit, segReasoning, buf[:i])
			buf = buf[i+len(thinkClose):]
			s.inside = false
			continue
		}
		open, closing := strings.Index(buf, thinkOpen), strings.Index(buf, thinkClose)
		switch {
		case closing >= 0 && (open < 0 || closing < open):
			if s.seen {
				// A stray </think> after a complete block: drop the tag.
				emitText(emit, segContent, buf[:closing])
			} else {
				emit(segment{kind: segWasReasoning})
				emitText(emit, segReasoning, buf[:closing])
			}
			s.seen = true
			buf = buf[closing+len(thinkClose):]
		case open >= 0:
			emitText(emit, segContent, buf[:open])
			buf = buf[open+len(thinkOpen):]
			s.inside, s.seen = true, true
		default:
			s.hold(buf, segContent, emit, thinkOpen, thinkClose)
			return
		}
	}
}

// hold emits buf except for a tail that could be the start of one of tags,
// which it keeps for the next piece.
func (s *thinkSplitter) hold(buf string, kind segmentKind, emit func(segment), tags ...string) {
	keep := 0
	for _, tag := range tags {
		keep = max(keep, partialSuffix(buf, tag))
	}
	emitText(emit, kind, buf[:len(buf)-keep])
	s.held = buf[len(buf)-keep:]
}

// flush emits text held back at the end of the reply: it was no tag after all.
func (s *thinkSplitter) flush(emit func(segment)) {
	kind := segContent
	if s.inside {
		kind = segReasoning
	}
	emitText(emit, kind, s.held)
	s.held = ""
}

func emitText(emit func(segment), kind segmentKind, text string) {
	if text != "" {
		emit(segment{kind: kind, text: text})
	}
}

// partialSuffix returns the length of the longest end of s that is a proper
// beginning of tag.
func partialSuffix(s, tag string) int {
	for n := min(len(s), len(tag)-1); n > 0; n-- {
		if strings.HasSuffix(s, tag[:n]) {
			return n
		}
	}
	return 0
}
