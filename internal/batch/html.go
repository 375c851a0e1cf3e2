package batch

import (
	"bytes"
	"cmp"
	"fmt"
	"html/template"
	"io"
	"net/url"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/terpdev/terp/internal/sanitize"
)

// htmlCSP is the report's Content-Security-Policy: no script, no styles
// but its own, images only from data: URIs. The links to the artifacts are
// navigation, which it does not govern. The conversation page of package
// export has the same policy; the line is repeated rather than shared, as
// the two pages share nothing else.
const htmlCSP = "default-src 'none'; img-src data:; style-src 'unsafe-inline'; base-uri 'none'; form-action 'none'"

// WriteHTML writes a batch's report as one web page that needs nothing
// else, for a CI artifact or a browser: a bar chart of each model's pass@1
// (an inline SVG, no script), the Markdown report's table of models, a
// table of every case's verdict per model, each run that did not pass with
// its answer against its expectations, and links to the files the runs
// saved, relative to rep.Dir. Text from answers and reasons goes through
// html/template and stays text.
func WriteHTML(w io.Writer, rep Report, runs []Run, results []Result) error {
	stats := Summarize(runs, results)
	repeat := 1
	for _, s := range stats {
		repeat = max(repeat, s.Repeat)
	}
	p := htmlReport{Title: "Batch report: " + rep.File, CSP: htmlCSP, CSS: template.CSS(reportCSS), Repeat: repeat, K: strconv.Itoa(repeat)}

	var caseIDs []string
	caseOf := map[string]*Case{}
	for _, run := range runs {
		if caseOf[run.Case.ID] == nil {
			caseIDs = append(caseIDs, run.Case.ID)
			caseOf[run.Case.ID] = run.Case
		}
	}
	intro := fmt.Sprintf("%d cases", len(caseIDs))
	if repeat > 1 {
		intro += fmt.Sprintf(", %d runs each", repeat)
	}
	intro += ", started " + rep.Started.UTC().Format("2006-01-02 15:04 UTC")
	if rep.Version != "" {
		intro += ", " + rep.Version
	}
	p.Intro = intro + fmt.Sprintf(". %d of %d runs finished.", len(results), len(runs))

	for _, s := range stats {
		m := htmlModel{Name: s.Model, Cases: s.Cases, PassAt1: percent(s.PassAt1, s), PassAtK: percent(s.PassAtK, s), PassAllK: percent(s.PassAllK, s),
			Runs: fmt.Sprintf("%d / %d / %d", s.Passed, s.Failed, s.Errored), Steps: "-", Tokens: "-", Time: "-"}
		if s.Finished() > 0 {
			m.Steps = strconv.FormatFloat(s.MedianSteps, 'f', -1, 64)
			m.Tokens = thousands(int64(s.MedianTokens + 0.5))
			m.Time = s.MedianTime.Round(100 * time.Millisecond).String()
		}
		p.Models = append(p.Models, m)
	}
	p.Chart = passChart(stats)

	bySeq := map[int]Result{}
	for _, r := range results {
		bySeq[r.seq] = r
	}
	type key struct{ id, model string }
	verdicts := map[key][]Status{} // "" for a run that did not finish
	for _, run := range runs {
		r, ok := bySeq[run.Seq]
		st := Status("")
		if ok {
			st = r.Status
		}
		verdicts[key{run.Case.ID, run.Model}] = append(verdicts[key{run.Case.ID, run.Model}], st)
	}
	for _, id := range caseIDs {
		row := htmlCase{ID: id, Question: clipText(sanitize.Terminal(caseOf[id].Question), 200)}
		for _, s := range stats {
			row.Cells = append(row.Cells, verdictCell(verdicts[key{id, s.Model}]))
		}
		p.Cases = append(p.Cases, row)
	}

	sorted := append([]Result(nil), results...)
	Sort(sorted)
	runOf := map[int]Run{}
	for _, run := range runs {
		runOf[run.Seq] = run
	}
	for _, r := range sorted {
		label := r.ID + " · " + r.Model
		if repeat > 1 {
			label += fmt.Sprintf(" · run %d", r.Run)
		}
		files := fileLinks(rep.Dir, r.Files)
		if len(files) > 0 {
			p.Artifacts = append(p.Artifacts, htmlArtifacts{Label: label, Files: files})
		}
		if r.Status == Passed {
			continue
		}
		bad := htmlFailure{Label: label, Status: string(r.Status), StopReason: r.StopReason, Answer: clipText(sanitize.Terminal(r.Answer), 4000), Files: files}
		for _, reason := range r.Reasons {
			bad.Reasons = append(bad.Reasons, sanitize.Terminal(reason))
		}
		if run, ok := runOf[r.seq]; ok {
			bad.Question = sanitize.Terminal(run.Case.Question)
			bad.Expect = describe(run.Case.Expect)
		}
		p.NotPassed = append(p.NotPassed, bad)
	}

	var b bytes.Buffer
	if err := reportTemplate.Execute(&b, p); err != nil {
		return err
	}
	_, err := w.Write(b.Bytes())
	return err
}

type htmlReport struct {
	Title, Intro string
	CSP          string
	CSS          template.CSS
	Repeat       int
	K            string
	Chart        chart
	Models       []htmlModel
	Cases        []htmlCase
	NotPassed    []htmlFailure
	Artifacts    []htmlArtifacts
}

type htmlModel struct {
	Name                             string
	Cases                            int
	PassAt1, PassAtK, PassAllK, Runs string
	Steps, Tokens, Time              string
}

type htmlCase struct {
	ID, Question string
	Cells        []htmlCell
}

// htmlCell is a case's verdict for one model: Class passed, failed (no run
// passed), mixed or none (no run finished).
type htmlCell struct{ Text, Class string }

type htmlFailure struct {
	Label, Status, StopReason string
	Question, Answer          string
	Expect, Reasons           []string
	Files                     []htmlLink
}

type htmlArtifacts struct {
	Label string
	Files []htmlLink
}

// htmlLink is a file a run saved: Href is "" when it was not downloaded.
type htmlLink struct{ Name, Href string }

// verdictCell sums up a case's runs with one model: "passed" for one run,
// "2 of 3 passed" for several.
func verdictCell(sts []Status) htmlCell {
	var passed, finished int
	for _, s := range sts {
		if s != "" {
			finished++
		}
		if s == Passed {
			passed++
		}
	}
	c := htmlCell{Class: "mixed"}
	switch {
	case finished == 0:
		return htmlCell{Text: "not run", Class: "none"}
	case passed == len(sts):
		c.Class = "passed"
	case passed == 0:
		c.Class = "failed"
	}
	if len(sts) == 1 {
		c.Text = string(sts[0])
	} else {
		c.Text = fmt.Sprintf("%d of %d passed", passed, len(sts))
	}
	return c
}

// fileLinks are the files of a run, linked relative to dir. A URL made by
// net/url from a path alone is relative (it starts with ./ when its first
// segment has a colon, so a case id cannot make it a javascript: link),
// and html/template checks it again.
func fileLinks(dir string, files []File) []htmlLink {
	var out []htmlLink
	for _, f := range files {
		l := htmlLink{Name: strings.TrimPrefix(f.SandboxPath, "/work/")}
		if f.Path != "" {
			l.Href = (&url.URL{Path: filepath.ToSlash(relativeTo(dir, f.Path))}).String()
		}
		out = append(out, l)
	}
	return out
}

// relativeTo is path relative to the directory dir, or path as it is when
// it has none (another Windows drive).
func relativeTo(dir, path string) string {
	d, err1 := filepath.Abs(cmp.Or(dir, "."))
	p, err2 := filepath.Abs(path)
	if err1 != nil || err2 != nil {
		return path
	}
	rel, err := filepath.Rel(d, p)
	if err != nil {
		return path
	}
	return rel
}

// describe lists a case's expectations, as its reasons would name them.
func describe(e Expect) []string {
	var out []string
	for _, c := range e.Contains {
		out = append(out, fmt.Sprintf("the answer contains %q", c))
	}
	if e.Regex != nil {
		out = append(out, fmt.Sprintf("the answer matches the regex %q", e.Regex.String()))
	}
	if n := e.Number; n != nil {
		if n.Tolerance > 0 {
			out = append(out, fmt.Sprintf("a number in the answer is within %s of %s", formatFloat(n.Tolerance), formatFloat(n.Value)))
		} else {
			out = append(out, "a number in the answer equals "+formatFloat(n.Value))
		}
	}
	for _, f := range e.Files {
		out = append(out, "the run saves "+f)
	}
	if len(out) == 0 {
		out = append(out, "an answer (the case has no expectations)")
	}
	return out
}

// chart is a horizontal bar chart of pass@1 per model, drawn as SVG in
// user units; the page scales it to its width.
type chart struct {
	Width, Height int
	Bars          []bar
}

type bar struct {
	Model, Label      string
	Y, TextY          int
	Length, Thickness int
	X, W, LabelX      float64
}

// The chart's layout, in SVG user units.
const (
	chartWidth  = 480
	chartLabels = 150 // the model names' column
	chartBars   = 260 // the bars' full length, 100%
	chartRow    = 36
	chartBar    = 24 // a bar's thickness
)

func passChart(stats []Stats) chart {
	c := chart{Width: chartWidth, Height: chartRow*len(stats) + 8}
	for i, s := range stats {
		w := chartBars * s.PassAt1
		y := 4 + i*chartRow
		c.Bars = append(c.Bars, bar{
			Model: clipText(s.Model, 14), Label: percent(s.PassAt1, s),
			Y: y + 4, TextY: y + 22, X: chartLabels, W: w, Length: chartBars, Thickness: chartBar, LabelX: chartLabels + w + 6,
		})
	}
	return c
}

// reportCSS is the report's style, light or dark as the reader's system
// is; wide tables scroll inside their box on a phone.
const reportCSS = `
:root { color-scheme: light dark; --fg: #1f2328; --muted: #59636e; --bg: #fff; --box: #f6f8fa; --line: #d1d9e0;
  --pass: #1a7f37; --fail: #cf222e; --mixed: #9a6700; --bar: #2f81f7; }
@media (prefers-color-scheme: dark) { :root { --fg: #e6edf3; --muted: #9198a1; --bg: #0d1117; --box: #161b22; --line: #3d444d;
  --pass: #3fb950; --fail: #ff7b72; --mixed: #d29922; } }
* { box-sizing: border-box; }
body { margin: 0 auto; max-width: 64rem; padding: 1rem; font: 16px/1.5 system-ui, -apple-system, "Segoe UI", sans-serif;
  color: var(--fg); background: var(--bg); overflow-wrap: anywhere; }
h1 { font-size: 1.5rem; margin: 0 0 .25rem; line-height: 1.25; }
h2 { font-size: 1.15rem; margin: 2rem 0 .5rem; }
h3 { font-size: 1rem; margin: 1.25rem 0 .25rem; }
.meta, .note { color: var(--muted); font-size: .9rem; }
.scroll { overflow-x: auto; max-width: 100%; }
table { border-collapse: collapse; font-size: .9rem; }
th, td { border: 1px solid var(--line); padding: .3rem .6rem; text-align: left; vertical-align: top; overflow-wrap: normal; }
th { background: var(--box); }
td.num { text-align: right; white-space: nowrap; }
.passed { color: var(--pass); } .failed { color: var(--fail); } .mixed { color: var(--mixed); } .none { color: var(--muted); }
td.passed, td.failed, td.mixed { font-weight: 600; }
svg { width: 100%; height: auto; max-width: 40rem; display: block; }
svg text { font: 17px system-ui, sans-serif; fill: var(--fg); }
svg .bar { fill: var(--bar); } svg .track { fill: var(--box); }
pre { font: 13px/1.45 ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; background: var(--box); border: 1px solid var(--line);
  border-radius: 6px; padding: .6rem .75rem; white-space: pre-wrap; max-width: 100%; }
ul { padding-left: 1.25rem; margin: .25rem 0; }
.failure { border-left: 4px solid var(--fail); padding: 0 .75rem; margin: 1rem 0; }
`

var reportTemplate = template.Must(template.New("report").Parse(`<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="{{.CSP}}">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="generator" content="terp">
<title>{{.Title}}</title>
<link rel="icon" href="data:,">
<style>{{.CSS}}</style>
</head>
<body>
<h1>{{.Title}}</h1>
<p class="meta">{{.Intro}}</p>

<h2>Models</h2>
<svg class="chart" viewBox="0 0 {{.Chart.Width}} {{.Chart.Height}}" role="img" aria-label="pass@1 per model">
{{range .Chart.Bars}}<g><title>{{.Model}}: {{.Label}}</title>
<text x="0" y="{{.TextY}}">{{.Model}}</text>
<rect class="track" x="{{.X}}" y="{{.Y}}" width="{{.Length}}" height="{{.Thickness}}"></rect>
<rect class="bar" x="{{.X}}" y="{{.Y}}" width="{{printf "%.1f" .W}}" height="{{.Thickness}}"></rect>
<text x="{{printf "%.1f" .LabelX}}" y="{{.TextY}}">{{.Label}}</text></g>
{{end}}</svg>
<div class="scroll"><table class="models">
<tr><th>model</th><th>cases</th><th>pass@1</th>{{if gt .Repeat 1}}<th>pass@{{.K}}</th><th>pass^{{.K}}</th>{{end}}<th>passed / failed / errored runs</th><th>median steps</th><th>median tokens</th><th>median time</th></tr>
{{range .Models}}<tr><td>{{.Name}}</td><td class="num">{{.Cases}}</td><td class="num">{{.PassAt1}}</td>{{if gt $.Repeat 1}}<td class="num">{{.PassAtK}}</td><td class="num">{{.PassAllK}}</td>{{end}}<td class="num">{{.Runs}}</td><td class="num">{{.Steps}}</td><td class="num">{{.Tokens}}</td><td class="num">{{.Time}}</td></tr>
{{end}}</table></div>
<p class="note">pass@1 is the share of runs that passed{{if gt .Repeat 1}}; pass@{{.K}} the share of cases that passed in at least one of their {{.K}} runs, pass^{{.K}} in all {{.K}}{{end}}. Steps, tokens and wall time are the medians of the finished runs.</p>

<h2>Cases</h2>
<div class="scroll"><table class="cases">
<tr><th>case</th>{{range .Models}}<th>{{.Name}}</th>{{end}}</tr>
{{range .Cases}}<tr><td title="{{.Question}}">{{.ID}}</td>{{range .Cells}}<td class="{{.Class}}">{{.Text}}</td>{{end}}</tr>
{{end}}</table></div>

{{with .NotPassed}}<h2>Not passed</h2>
{{range .}}<section class="failure">
<h3>{{.Label}} · <span class="failed">{{.Status}}</span>{{with .StopReason}} ({{.}}){{end}}</h3>
{{with .Question}}<div class="note">Question</div><pre class="question">{{.}}</pre>{{end}}
<div class="note">Expected</div>
<ul class="expect">{{range .Expect}}<li>{{.}}</li>{{end}}</ul>
<div class="note">Why not</div>
<ul class="reasons">{{range .Reasons}}<li>{{.}}</li>{{end}}</ul>
<div class="note">Answer</div>
{{if .Answer}}<pre class="answer">{{.Answer}}</pre>{{else}}<p class="note">(none)</p>{{end}}
{{with .Files}}<div class="note">Files</div><ul>{{template "files" .}}</ul>{{end}}
</section>
{{end}}{{end}}

{{with .Artifacts}}<h2>Artifacts</h2>
<ul class="artifacts">
{{range .}}<li>{{.Label}}<ul>{{template "files" .Files}}</ul></li>
{{end}}</ul>{{end}}
</body>
</html>
{{define "files"}}{{range .}}<li>{{if .Href}}<a href="{{.Href}}">{{.Name}}</a>{{else}}{{.Name}} <span class="note">(not downloaded)</span>{{end}}</li>{{end}}{{end}}
`))
