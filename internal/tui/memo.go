package tui

// memoKey identifies one rendering of a text at a width.
type memoKey struct {
	kind  string
	text  string
	width int
}

// memo remembers the last renderings of markdown and code. The transcript
// is rebuilt on every tick of a spinner and on every streamed token, and
// glamour and chroma are too slow to run that often on the same text.
type memo struct {
	size  int
	order []memoKey
	lines map[memoKey][]string
}

func newMemo(size int) *memo { return &memo{size: size, lines: map[memoKey][]string{}} }

func (m *memo) get(k memoKey) ([]string, bool) {
	l, ok := m.lines[k]
	return l, ok
}

func (m *memo) put(k memoKey, lines []string) {
	if _, ok := m.lines[k]; !ok {
		m.order = append(m.order, k)
	}
	m.lines[k] = lines
	for len(m.order) > m.size {
		delete(m.lines, m.order[0])
		m.order = m.order[1:]
	}
}
