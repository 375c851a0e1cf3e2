package batch

import (
	"bytes"
	"cmp"
	"fmt"
	"html/template"
	"io"
	"math"
	"net/url"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/terpdev/terp/internal/htmlpage"
	"github.com/terpdev/terp/internal/sanitize"
)

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
	p := htmlReport{Title: "Batch report: " + rep.File, CSS: template.CSS(htmlpage.BaseCSS + reportCSS), Repeat: repeat, K: strconv.Itoa(repeat)}

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
		m := htmlModel{Name: s.Model, Cases: s.Cases, PassAt1: percent(s.PassAt1, s), Interval: interval(s), PassAtK: percent(s.PassAtK, s), PassAllK: percent(s.PassAllK, s),
			Runs: fmt.Sprintf("%d / %d / %d", s.Passed, s.Failed, s.Errored), Steps: "-", Tokens: "-", Time: "-"}
		if s.Finished() > 0 {
			m.Steps = strconv.FormatFloat(s.MedianSteps, 'f', -1, 64)
			m.Tokens = thousands(int64(s.MedianTokens + 0.5))
			m.Time = s.MedianTime.Round(100 * time.Millisecond).String()
		}
		p.Models = append(p.Models, m)
	}
	p.Separation = Separation(stats)
	skills, count, per := breakdownStats(runs, results, func(c *Case) string { return c.Skill }, nil)
	for _, v := range skills {
		p.SkillNames = append(p.SkillNames, fmt.Sprintf("%s (%d)", v, count[v]))
	}
	for i, s := range stats {
		for _, v := range skills {
			c := "-"
			if st, ok := per[s.Model+"\x00"+v]; ok && st.Finished() > 0 {
				c = percent(st.PassAt1, st) + " (" + interval(st) + ")"
			}
			p.Models[i].Skills = append(p.Models[i].Skills, c)
		}
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
	if err := reportTemplate().Execute(&b, p); err != nil {
		return err
	}
	_, err := w.Write(b.Bytes())
	return err
}

type htmlReport struct {
	Title, Intro string
	CSS          template.CSS
	Repeat       int
	K            string
	Chart        chart
	Models       []htmlModel
	// Separation says which models the run can tell apart.
	Separation []string
	// SkillNames head the skills table; each model's row is its Skills.
	SkillNames []string
	Cases      []htmlCase
	NotPassed  []htmlFailure
	Artifacts  []htmlArtifacts
}

type htmlModel struct {
	Name                             string
	Cases                            int
	PassAt1, PassAtK, PassAllK, Runs string
	// Interval is pass@1's 95% interval (Wilson).
	Interval            string
	Steps, Tokens, Time string
	// Skills are pass@1 with its interval per skill, as SkillNames.
	Skills []string
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
		if n.Decimals != nil {
			out = append(out, fmt.Sprintf("a number in the answer is %s to %d decimals (within %s of %s)", formatFloat(n.Value), *n.Decimals,
				formatFloat(0.6*math.Pow(10, -float64(*n.Decimals))), formatFloat(n.Centre())))
		} else if n.Tolerance > 0 {
			out = append(out, fmt.Sprintf("a number in the answer is within %s of %s", formatFloat(n.Tolerance), formatFloat(n.Value)))
		} else {
			out = append(out, "a number in the answer equals "+formatFloat(n.Value))
		}
	}
	for _, f := range e.Files {
		out = append(out, "the run saves "+f)
	}
	for _, name := range sortedKeys(e.Saved) {
		out = append(out, "the run saves "+name+", which holds what the question asks for")
	}
	if e.Undetermined {
		out = append(out, "the answer says the data cannot tell, and gives no value")
	}
	if e.RanCode {
		out = append(out, "the run ran code")
	}
	if e.AnswerLine {
		out = append([]string{"the reply has an ANSWER line, which is all that is read of the answer"}, out...)
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

// reportCSS is the report's own style beside htmlpage.BaseCSS: wide
// tables scroll inside their box on a phone; verdicts in colour.
const reportCSS = `
:root { --width: 64rem; --pass: #1a7f37; --fail: #cf222e; --mixed: #9a6700; --bar: #2f81f7; }
@media (prefers-color-scheme: dark) { :root { --pass: #3fb950; --fail: #ff7b72; --mixed: #d29922; } }
h3 { font-size: 1rem; margin: 1.25rem 0 .25rem; }
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
pre { white-space: pre-wrap; }
ul { margin: .25rem 0; }
.failure { border-left: 4px solid var(--fail); padding: 0 .75rem; margin: 1rem 0; }
`

var reportTemplate = sync.OnceValue(func() *template.Template {
	return template.Must(template.Must(template.New("report").Parse(htmlpage.Head)).Parse(`{{template "head" .}}
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
<tr><th>model</th><th>cases</th><th>pass@1</th><th>95% interval</th>{{if gt .Repeat 1}}<th>pass@{{.K}}</th><th>pass^{{.K}}</th>{{end}}<th>passed / failed / errored runs</th><th>median steps</th><th>median tokens</th><th>median time</th></tr>
{{range .Models}}<tr><td>{{.Name}}</td><td class="num">{{.Cases}}</td><td class="num">{{.PassAt1}}</td><td class="num">{{.Interval}}</td>{{if gt $.Repeat 1}}<td class="num">{{.PassAtK}}</td><td class="num">{{.PassAllK}}</td>{{end}}<td class="num">{{.Runs}}</td><td class="num">{{.Steps}}</td><td class="num">{{.Tokens}}</td><td class="num">{{.Time}}</td></tr>
{{end}}</table></div>
<p class="note">pass@1 is the share of runs that passed{{if gt .Repeat 1}}; pass@{{.K}} the share of cases that passed in at least one of their {{.K}} runs, pass^{{.K}} in all {{.K}}{{end}}. The 95% interval (Wilson) is the range of pass rates these runs are consistent with{{if gt .Repeat 1}}, counting every run{{end}}. Steps, tokens and wall time are the medians of the finished runs.</p>
{{with .Separation}}<h3>Can these models be told apart?</h3>
<ul class="separation">{{range .}}<li>{{.}}</li>{{end}}</ul>{{end}}
{{with .SkillNames}}<h2>Skills</h2>
<div class="scroll"><table class="skills">
<tr><th>model</th>{{range .}}<th>{{.}}</th>{{end}}</tr>
{{range $.Models}}<tr><td>{{.Name}}</td>{{range .Skills}}<td class="num">{{.}}</td>{{end}}</tr>
{{end}}</table></div>
<p class="note">pass@1 (95% interval) per skill, its number of cases in brackets.</p>{{end}}

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
})
