package tui

import (
	"strings"
	"testing"

	"github.com/charmbracelet/x/ansi"
	"github.com/charmbracelet/x/ansi/kitty"
	"github.com/muesli/termenv"
)

func TestDetectProtocol(t *testing.T) {
	tests := []struct {
		setting string
		env     map[string]string
		want    Protocol
	}{
		{"auto", map[string]string{"TERM": "xterm-kitty"}, Kitty},
		{"auto", map[string]string{"KITTY_WINDOW_ID": "1", "TERM": "xterm-256color"}, Kitty},
		{"auto", map[string]string{"TERM_PROGRAM": "WezTerm"}, Kitty},
		{"auto", map[string]string{"TERM_PROGRAM": "ghostty"}, Kitty},
		{"auto", map[string]string{"TERM_PROGRAM": "iTerm.app"}, ITerm2},
		{"auto", map[string]string{"TERM": "xterm-256color"}, HalfBlock},
		{"", map[string]string{"TERM": "xterm-256color"}, HalfBlock},
		{"auto", map[string]string{"TERM": "xterm-kitty", "TMUX": "/tmp/tmux-0/default,1,0"}, HalfBlock},
		{"auto", map[string]string{"TERM": "tmux-256color", "TERM_PROGRAM": "iTerm.app"}, HalfBlock},
		{"sixel", map[string]string{"TERM": "xterm-kitty"}, Sixel},
		{"kitty", map[string]string{"TMUX": "x"}, Kitty},
		{"none", nil, NoImages},
	}
	for _, tt := range tests {
		got := DetectProtocol(tt.setting, func(k string) string { return tt.env[k] })
		if got != tt.want {
			t.Errorf("DetectProtocol(%q, %v) = %q, want %q", tt.setting, tt.env, got, tt.want)
		}
	}
}

func TestFit(t *testing.T) {
	tests := []struct {
		w, h, maxCols, maxRows int
		want                   imageSize
	}{
		{800, 200, 76, 14, imageSize{76, 10}}, // wide: as wide as allowed
		{640, 480, 76, 14, imageSize{37, 14}}, // tall: as tall as allowed
		{100, 100, 10, 100, imageSize{10, 5}}, // cells are twice as tall as wide
		{10, 1000, 76, 14, imageSize{1, 14}},  // never narrower than a cell
		{800, 200, 0, 14, imageSize{}},        // no room
		{0, 200, 76, 14, imageSize{}},         // no image
		{1000, 10, 76, 14, imageSize{76, 1}},  // never shorter than a row
		{600, 300, 56, 14, imageSize{cols: 56, rows: 14}},
	}
	for _, tt := range tests {
		if got := fit(tt.w, tt.h, tt.maxCols, tt.maxRows); got != tt.want {
			t.Errorf("fit(%d×%d in %d×%d) = %v, want %v", tt.w, tt.h, tt.maxCols, tt.maxRows, got, tt.want)
		}
	}
}

// chartModel shows a finished turn with a chart drawn with protocol, in a
// terminal small enough that the chart can scroll out of view.
func chartModel(t *testing.T, protocol Protocol) Model {
	t.Helper()
	dir := t.TempDir()
	t.Chdir(dir)
	writeChart(t, "chart.png")
	m := newTestModel(newScripted(chartTurn("chart.png")), 80, 24, termenv.TrueColor, protocol)
	return drive(t, m, askKeys("Plot revenue")...)
}

// scrollUntil scrolls up a line at a time until cond holds for the
// transcript, and reports whether it ever did.
func scrollUntil(t *testing.T, m *Model, cond func(view string) bool) bool {
	t.Helper()
	for range 60 {
		if cond(m.transcript.view()) {
			return true
		}
		m.transcript.scroll(-1)
	}
	return false
}

func TestKittyPlaceholders(t *testing.T) {
	m := chartModel(t, Kitty)
	placeholder := string(kitty.Placeholder)
	view := m.transcript.view()
	if !strings.Contains(view, placeholder) {
		t.Fatalf("no kitty placeholders on screen:\n%s", ansi.Strip(view))
	}
	// The image data goes with the first row of the image on screen, and
	// only there.
	check := func(view string) {
		t.Helper()
		rows := strings.Split(view, "\n")
		first := -1
		for i, r := range rows {
			if strings.Contains(r, placeholder) {
				first = i
				break
			}
		}
		for i, r := range rows {
			has := strings.Contains(r, "\x1b_Ga=t,f=100")
			if has != (i == first) {
				t.Errorf("row %d: transmits the image = %v (first image row %d)", i, has, first)
			}
		}
		if first >= 0 && !strings.Contains(rows[first], "a=p,U=1") {
			t.Errorf("the first image row places no virtual image: %q", rows[first][:min(80, len(rows[first]))])
		}
	}
	check(view)
	// With the top of the image scrolled away (the help below makes room
	// to scroll), the data moves down with the first row still on screen.
	m = drive(t, m, askKeys("/help")...)
	tr := &m.transcript
	tr.follow = false
	tr.offset = tr.images[0].line + 2
	tr.clamp()
	if tr.offset != tr.images[0].line+2 {
		t.Fatalf("cannot scroll the image's top away: offset %d", tr.offset)
	}
	check(tr.view())
}

func TestOverlayProtocolsDrawOnlyWholeImages(t *testing.T) {
	for _, protocol := range []Protocol{ITerm2, Sixel} {
		t.Run(string(protocol), func(t *testing.T) {
			m := chartModel(t, protocol)
			marker := map[Protocol]string{ITerm2: "\x1b]1337;File=", Sixel: "\x1bP0;1q"}[protocol]
			whole := func(v string) bool {
				s := ansi.Strip(v)
				return strings.Contains(s, "▣ /work/chart.png") && strings.Contains(s, "↳ chart.png")
			}
			if !scrollUntil(t, &m, whole) {
				t.Fatal("the chart never showed whole")
			}
			view := m.transcript.view()
			if strings.Count(view, marker) != 1 {
				t.Fatalf("the whole chart is drawn %d times, want once", strings.Count(view, marker))
			}
			// Drawn at its own top row, from its last one, and the
			// cursor put back.
			rows := strings.Split(view, "\n")
			var top, at int
			for i, r := range rows {
				if strings.Contains(ansi.Strip(r), "▣ /work/chart.png") {
					top = i + 1
				}
				if strings.Contains(r, marker) {
					at = i
				}
			}
			want := ansi.SaveCursor + ansi.CursorPosition(5, top+1) + marker
			if !strings.Contains(rows[at], want) || !strings.HasSuffix(rows[at], ansi.RestoreCursor) {
				t.Errorf("row %d does not draw the image at row %d column 5 and restore the cursor: %q", at, top, rows[at][:min(120, len(rows[at]))])
			}
			if strings.Contains(ansi.Strip(strings.Join(rows[top:at+1], "")), "▀") {
				t.Error("the half-block preview is drawn under the image")
			}
			// With its last row off the screen, the image is the preview
			// again.
			tr := &m.transcript
			tr.follow = false
			tr.offset = max(tr.images[0].line+tr.images[0].rows-tr.height-1, 0)
			tr.clamp()
			if v := m.transcript.view(); strings.Contains(v, marker) || !strings.Contains(v, "▀") {
				t.Error("a chart cut by the edge of the screen is drawn with the protocol, or not previewed")
			}
		})
	}
}
