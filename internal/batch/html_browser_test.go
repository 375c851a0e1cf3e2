package batch

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/terpdev/terp/internal/terptest/browsertest"
)

// TestHTMLInBrowser opens a batch report in Chromium, as a phone: it logs
// no error and requests nothing, its chart has a bar per model, the failed
// case's reason and its hostile answer show as text, and the link to the
// artifact is relative and reaches the file.
func TestHTMLInBrowser(t *testing.T) {
	dir := t.TempDir()
	rep, runs, res := htmlBatch(t, dir)
	path := filepath.Join(dir, "report.html")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := WriteHTML(f, rep, runs, res); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	p := browsertest.Open(t, path, browsertest.Options{Width: 390, Height: 844, Mobile: true, Scale: 2})

	if n := browsertest.Eval[int](t, p, `document.querySelectorAll("svg.chart rect.bar").length`); n != 2 {
		t.Errorf("%d bars in the chart, want one per model", n)
	}
	if w := browsertest.Eval[float64](t, p, `document.querySelector("svg.chart").getBoundingClientRect().width`); w <= 0 {
		t.Error("the chart is not drawn")
	}
	text := browsertest.Eval[string](t, p, `document.body.innerText`)
	for _, want := range []string{`answer does not contain "42"`, hostileAnswer, "HTTP 500"} {
		if !strings.Contains(text, want) {
			t.Errorf("the report does not show %q", want)
		}
	}
	if v := browsertest.Eval[string](t, p, `typeof window.pwned`); v != "undefined" {
		t.Errorf("window.pwned is %s: the answer ran", v)
	}
	links := browsertest.Eval[[][2]string](t, p, `[...document.querySelectorAll("section.failure a")].map(a => [a.getAttribute("href"), a.href])`)
	if len(links) != 1 {
		t.Fatalf("the failed case links %v, want its chart", links)
	}
	href, resolved := links[0][0], links[0][1]
	if href != "artifacts/c/m1/chart.png" {
		t.Errorf("the artifact's href is %q, want artifacts/c/m1/chart.png, relative to the report", href)
	}
	want := filepath.Join(dir, "artifacts", "c", "m1", "chart.png")
	if resolved != "file://"+filepath.ToSlash(want) {
		t.Errorf("the link resolves to %s, want the file %s", resolved, want)
	}
	if _, err := os.Stat(want); err != nil {
		t.Errorf("the linked file: %v", err)
	}
	if width := browsertest.Eval[int](t, p, `document.documentElement.scrollWidth`); width > 390+2 {
		t.Errorf("the report is %d CSS pixels wide: it does not fit a 390-pixel phone", width)
	}
	p.Screenshot(t, "batch-report-phone.png")
	for _, pr := range p.Problems() {
		t.Errorf("the browser reported: %s", pr)
	}
	for _, u := range p.ForeignRequests() {
		t.Errorf("the report requested %s", u)
	}
}
