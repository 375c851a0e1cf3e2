package tui

import "strings"

// transcript is the scrollable record of the conversation. Entries draw
// themselves once and again only when they change (a streamed token, a
// spinner's tick) or the width does; the transcript keeps the lines and
// shows the window the user scrolled to, following the end unless they
// scrolled away from it.
type transcript struct {
	items         []*item
	width, height int
	lines         []string
	images        []imageSlot // lines count from the transcript's top
	offset        int
	// follow keeps the view at the end as the transcript grows.
	follow bool
}

type item struct {
	e     entry
	b     block
	fresh bool
}

func newTranscript() transcript { return transcript{follow: true} }

// add appends an entry.
func (t *transcript) add(e entry) { t.items = append(t.items, &item{e: e}) }

// touch marks e to be drawn again.
func (t *transcript) touch(e entry) {
	for i := len(t.items) - 1; i >= 0; i-- {
		if t.items[i].e == e {
			t.items[i].fresh = false
			return
		}
	}
}

// touchAll marks every entry to be drawn again, for a new width or a
// toggled fold.
func (t *transcript) touchAll() {
	for _, it := range t.items {
		it.fresh = false
	}
}

// resize sets the size of the window onto the transcript.
func (t *transcript) resize(width, height int) {
	if width != t.width {
		t.touchAll()
	}
	t.width, t.height = width, max(height, 1)
	t.clamp()
}

// refresh draws the entries that changed and lays the lines out again.
func (t *transcript) refresh(rc *renderContext) {
	t.lines, t.images = t.lines[:0], t.images[:0]
	for _, it := range t.items {
		if !it.fresh {
			it.b = it.e.render(rc)
			it.fresh = true
		}
		for _, s := range it.b.images {
			s.line += len(t.lines)
			t.images = append(t.images, s)
		}
		t.lines = append(t.lines, it.b.lines...)
	}
	t.clamp()
}

func (t *transcript) maxOffset() int { return max(len(t.lines)-t.height, 0) }

func (t *transcript) clamp() {
	if t.follow {
		t.offset = t.maxOffset()
	}
	t.offset = min(max(t.offset, 0), t.maxOffset())
}

// scroll moves the window by n lines, down for n > 0. Reaching the end
// follows it again.
func (t *transcript) scroll(n int) {
	t.offset += n
	t.follow = false
	t.clamp()
	t.follow = t.offset == t.maxOffset()
}

// toEnd shows the end of the transcript and follows it.
func (t *transcript) toEnd() {
	t.follow = true
	t.clamp()
}

// view draws the window: exactly height lines. It assumes the transcript
// is drawn at the top of the screen, where iTerm2 and sixel images are
// positioned.
func (t transcript) view() string {
	top := t.offset
	end := min(top+t.height, len(t.lines))
	rows := make([]string, t.height)
	copy(rows, t.lines[top:end])
	for _, s := range t.images {
		first, last := s.line, s.line+s.rows-1
		if last < top || first >= end {
			continue
		}
		switch {
		case s.transmit != "":
			// Kitty: the image goes with its first row on screen, so
			// the placeholders below it always have an image to show.
			r := max(first, top) - top
			rows[r] = s.transmit + rows[r]
		case s.draw != "" && first >= top && last < end:
			// Drawn over blank rows filled to the edge of the screen:
			// a shorter row would be erased to its end after the image.
			blank := strings.Repeat(" ", t.width)
			for r := first; r <= last; r++ {
				rows[r-top] = blank
			}
			rows[last-top] += overlay(s.draw, first-top, s.col)
		}
	}
	return strings.Join(rows, "\n")
}

// atEnd reports whether the window shows the end of the transcript.
func (t transcript) atEnd() bool { return t.offset >= t.maxOffset() }
