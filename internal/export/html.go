package export

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"html/template"
	"image"
	_ "image/gif" // image.DecodeConfig reads the sizes of the charts
	_ "image/jpeg"
	_ "image/png"
	"io"
	"strings"
	"sync"

	"github.com/alecthomas/chroma/v2"
	"github.com/terpdev/terp/internal/highlight"
	"github.com/terpdev/terp/internal/htmlpage"
)

// pageImageTypes are the only MIME types a page embeds an image as. SVG is
// among them: in an <img> a browser runs no script an SVG carries and loads
// nothing it links to, and the CSP forbids both besides.
var pageImageTypes = map[string]bool{"image/png": true, "image/jpeg": true, "image/gif": true, "image/svg+xml": true}

// WriteHTML writes d as one web page that needs nothing else: the styles
// inline, the charts as data: URIs, the code highlighted in Go. It can be
// mailed or attached and read offline, on a phone too. Every text of the
// conversation goes through html/template, so what the model or the code
// wrote shows as text and never becomes markup; each run is folded under a
// one-line summary, and the files the code saved close the page.
func WriteHTML(w io.Writer, d *Doc) error {
	p := htmlPage{
		Title: d.Title, Model: d.Model, ExecMode: d.ExecMode, Inputs: d.Inputs, Warnings: d.Warnings,
		CSS: template.CSS(htmlpage.BaseCSS + pageCSS),
	}
	if p.Title == "" {
		p.Title = "Conversation " + d.ID
	}
	if !d.Created.IsZero() {
		p.Date = d.Created.UTC().Format("2 January 2006, 15:04 UTC")
	}
	shown := map[string]*htmlImage{}
	for _, t := range d.Turns {
		ht := htmlTurn{Question: prose(t.Question), Notes: t.Notes, Answer: prose(t.Answer)}
		for i, st := range t.Steps {
			hs := htmlStep{
				Summary: stepSummary(i+1, st), Failed: st.ExitCode != 0 || st.TimedOut || st.Error != "",
				Said: prose(st.Said), Code: pythonTokens(st.Code),
				Stdout: st.Printed(), Stderr: st.Stderr, Note: st.Note, Error: st.Error,
			}
			for _, img := range st.Images {
				hi := embed(img)
				hs.Images = append(hs.Images, hi)
				shown[img.Name] = &hi
			}
			ht.Steps = append(ht.Steps, hs)
		}
		p.Turns = append(p.Turns, ht)
	}
	for _, name := range d.Saved {
		p.Saved = append(p.Saved, htmlFile{Name: name, Image: shown[name]})
	}
	var b bytes.Buffer
	if err := pageTemplate().Execute(&b, p); err != nil {
		return err
	}
	_, err := w.Write(b.Bytes())
	return err
}

type htmlPage struct {
	Title, Model, Date, ExecMode string
	Inputs, Warnings             []string
	Turns                        []htmlTurn
	Saved                        []htmlFile
	CSS                          template.CSS
}

type htmlTurn struct {
	Question, Answer []block
	Notes            []string
	Steps            []htmlStep
}

type htmlStep struct {
	Summary                     string
	Failed                      bool
	Said                        []block
	Code                        []token
	Stdout, Stderr, Note, Error string
	Images                      []htmlImage
}

// htmlImage is an image as the page embeds it. Src is empty when the image
// is not embedded, and Why says why.
type htmlImage struct {
	Name          string
	Src           template.URL
	Width, Height int
	Why           string
}

type htmlFile struct {
	Name  string
	Image *htmlImage
}

// embed makes img a data: URI, the one kind of URL the page trusts, built
// only from the image's bytes and a type from pageImageTypes; the width and
// height it records (for the raster formats) keep the page from jumping as
// it decodes.
func embed(img Image) htmlImage {
	hi := htmlImage{Name: img.Name}
	switch {
	case !pageImageTypes[img.Type]:
		hi.Why = fmt.Sprintf("not shown: %q is not an image type the page embeds", img.Type)
		return hi
	case len(img.Data) == 0:
		hi.Why = "not shown: the file is empty"
		return hi
	}
	hi.Src = template.URL("data:" + img.Type + ";base64," + base64.StdEncoding.EncodeToString(img.Data))
	if img.Type != "image/svg+xml" {
		if c, _, err := image.DecodeConfig(bytes.NewReader(img.Data)); err == nil {
			hi.Width, hi.Height = c.Width, c.Height
		}
	}
	return hi
}

// stepSummary is the line a folded run shows: "Step 2 · exit 0 · saved
// chart.png".
func stepSummary(n int, st Step) string {
	parts := []string{fmt.Sprintf("Step %d", n)}
	switch {
	case st.Error != "":
		parts = append(parts, "could not run")
	case st.TimedOut:
		parts = append(parts, "timed out")
	default:
		parts = append(parts, fmt.Sprintf("exit %d", st.ExitCode))
	}
	if len(st.Saved) > 0 {
		names := st.Saved
		more := ""
		if len(names) > 3 {
			names, more = names[:3], fmt.Sprintf(" and %d more", len(names)-3)
		}
		parts = append(parts, "saved "+strings.Join(names, ", ")+more)
	}
	return strings.Join(parts, " · ")
}

// token is a run of code of one colour; Class is "" for plain text.
type token struct{ Class, Text string }

// pythonTokens splits Python code into coloured tokens with chroma's lexer.
// The page renders them itself, through the template, rather than taking
// chroma's HTML: then no markup in the page comes from anywhere but the
// template, and a handful of classes in pageCSS colour it.
func pythonTokens(code string) []token {
	it, err := chroma.Coalesce(highlight.Python()).Tokenise(nil, code)
	if err != nil {
		return []token{{Text: code}}
	}
	var out []token
	for t := it(); t != chroma.EOF; t = it() {
		c := tokenClass(t.Type)
		if n := len(out); n > 0 && out[n-1].Class == c {
			out[n-1].Text += t.Value
			continue
		}
		out = append(out, token{Class: c, Text: t.Value})
	}
	// The lexer ends the code with a newline it adds.
	if n := len(out); n > 0 && !strings.HasSuffix(code, "\n") {
		out[n-1].Text = strings.TrimSuffix(out[n-1].Text, "\n")
	}
	return out
}

// tokenClass is the class of pageCSS that colours tokens of type t.
func tokenClass(t chroma.TokenType) string {
	switch {
	case t == chroma.KeywordConstant:
		return "kc"
	case t.InCategory(chroma.Keyword), t == chroma.OperatorWord:
		return "k"
	case t == chroma.NameBuiltin, t == chroma.NameBuiltinPseudo:
		return "nb"
	case t == chroma.NameFunction, t == chroma.NameClass, t == chroma.NameFunctionMagic:
		return "nf"
	case t == chroma.NameDecorator:
		return "nd"
	case t.InSubCategory(chroma.LiteralString):
		return "s"
	case t.InSubCategory(chroma.LiteralNumber):
		return "m"
	case t.InCategory(chroma.Comment):
		return "c"
	}
	return ""
}

// block is a paragraph of prose, or a fenced code block.
type block struct {
	Code  bool
	Text  string // of a code block
	Spans []span // of a paragraph
}

// span is a piece of a paragraph: plain text, a code span or bold.
type span struct{ Kind, Text string }

// prose reads the little Markdown models write most, safely: paragraphs
// (their line breaks kept), ``` fenced blocks, `code` and **bold**. It
// only splits the text; the template escapes every piece, so nothing else
// of Markdown (links, images, HTML) can come of it.
func prose(s string) []block {
	var blocks []block
	var para []string
	flush := func() {
		if len(para) > 0 {
			blocks = append(blocks, block{Spans: inline(strings.Join(para, "\n"))})
			para = nil
		}
	}
	lines := strings.Split(strings.TrimSpace(s), "\n")
	for i := 0; i < len(lines); i++ {
		line := lines[i]
		switch {
		case strings.HasPrefix(strings.TrimSpace(line), "```"):
			flush()
			var code []string
			for i++; i < len(lines) && !strings.HasPrefix(strings.TrimSpace(lines[i]), "```"); i++ {
				code = append(code, lines[i])
			}
			blocks = append(blocks, block{Code: true, Text: strings.Join(code, "\n")})
		case strings.TrimSpace(line) == "":
			flush()
		default:
			para = append(para, line)
		}
	}
	flush()
	return blocks
}

// inline splits a paragraph into its code spans, bold and plain text.
func inline(s string) []span {
	var out []span
	text := func(t string) {
		if t == "" {
			return
		}
		if n := len(out); n > 0 && out[n-1].Kind == "" {
			out[n-1].Text += t
			return
		}
		out = append(out, span{Text: t})
	}
	for s != "" {
		i := strings.IndexAny(s, "`*")
		if i < 0 {
			text(s)
			break
		}
		text(s[:i])
		s = s[i:]
		mark, kind := "`", "code"
		if s[0] == '*' {
			mark, kind = "**", "b"
		}
		if !strings.HasPrefix(s, mark) {
			text(s[:1])
			s = s[1:]
			continue
		}
		end := strings.Index(s[len(mark):], mark)
		if end <= 0 {
			text(s[:len(mark)])
			s = s[len(mark):]
			continue
		}
		out = append(out, span{Kind: kind, Text: s[len(mark) : len(mark)+end]})
		s = s[2*len(mark)+end:]
	}
	return out
}

// pageCSS is the page's own style beside htmlpage.BaseCSS: code that
// scrolls sideways inside its block rather than widening the page, runs
// folded, highlighting colours.
const pageCSS = `
:root { --bad: #cf222e; --k: #8250df; --s: #0a3069; --c: #6e7781; --m: #0550ae; --nf: #6639ba; --nb: #953800; }
@media (prefers-color-scheme: dark) { :root { --bad: #ff7b72; --k: #d2a8ff; --s: #a5d6ff; --c: #8b949e; --m: #79c0ff; --nf: #d2a8ff; --nb: #ffa657; } }
.note { margin: .25rem 0; }
.warn { color: var(--bad); }
.question { border-left: 4px solid var(--k); padding: .25rem .75rem; background: var(--box); border-radius: 0 6px 6px 0; }
.answer { margin-top: 1rem; }
p { margin: .5rem 0; white-space: pre-wrap; }
pre { margin: .5rem 0; overflow-x: auto; white-space: pre; overflow-wrap: normal; }
p code { background: var(--box); padding: .1em .3em; border-radius: 4px; }
pre.stderr { border-color: var(--bad); }
.label { color: var(--muted); font-size: .8rem; margin: .75rem 0 0; }
details { border: 1px solid var(--line); border-radius: 6px; margin: .5rem 0; padding: 0 .75rem; }
details[open] { padding-bottom: .5rem; }
summary { cursor: pointer; padding: .5rem 0; font-weight: 600; }
summary.failed { color: var(--bad); }
img { max-width: 100%; height: auto; display: block; margin: .5rem 0; border-radius: 4px; }
figure { margin: .75rem 0; }
figcaption { color: var(--muted); font-size: .85rem; }
.k { color: var(--k); } .kc, .m { color: var(--m); } .s { color: var(--s); } .c { color: var(--c); font-style: italic; }
.nf { color: var(--nf); } .nb { color: var(--nb); } .nd { color: var(--nb); }
`

var pageTemplate = sync.OnceValue(func() *template.Template {
	return template.Must(template.Must(template.New("page").Parse(htmlpage.Head)).Parse(`{{template "head" .}}
<body>
<header>
<h1>{{.Title}}</h1>
<div class="meta">{{with .Model}}{{.}}{{end}}{{with .Date}} · {{.}}{{end}}{{if eq .ExecMode "kernel"}} · one Python session{{end}}</div>
{{with .Inputs}}<div class="meta">Uploaded: {{range $i, $f := .}}{{if $i}}, {{end}}{{$f}}{{end}}</div>{{end}}
{{range .Warnings}}<p class="note warn">{{.}}</p>{{end}}
</header>
<main>
{{range .Turns}}<section class="turn">
{{with .Question}}<div class="question">{{template "prose" .}}</div>{{end}}
{{range .Notes}}<p class="note">{{.}}</p>{{end}}
{{range .Steps}}<details>
<summary{{if .Failed}} class="failed"{{end}}>{{.Summary}}</summary>
{{template "prose" .Said}}
<pre class="code"><code>{{range .Code}}{{if .Class}}<span class="{{.Class}}">{{.Text}}</span>{{else}}{{.Text}}{{end}}{{end}}</code></pre>
{{with .Stdout}}<div class="label">Output</div><pre class="stdout">{{.}}</pre>{{end}}
{{with .Stderr}}<div class="label">Errors</div><pre class="stderr">{{.}}</pre>{{end}}
{{with .Error}}<p class="note warn">{{.}}</p>{{end}}
{{with .Note}}<p class="note">{{.}}</p>{{end}}
{{range .Images}}{{template "image" .}}{{end}}
</details>
{{end}}
{{with .Answer}}<div class="answer">{{template "prose" .}}</div>{{end}}
</section>
{{end}}
{{with .Saved}}<section class="files">
<h2>Files the code saved</h2>
<ul>
{{range .}}<li>{{if .Image}}{{template "image" .Image}}{{else}}{{.Name}}{{end}}</li>
{{end}}</ul>
</section>{{end}}
</main>
</body>
</html>
{{define "prose"}}{{range .}}{{if .Code}}<pre>{{.Text}}</pre>{{else}}<p>{{range .Spans}}{{if eq .Kind "code"}}<code>{{.Text}}</code>{{else if eq .Kind "b"}}<strong>{{.Text}}</strong>{{else}}{{.Text}}{{end}}{{end}}</p>{{end}}{{end}}{{end}}
{{define "image"}}<figure>{{if .Src}}<img src="{{.Src}}" alt="{{.Name}}"{{if .Width}} width="{{.Width}}" height="{{.Height}}"{{end}}>{{end}}<figcaption>{{.Name}}{{with .Why}} ({{.}}){{end}}</figcaption></figure>{{end}}
`))
})
