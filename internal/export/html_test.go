package export

import (
	"bytes"
	"image"
	"image/color"
	"image/png"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/terpdev/terp/internal/htmlpage"
)

// The hostile texts a model or its code could write: each must reach the
// page as text.
const (
	hostileScript  = `<script>window.pwned=1</script>`
	hostileOnerror = `<img src=x onerror="window.pwned=2">`
	hostileLink    = `<a href="javascript:window.pwned=3">x</a>`
	hostile        = hostileScript + " " + hostileOnerror + " " + hostileLink
)

// chartPNG is a 640x480 chart: bars on white.
func chartPNG(t testing.TB) []byte {
	t.Helper()
	img := image.NewRGBA(image.Rect(0, 0, 640, 480))
	for y := range 480 {
		for x := range 640 {
			c := color.RGBA{255, 255, 255, 255}
			if bar := x / 80; x%80 > 15 && 480-y < 40*(bar+1) {
				c = color.RGBA{31, 119, 180, 255}
			}
			img.Set(x, y, c)
		}
	}
	var b bytes.Buffer
	if err := png.Encode(&b, img); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// hostileDoc is a conversation of two turns with the hostile texts in
// every field the page shows, and a real chart.
func hostileDoc(t testing.TB) *Doc {
	chart := chartPNG(t)
	badName := "out " + hostileOnerror + ".csv"
	return &Doc{
		ID: "c0ffee", Title: "sales " + hostileScript, Model: "qwen3-32b " + hostileLink, ExecMode: "kernel",
		Created: time.Date(2026, 3, 1, 9, 30, 0, 0, time.UTC),
		Inputs:  []string{"sales.csv", hostileScript + ".csv"},
		Turns: []Turn{{
			Question: "Which month sold most? " + hostile,
			Notes:    []string{"New files uploaded: /work/sales.csv " + hostileOnerror},
			Steps: []Step{{
				Said:   "Let me look. " + hostileLink,
				Code:   "import pandas as pd\n# " + hostileScript + "\ndf = pd.read_csv('sales.csv')  # a long line that a phone must scroll sideways, not the page: " + strings.Repeat("x", 120) + "\nprint('" + hostile + "')\n",
				Stdout: hostile + "\n   month  revenue\n0  2025-01  100\n",
				Stderr: "warning: " + hostileOnerror,
			}, {
				Code:   "df.plot()\nplt.savefig('chart.png')\ndf.to_csv('" + badName + "')",
				Saved:  []string{"chart.png", badName},
				Images: []Image{{Name: "chart.png", Type: "image/png", Data: chart}},
			}},
			Answer: "**December** sold most: `26,450`. " + hostile + "\n\n- one\n- two",
		}, {
			Question: "And the least?",
			Steps:    []Step{{Code: "1/0", ExitCode: 1, Stderr: "ZeroDivisionError: division by zero " + hostileScript}},
			Answer:   "February.",
		}},
		Saved: []string{"chart.png", badName},
	}
}

// TestWriteHTML: the page escapes every hostile text, forbids everything
// with its CSP, embeds the chart as the one data: URI it has and names no
// other URL, and folds each run under its summary.
func TestWriteHTML(t *testing.T) {
	var b bytes.Buffer
	if err := WriteHTML(&b, hostileDoc(t)); err != nil {
		t.Fatal(err)
	}
	page := b.String()
	for _, bad := range []string{"<script", "<img src=x", `href="javascript`, "<a "} {
		if strings.Contains(page, bad) {
			t.Errorf("the page has %q as markup", bad)
		}
	}
	for _, want := range []string{
		`<meta http-equiv="Content-Security-Policy" content="` + htmlpage.CSP + `">`,
		`<meta name="viewport" content="width=device-width, initial-scale=1">`,
		"<title>sales &lt;script&gt;window.pwned=1&lt;/script&gt;</title>",
		"&lt;img src=x onerror=&#34;window.pwned=2&#34;&gt;",
		`<summary>Step 1 · exit 0</summary>`,
		`<summary>Step 2 · exit 0 · saved chart.png, out &lt;img src=x onerror=&#34;window.pwned=2&#34;&gt;.csv</summary>`,
		`<summary class="failed">Step 1 · exit 1</summary>`,
		`<span class="k">import</span>`,
		`<strong>December</strong>`, `<code>26,450</code>`,
		`width="640" height="480"`,
		"<h2>Files the code saved</h2>",
	} {
		if !strings.Contains(page, want) {
			t.Errorf("the page lacks %s", want)
		}
	}
	// The chart twice (in its step, among the files), and no other URL.
	urls := regexp.MustCompile(`(?i)(src|href)="([^"]*)"`).FindAllStringSubmatch(page, -1)
	var images int
	for _, u := range urls {
		switch {
		case strings.HasPrefix(u[2], "data:image/png;base64,"):
			images++
		case u[2] == "data:,": // the empty favicon, so the browser asks for none
		default:
			t.Errorf("the page links %s", u[0])
		}
	}
	if images != 2 {
		t.Errorf("%d images, want the chart twice", images)
	}
	if n := strings.Count(page, "<details>"); n != 3 {
		t.Errorf("%d folded steps, want 3", n)
	}
}

// An image of a type outside the fixed list is named, not embedded, and
// SVG goes in an <img>, where it runs nothing (html/template writes its
// + as &#43;, which the browser reads back).
func TestWriteHTMLImageTypes(t *testing.T) {
	d := &Doc{Turns: []Turn{{Steps: []Step{{Code: "x", Saved: []string{"a.html", "b.svg"}, Images: []Image{
		{Name: "a.html", Type: "text/html", Data: []byte("<script>alert(1)</script>")},
		{Name: "b.svg", Type: "image/svg+xml", Data: []byte(`<svg xmlns="http://www.w3.org/2000/svg"><script>alert(1)</script></svg>`)},
	}}}}}}
	var b bytes.Buffer
	if err := WriteHTML(&b, d); err != nil {
		t.Fatal(err)
	}
	page := b.String()
	if strings.Contains(page, "data:text/html") || !strings.Contains(page, `a.html (not shown: &#34;text/html&#34; is not an image type the page embeds)`) {
		t.Errorf("the HTML file was embedded, or not named:\n%s", page)
	}
	if !strings.Contains(page, `<img src="data:image/svg&#43;xml;base64,`) || strings.Contains(page, "<svg") {
		t.Errorf("the SVG is not an <img> data: URI:\n%s", page)
	}
}

func TestProse(t *testing.T) {
	got := prose("**Bold** and `a*b` and 2*3 and ** and `open\nline two\n\n```python\nx = 1\n```\nafter")
	if len(got) != 3 || got[1].Code != true || got[1].Text != "x = 1" || got[2].Spans[0].Text != "after" {
		t.Fatalf("blocks = %+v", got)
	}
	want := []span{{"b", "Bold"}, {"", " and "}, {"code", "a*b"}, {"", " and 2*3 and ** and `open\nline two"}}
	if len(got[0].Spans) != len(want) {
		t.Fatalf("spans = %+v, want %+v", got[0].Spans, want)
	}
	for i := range want {
		if got[0].Spans[i] != want[i] {
			t.Errorf("span %d = %+v, want %+v", i, got[0].Spans[i], want[i])
		}
	}
}
