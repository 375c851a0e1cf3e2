package export

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/terpdev/terp/internal/terptest/browsertest"
)

// TestHTMLInBrowser opens the page of a hostile conversation in Chromium,
// as a phone (390x844): it loads nothing but itself and its data: URIs,
// logs no error, runs none of the hostile texts and shows them as text,
// decodes the chart at its size and fits the phone's width (code scrolls
// inside its block). Once with the page's CSP, once without it, so that
// the escaping is shown to hold on its own. The screenshot of the unfolded
// page is a test artifact.
func TestHTMLInBrowser(t *testing.T) {
	path := filepath.Join(t.TempDir(), "conversation.html")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := WriteHTML(f, hostileDoc(t)); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name      string
		bypassCSP bool
	}{{"with CSP", false}, {"escaping alone", true}} {
		t.Run(tc.name, func(t *testing.T) {
			p := browsertest.Open(t, path, browsertest.Options{Width: 390, Height: 844, Mobile: true, Scale: 2, BypassCSP: tc.bypassCSP})
			// Unfold the runs, so that the text checks and the
			// screenshot see the code, its output and the chart.
			browsertest.Eval[int](t, p, `document.querySelectorAll("details").forEach(d => d.open = true), 0`)
			if n := browsertest.Eval[int](t, p, `Promise.all([...document.images].map(i => i.decode())).then(a => a.length)`); n != 2 {
				t.Errorf("%d images decoded, want the chart twice", n)
			}
			sizes := browsertest.Eval[[][2]int](t, p, `[...document.images].map(i => [i.naturalWidth, i.naturalHeight])`)
			for i, s := range sizes {
				if s != [2]int{640, 480} {
					t.Errorf("image %d decoded at %dx%d, want 640x480", i, s[0], s[1])
				}
			}
			if v := browsertest.Eval[string](t, p, `typeof window.pwned`); v != "undefined" {
				t.Errorf("window.pwned is %s: a hostile text ran", v)
			}
			if n := browsertest.Eval[int](t, p, `document.querySelectorAll("script, [onerror], a, iframe, object, embed").length`); n != 0 {
				t.Errorf("%d script, link or handler elements in the page, want none", n)
			}
			text := browsertest.Eval[string](t, p, `document.body.innerText`)
			for _, want := range []string{hostileScript, hostileOnerror, hostileLink, "Which month sold most? " + hostile, "print('" + hostile + "')", "ZeroDivisionError", "December sold most", "Files the code saved"} {
				if !strings.Contains(text, want) {
					t.Errorf("the page does not show %q as text", want)
				}
			}
			width := browsertest.Eval[int](t, p, `document.documentElement.scrollWidth`)
			if width > 390+2 {
				t.Errorf("the page is %d CSS pixels wide: it does not fit a 390-pixel phone", width)
			}
			if n := browsertest.Eval[int](t, p, `[...document.querySelectorAll("pre")].filter(e => e.scrollWidth > e.clientWidth).length`); n == 0 {
				t.Error("no code block scrolls sideways: the long line should")
			}
			if !tc.bypassCSP {
				img := p.Screenshot(t, "export-conversation-phone.png")
				if w := img.Bounds().Dx(); w != 390*2 {
					t.Errorf("the screenshot is %d pixels wide, want %d", w, 390*2)
				}
			}
			for _, pr := range p.Problems() {
				t.Errorf("the browser reported: %s", pr)
			}
			for _, u := range p.ForeignRequests() {
				t.Errorf("the page requested %s", u)
			}
			if p.Requests() == 0 {
				t.Error("no request recorded at all, not even the page's: the recording is broken")
			}
		})
	}
}
