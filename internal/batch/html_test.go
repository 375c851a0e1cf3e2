package batch

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/terpdev/terp/internal/htmlpage"
)

const hostileAnswer = `41 <script>window.pwned=1</script> <img src=x onerror="window.pwned=2"> <a href="javascript:window.pwned=3">x</a>`

// htmlBatch is two models on four cases, once each: m1 fails c, with a
// hostile answer, and errors on d; m2 passes all but d, unfinished. a's
// and c's runs of m1 saved a chart, downloaded under dir/artifacts.
func htmlBatch(t *testing.T, dir string) (Report, []Run, []Result) {
	t.Helper()
	cases := fourCases()
	cases[2].Question = "What is six times seven? <b>bold</b>"
	for i, sk := range []string{"joins", "charts", "joins", "charts"} {
		cases[i].Skill = sk
	}
	runs := Plan(cases, []string{"m1", "m2"}, "", 1)
	res := results(runs, "pp"+"pp"+"fp"+"e-")
	for i := range res {
		r := &res[i]
		if r.Model == "m1" && (r.ID == "a" || r.ID == "c") {
			p := filepath.Join(dir, "artifacts", r.ID, "m1", "chart.png")
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, []byte("\x89PNG"), 0o644); err != nil {
				t.Fatal(err)
			}
			r.Files = []File{{Path: p, SandboxPath: "/work/chart.png", Bytes: 4}}
		}
		if r.ID == "c" && r.Model == "m1" {
			r.Answer = hostileAnswer
		}
	}
	rep := Report{Name: "eval", File: "cases <i>.jsonl", Started: time.Date(2026, 12, 1, 18, 0, 0, 0, time.UTC), Version: "terp v1", Dir: dir}
	return rep, runs, res
}

// TestWriteHTML: the report escapes the answer, sets its CSP, draws one bar
// per model, gives each case's verdict per model and each failure's
// expectation and reason, and links the artifacts relative to its
// directory, and to nothing else.
func TestWriteHTML(t *testing.T) {
	dir := t.TempDir()
	rep, runs, res := htmlBatch(t, dir)
	var b strings.Builder
	if err := WriteHTML(&b, rep, runs, res); err != nil {
		t.Fatal(err)
	}
	page := b.String()
	for _, bad := range []string{"<script", "<img", `href="javascript`, "<i>", "<b>"} {
		if strings.Contains(page, bad) {
			t.Errorf("the report has %q as markup", bad)
		}
	}
	for _, want := range []string{
		`<meta http-equiv="Content-Security-Policy" content="` + htmlpage.CSP + `">`,
		"<h1>Batch report: cases &lt;i&gt;.jsonl</h1>",
		"4 cases, started 2026-12-01 18:00 UTC, terp v1. 7 of 8 runs finished.",
		"<tr><td>m1</td><td class=\"num\">4</td><td class=\"num\">50.0%</td><td class=\"num\">15.0–85.0%</td><td class=\"num\">2 / 1 / 1</td>",
		// m2 passed 3 of 3 finished runs, m1 2 of 4: too few to tell apart.
		"<li>m2 (43.9–100.0%) and m1 (15.0–85.0%): the 95% intervals overlap, so this run cannot tell them apart; more cases or repeats can.</li>",
		"<tr><th>model</th><th>charts (2)</th><th>joins (2)</th></tr>",
		// charts is b (passed) and d (errored) for m1, joins a (passed) and c (failed).
		"<tr><td>m1</td><td class=\"num\">50.0% (9.5–90.5%)</td><td class=\"num\">50.0% (9.5–90.5%)</td></tr>",
		`<td class="failed">failed</td><td class="passed">passed</td>`, // c
		`<td class="failed">errored</td><td class="none">not run</td>`, // d
		`title="What is six times seven? &lt;b&gt;bold&lt;/b&gt;"`,
		"<h3>c · m1 · <span class=\"failed\">failed</span>",
		`<li>the answer contains &#34;42&#34;</li>`,
		`<li>answer does not contain &#34;42&#34;</li>`,
		"41 &lt;script&gt;window.pwned=1&lt;/script&gt;",
		"HTTP 500 ^[[31m",
		`<a href="artifacts/c/m1/chart.png">chart.png</a>`,
		`<a href="artifacts/a/m1/chart.png">chart.png</a>`,
	} {
		if !strings.Contains(page, want) {
			t.Errorf("the report lacks %s", want)
		}
	}
	if n := strings.Count(page, `<rect class="bar"`); n != 2 {
		t.Errorf("%d bars, want one per model", n)
	}
	if !strings.Contains(page, `<rect class="bar" x="150" y="8" width="130.0" height="24">`) {
		t.Error("m1's bar is not half the chart's length")
	}
	for _, u := range regexp.MustCompile(`(?i)(src|href)="([^"]*)"`).FindAllStringSubmatch(page, -1) {
		if u[2] != "data:," && !strings.HasPrefix(u[2], "artifacts/") {
			t.Errorf("the report links %s", u[0])
		}
	}
}

// A case id with a colon cannot turn a link to its files into a URL with
// a scheme.
func TestWriteHTMLLinkStaysRelative(t *testing.T) {
	got := fileLinks("/r", []File{{Path: "/r/javascript:alert(1)/x y.png", SandboxPath: "/work/x y.png"}})
	if len(got) != 1 || got[0].Href != "./javascript:alert%281%29/x%20y.png" && got[0].Href != "./javascript:alert(1)/x%20y.png" {
		t.Errorf("links = %+v", got)
	}
}
