package gfm

import (
	"bytes"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/yuin/goldmark"
	"github.com/yuin/goldmark/ast"
	"github.com/yuin/goldmark/extension"
	"github.com/yuin/goldmark/parser"
	"github.com/yuin/goldmark/renderer"
	"github.com/yuin/goldmark/text"
	"github.com/yuin/goldmark/util"
)

// corpus covers what each copied parser decides, alone and mixed: the
// Markdown terp's chat renders is a model's answer, which may hold any of it.
var corpus = []struct{ name, md string }{
	// Tables.
	{"table", "| a | b |\n|---|---|\n| 1 | 2 |\n"},
	{"table alignments", "| l | c | r | n |\n|:--|:-:|--:|---|\n| 1 | 2 | 3 | 4 |\n"},
	{"table spaced delimiters", "| l | c |\n| :---  |  :---: |\n| 1 | 2 |\n"},
	{"table without outer pipes", "a | b\n--|--\n1 | 2\n"},
	{"table one column", "| a |\n|---|\n| 1 |\n"},
	{"table escaped pipes", "| a \\| b | c |\n|---|---|\n| x \\| y | z |\n"},
	{"table code with pipes", "| `a \\| b` | c |\n|---|---|\n| `x \\| y` | z |\n| `p \\| q` and `r \\| s` | `t \\|` |\n| `u|v` | w |\n"},
	{"table code with bare pipe in header", "| `a|b` | c |\n|---|---|\n| 1 | 2 |\n"},
	{"table missing cells", "| a | b | c |\n|---|---|---|\n| 1 |\n| 1 | 2 |\n|\n"},
	{"table extra cells", "| a | b |\n|---|---|\n| 1 | 2 | 3 | 4 |\n"},
	{"table empty cells", "| | |\n|-|-|\n| | |\n"},
	{"table header and delimiter differ", "| a | b |\n|---|\n| 1 | 2 |\n"},
	{"table bad delimiter", "| a | b |\n|-x-|---|\n| 1 | 2 |\n"},
	{"table colon only delimiter", "| a |\n|:|\n| 1 |\n"},
	{"table indented delimiter", "| a |\n    |---|\n| 1 |\n"},
	{"table after paragraph", "some text\nmore text\n| a | b |\n|---|---|\n| 1 | 2 |\n"},
	{"table then paragraph", "| a | b |\n|---|---|\n| 1 | 2 |\n\nafter\n"},
	{"table lazy row", "| a |\n|---|\n| 1 |\nnot a row\n"},
	{"table two in a paragraph", "| a |\n|---|\n| 1 |\n| b |\n|---|\n| 2 |\n"},
	{"table inline content", "| *em* | **strong** | [l](u) | <b>x</b> |\n|---|---|---|---|\n| ~~s~~ | `c` | ![i](p) | \\* |\n"},
	{"table in list", "- item\n\n  | a | b |\n  |---|---|\n  | 1 | 2 |\n- | c |\n  |---|\n  | 3 |\n"},
	{"table in ordered list", "1. | a | b |\n   |:-|-:|\n   | 1 | 2 |\n"},
	{"table in blockquote", "> | a | b |\n> |---|---|\n> | 1 | 2 |\n"},
	{"table in nested blockquote", "> > | a |\n> > |:-:|\n> > | 1 |\n> not a row\n"},
	{"table trailing backslash", "| a \\\n|---|\n| 1 \\|\n"},
	{"setext heading not table", "a | b\n---\n"},

	// Strikethrough.
	{"strike double", "~~strike~~\n"},
	{"strike single", "~strike~\n"},
	{"strike triple", "~~~strike~~~\n"},
	{"strike mixed counts", "~a~~ and ~~b~ and ~c~~~\n"},
	{"strike unmatched open", "~~unmatched\n"},
	{"strike unmatched close", "unmatched~~ here\n"},
	{"strike nested emphasis", "~~a *b* __c__ d~~\n"},
	{"strike in emphasis", "*a ~~b~~ c* and **~~both~~**\n"},
	{"strike intraword", "a~~b~~c and x~y~z\n"},
	{"strike chained", "~~a~~b~~c~~\n"},
	{"strike spaced", "~ not ~ and ~~ not ~~\n"},
	{"strike escaped", "\\~~escaped~~ and ~~\\~~\n"},
	{"strike code", "`~~code~~` ~~`code`~~\n"},
	{"strike multiline", "~~multi\nline~~\n"},
	{"strike link", "~~[link](u)~~ [~~text~~](u)\n"},
	{"strike punctuation", "~~\"quoted\"~~, ~~(paren)~~.\n"},

	// Task lists.
	{"task list", "- [ ] todo\n- [x] done\n- [X] DONE\n"},
	{"task list nested", "- [ ] a\n  - [x] b\n    - [ ] c\n  - plain\n"},
	{"task not at start", "- text [x] not a task\n- [x] yes [ ] no\n"},
	{"task ordered", "1. [x] one\n2. [ ] two\n"},
	{"task outside list", "[x] not a task\n\n> [ ] nor this\n"},
	{"task in blockquote", "> - [x] quoted\n> - [ ] open\n"},
	{"task spacing", "- [x]\n- [x]no space\n- [ ]  two spaces\n- [\t] tab\n- [ ]\ttab after\n"},
	{"task loose", "- [x] a\n\n- [ ] b\n"},
	{"task link", "- [x] [link](u)\n- [link](u) [x]\n- [x][ref]\n\n[ref]: /url\n"},
	{"task bad marks", "- [y] not\n- [] not\n- [xx] not\n- [ x] not\n"},
	{"task second paragraph", "- para\n\n  [x] second\n"},
	{"task other markers", "* [x] star\n+ [ ] plus\n"},
	{"task heading item", "- # [x] heading\n"},
	{"task emphasis", "- [x] *done* ~~old~~\n- *[x]* no\n"},

	// Linkify.
	{"url http", "visit http://example.com now\n"},
	{"url https query", "https://example.com/path?q=1&r=2#frag\n"},
	{"url ftp", "get ftp://ftp.example.org/file.txt\n"},
	{"url port", "http://example.com:8080/x and http://localhost:8080/y\n"},
	{"url www", "www.example.com and www.example.com/path?x=1\n"},
	{"url trailing punctuation", "see https://example.com. or https://example.com! or https://example.com? or https://example.com, or https://example.com:\n"},
	{"url trailing emphasis", "**https://example.com** _www.example.com_ ~https://example.com~ *www.example.org*\n*https://example.com/a* __https://example.com/b__ ~~https://example.com/c~~ https://example.com/d?!.,:*_~\n"},
	{"url parentheses", "(https://example.com) and https://en.wikipedia.org/wiki/Foo_(bar) and https://example.com/a_(b)_(c)) and (www.example.com/(x))\n"},
	{"url entities", "https://example.com/&amp; https://example.com/foo&bar; https://example.com/x;\n"},
	{"url code span", "`https://example.com` and `www.example.com`\n"},
	{"url in link", "[https://example.com](https://example.org) [text www.example.com](u) [a@b.com](u)\n"},
	{"url in image", "![www.example.com](https://example.com/i.png)\n"},
	{"url autolink", "<https://example.com> <foo@example.com>\n"},
	{"url mailto", "mailto:foo@example.com and (mailto:bar@example.com)\n"},
	{"url incomplete", "http:// https://example https:/example.com www.example wwwexample.com\n"},
	{"url not at word start", "xhttps://example.com foo(https://example.com)bar\n"},
	{"url unicode", "https://example.com/ü https://exämple.com www.exämple.com\n"},
	{"url uppercase", "HTTPS://EXAMPLE.COM https://EXAMPLE.com WWW.example.com\n"},
	{"url long", "https://example.com/" + strings.Repeat("a", 5000) + "\n"},
	{"url long host", "www." + strings.Repeat("a", 300) + ".com and https://" + strings.Repeat("b", 256) + ".com\n"},
	{"url quotes", "\"https://example.com\" 'www.example.com' <https://example.com>.\n"},
	{"url heading and table", "# see https://example.com\n\n| https://example.com | www.example.com |\n|---|---|\n| a@example.com | (www.example.org) |\n"},
	{"url line starts", "https://example.com\nwww.example.com\nfoo@example.com\n"},
	{"email", "mail me at foo@example.com.\n"},
	{"email complex", "foo.bar+baz@sub.example.co.uk a_b-c@example.io\n"},
	{"email invalid", "a@b foo@bar.com- foo@bar.com_ @example.com foo@.com -foo@example.com\n"},
	{"email punctuation", "(foo@example.com) *foo@example.com* foo@example.com, foo@example.com!\n"},

	// Definition lists.
	{"definition", "Term\n: Definition\n"},
	{"definition multiple terms", "Term 1\nTerm 2\n: Def a\n: Def b\n"},
	{"definition loose", "Term\n\n: Def\n"},
	{"definition paragraphs", "Term\n: Def para 1\n\n    para 2\n"},
	{"definition no term", ":  no term\n"},
	{"definition no space", "Term\n:no space\n"},
	{"definition list content", "Term\n: - list\n  - list2\n"},
	{"definition code", "Term\n:        code\n"},
	{"definition two lists", "Apple\n: fruit\n\nOrange\n: also fruit\n: and a colour\n"},
	{"definition in blockquote", "> Term\n> : def\n"},
	{"definition in list", "- Term\n  : def\n"},
	{"definition indented", "Term\n  : indented marker\n"},
	{"definition lazy", "Term\n: def\ncontinued\n"},
	{"definition inline", "*Term* with `code`\n: def with ~~strike~~ and https://example.com\n"},

	// Mixtures.
	{"mixture answer", "# Growth by month\n\n**December** grew the most: see https://github.com/terpdev/terp/issues/35.\n\n- [x] done ~~struck~~\n- [ ] todo www.example.com\n\n| month | revenue |\n|-------|--------:|\n| 2025-11 | 100 |\n| 2025-12 | `26\\|550` |\n\nTerm\n: its definition\n\n---\nDone.\n"},
	{"mixture nested", "> - [x] a | b\n>   --|--\n>   1 | ~~2~~\n>\n> Term\n> : https://example.com\n"},
	{"mixture html", "<div>\n| a |\n|---|\n</div>\n\n<del>~~x~~</del> https://example.com<br>\n"},
	{"mixture code blocks", "```\n| a |\n|---|\n~~x~~ https://example.com\n```\n\n    - [x] code\n"},
	{"mixture references", "[x]: https://example.com\n\n- [x]\n- [x] [x]\n"},
	{"mixture setext", "Title ~~x~~\n=====\n\nSub https://example.com\n-----\n"},
	{"mixture hard breaks", "a https://example.com  \nb ~~c~~\\\nd\n"},
	{"empty", ""},
	{"blank", "\n\n  \n"},
}

// fragments are the pieces the pseudo-random inputs are built of: the
// corpus, and short lines that land inside other constructs when joined.
func fragments() []string {
	f := []string{
		"| a | b |", "|---|:-:|", "| 1 | `x \\| y` |", "--|--", ": def", "Term",
		"- [ ] ", "- [x] ", "[X] ", "~~", "~", "*", "_", "`", "\\|", "(", ")",
		"https://example.com", "www.example.com/a_(b)", "foo@example.com",
		"ftp://x.org/", ".", "!", "&amp;", ";", "> ", "    ", "1. ", "#", "<b>", "[l](u)",
	}
	for _, c := range corpus {
		f = append(f, c.md)
	}
	return f
}

// randomInputs joins fragments with separators chosen by a fixed seed, so a
// failure names an input that the next run builds again.
func randomInputs(n int) []string {
	r := rand.New(rand.NewPCG(20250731, 1))
	frags := fragments()
	seps := []string{"", " ", "\n", "\n\n", "\n- ", "\n> ", "\n  ", "\n1. ", " | ", "\n: "}
	inputs := make([]string, n)
	for i := range inputs {
		var b strings.Builder
		for range 1 + r.IntN(6) {
			b.WriteString(frags[r.IntN(len(frags))])
			b.WriteString(seps[r.IntN(len(seps))])
		}
		inputs[i] = b.String()
	}
	return inputs
}

// markdowns returns goldmark with this package's extensions and with
// goldmark's, as glamour.go configures it. This package's extenders leave
// the HTML renderers out (see the package comment), so goldmark's are
// registered here for its side to render HTML too.
func markdowns() (copied, upstream goldmark.Markdown) {
	copied = goldmark.New(
		goldmark.WithExtensions(GFM, DefinitionList),
		goldmark.WithParserOptions(parser.WithAutoHeadingID()),
		goldmark.WithRendererOptions(renderer.WithNodeRenderers(
			util.Prioritized(extension.NewTableHTMLRenderer(), 500),
			util.Prioritized(extension.NewStrikethroughHTMLRenderer(), 500),
			util.Prioritized(extension.NewTaskCheckBoxHTMLRenderer(), 500),
			util.Prioritized(extension.NewDefinitionListHTMLRenderer(), 500),
		)),
	)
	upstream = goldmark.New(
		goldmark.WithExtensions(extension.GFM, extension.DefinitionList),
		goldmark.WithParserOptions(parser.WithAutoHeadingID()),
	)
	return copied, upstream
}

// compare parses md with both and fails if the trees or the HTML differ.
func compare(t *testing.T, copied, upstream goldmark.Markdown, md string) {
	t.Helper()
	gotTree, gotHTML := convert(t, copied, md)
	wantTree, wantHTML := convert(t, upstream, md)
	if gotTree != wantTree {
		t.Errorf("input %q\ntree:\n%s\ngoldmark's:\n%s", md, gotTree, wantTree)
	}
	if gotHTML != wantHTML {
		t.Errorf("input %q\nHTML:\n%s\ngoldmark's:\n%s", md, gotHTML, wantHTML)
	}
}

// convert returns md's tree, as node.Dump prints it, and its HTML.
func convert(t *testing.T, md goldmark.Markdown, in string) (tree, html string) {
	t.Helper()
	src := []byte(in)
	doc := md.Parser().Parse(text.NewReader(src))
	var buf bytes.Buffer
	if err := md.Renderer().Render(&buf, src, doc); err != nil {
		t.Fatalf("input %q: %v", in, err)
	}
	// After rendering, which reads the titles: quoting them keeps each of
	// Dump's key-value lines on one line, for dump to sort.
	_ = ast.Walk(doc, func(n ast.Node, entering bool) (ast.WalkStatus, error) {
		switch n := n.(type) {
		case *ast.Link:
			n.Title = []byte(strconv.Quote(string(n.Title)))
		case *ast.Image:
			n.Title = []byte(strconv.Quote(string(n.Title)))
		}
		return ast.WalkContinue, nil
	})
	return dump(t, doc, src), buf.String()
}

// dumpKey matches the lines Dump prints from a node's map of values (lists',
// links' and images'), in the map's order, which Go randomises.
var dumpKey = regexp.MustCompile(`^ *(Ordered|Marker|Tight|Start|Destination|Title): `)

// dump returns what n.Dump prints on the standard output, with each run of
// key-value lines sorted.
func dump(t *testing.T, n ast.Node, src []byte) string {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	read := make(chan []byte)
	go func() {
		b, _ := io.ReadAll(r)
		read <- b
	}()
	stdout := os.Stdout
	os.Stdout = w
	func() {
		defer func() { os.Stdout = stdout }()
		n.Dump(src, 0)
	}()
	w.Close()
	lines := strings.Split(string(<-read), "\n")
	for i := 0; i < len(lines); {
		j := i
		for j < len(lines) && dumpKey.MatchString(lines[j]) {
			j++
		}
		slices.Sort(lines[i:j])
		i = max(j, i+1)
	}
	return strings.Join(lines, "\n")
}

// TestMatchesGoldmark parses the corpus with this package and with
// goldmark's extension package, and compares the trees and the HTML.
func TestMatchesGoldmark(t *testing.T) {
	copied, upstream := markdowns()
	for _, c := range corpus {
		t.Run(c.name, func(t *testing.T) {
			compare(t, copied, upstream, c.md)
		})
	}
}

// TestMatchesGoldmarkRandom does the same for inputs joined at random from
// the corpus and smaller fragments.
func TestMatchesGoldmarkRandom(t *testing.T) {
	copied, upstream := markdowns()
	for i, md := range randomInputs(500) {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			compare(t, copied, upstream, md)
		})
	}
}

// FuzzMatchesGoldmark goes further than the fixed inputs:
//
//	go test -run '^$' -fuzz FuzzMatchesGoldmark ./internal/tui/glamour/gfm
func FuzzMatchesGoldmark(f *testing.F) {
	for _, c := range corpus {
		f.Add(c.md)
	}
	copied, upstream := markdowns()
	f.Fuzz(func(t *testing.T, md string) {
		compare(t, copied, upstream, md)
	})
}
