package ansi

import (
	"io"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/microcosm-cc/bluemonday"
	"golang.org/x/net/html"
)

func TestStripTagsAsBluemonday(t *testing.T) {
	strict := bluemonday.StrictPolicy()
	for _, in := range []string{
		"", "  \n", "plain & simple", "<b>bold</b> &amp; <i>it</i>",
		"<p>a</p><!-- hidden --><br/>b", "<!DOCTYPE html><title>t</title>x",
		"<script>alert(1)</script>after", "<style>p{}</style><p>para</p>",
		"<iframe><iframe>in</iframe>still</iframe>out", "</object>stray end",
		"<SCRIPT>shout</SCRIPT>ok", "<noscript><b>no</b></noscript>yes",
		"a < b > c \"q\" 'q'", "<a href=\"x\">link</a>", "<img src=x onerror=y>",
		"unclosed <b", "&lt;b&gt; &#65; &nbsp;", "<div>\x00nul</div>",
	} {
		if got, want := stripTags(in), strict.Sanitize(in); got != want {
			t.Errorf("stripTags(%q) = %q, bluemonday %q", in, got, want)
		}
	}
}

// stripTagsReference is stripTags as it was written on x/net/html's
// tokenizer, as bluemonday uses it. The test is not linked into terp, so it
// can import the package to check the hand-written scanner against it.
func stripTagsReference(s string) string {
	if strings.TrimSpace(s) == "" {
		return s
	}
	var (
		b        strings.Builder
		skipping bool  // inside an element whose content is dropped
		depth    int64 // how many of those are open
		recent   string
	)
	z := html.NewTokenizer(strings.NewReader(s))
	for {
		if z.Next() == html.ErrorToken {
			if z.Err() == io.EOF {
				return b.String()
			}
			// bluemonday returns nothing when the tokenizer fails.
			return ""
		}
		t := z.Token()
		switch t.Type {
		case html.StartTagToken:
			recent = referenceElementName(t.Data)
			if recent == "script" || recent == "style" {
				continue
			}
			if _, ok := referenceContentDropped[t.Data]; ok {
				skipping = true
				depth++
			}
		case html.EndTagToken:
			name := referenceElementName(t.Data)
			if recent == name {
				recent = ""
			}
			if name == "script" || name == "style" {
				continue
			}
			if _, ok := referenceContentDropped[t.Data]; ok {
				depth--
				if depth == 0 {
					skipping = false
				}
			}
		case html.TextToken:
			if !skipping && recent != "script" && recent != "style" {
				b.WriteString(t.String())
			}
		}
	}
}

// referenceContentDropped are the elements bluemonday drops with their content.
var referenceContentDropped = map[string]struct{}{
	"frame": {}, "frameset": {}, "iframe": {}, "noembed": {}, "noframes": {}, "noscript": {},
	"nostyle": {}, "object": {}, "script": {}, "style": {}, "title": {},
}

// referenceElementName is bluemonday's normaliseElementName.
func referenceElementName(s string) string {
	return strings.TrimSuffix(strings.TrimPrefix(strings.ToLower(strconv.QuoteToASCII(s)), `"`), `"`)
}

// stripTagsCorpus covers what the scanner must get as the tokenizer does.
var stripTagsCorpus = []string{
	// text and where markup starts
	"", " ", "  \n\t", "x", "plain & simple", "a < b > c", "a<", "a<<b>c", "<", "<<", ">", "a</", "</", "a</ ", "</ x>y",
	"< b>", "<3", "<1a>b", "<-a>b", "<é>x</é>", "<_x>y", "a<b", "a<b c", "a<b c=", "a<b c='x", "a<b c=\"x", "a<b c=x",
	"x<!", "x<!-", "x<!--", "x<!---", "x<?", "x<?a", "<a>", "<A>b</A>", "</>x", "</ >x", "</1>x", "</\x00>x", "</\x00",
	"</a", "</a b='>'>c", "</a\n>b", "<a/b>c", "<a b>c", "text<!>more", "<!>", "<!x>y", "<!x", "<?>x", "<?xml version=\"1.0\"?>x",
	// comments
	"<!---->x", "<!-->x", "<!--->x", "<!-- a -- b -->x", "<!-- -- -->x", "<!--a--!>b", "<!--a--!-->b", "<!--a--!x>b-->c",
	"<!--a--!", "<!--a--", "<!--a-", "<!--a", "<!--a--!->b-->c", "<!--a-->b-->c", "<!---->-->x", "<!--<script>-->x",
	"<!--a--!!>b-->c", "<!--a---->b", "<!--a- ->b-->c", "<!-- > -->x", "<!--->-->x", "<!---x-->y", "<!--a--!-x>b-->c",
	// doctype, CDATA, bogus comments
	"<!DOCTYPE html>x", "<!doctype html>x", "<!DOCTYPE>x", "<!DOCTYPE", "<!DOCTY", "<!DOCTYPEhtml>x", "<!DOCTYPE html", "<!DOC>x",
	"<![CDATA[a]]>b", "<![CDATA[a>b]]>c", "<![CDATA[", "<!ELEMENT x>y", "<?php echo 1 ?>x",
	// attributes
	"<a href=\"x>y\">link</a>", "<a href='x>y'>link</a>", "<a href=x>y>z</a>", "<a b=\"c'>\"d>e", "<a b='c\">'d>e",
	"<a b = 'c>' >d", "<a b=>c", "<a b= >c", "<a b =>c", "<a =b>c", "<a ==b>c", "<a b=c=d>e", "<a b c d>e", "<a b\"c>d",
	"<a b='>", "<a b=\"", "<a b=c", "<a\tb\n=\fc\r>d", "<a b=\"x\"c=\"y\">d", "<a b=\"x\"/>c", "<a/>b", "<a />b", "<a/ >b",
	"<a b/>c", "<a b=/>c", "<a b=x/>c", "<a b=x />c", "<a b=x//>c", "<a b=x ///>c", "<a b=/ b=/>c", "<a b=/ B=/>c",
	"<a ='>'>b", "<object ='>'/>a", "<a =>b", "<a =\"x\">b", "<a b=='>'>c", "<a =/>c", "<a b='/'/>c", "<a b= / >c", "<a b=x /c=/>d", "<a/b/>c", "<a\x00b>c</a\x00b>d",
	// attributes that decide whether a tag whose content is dropped is self-closing
	"<object/>a", "<object />a", "<object b/>a", "<object b=/>a", "<object b=x/>a", "<object b=x />a", "<object b='/'/>a",
	"<object b=/ b=/>a", "<object b=/ B=/>a", "<object b=/ c=/>a", "<object b=x//>a", "<object b=x ///>a", "<object b= />a",
	"<object =/>a", "<object b=/ =/>a", "<object b=\"x\"/>a", "<object b=x /c=/>a", "<script b=/ b=/>a</script>b",
	"<script b=/>a</script>b", "<iframe b=x/>a</iframe>b", "<title b=/ b=x/>a</title>b", "<object b=/ b>a", "<object b c=/ b=/>a",
	// self-closing and raw-text tags
	"<br/>x", "<br />x", "<br>x", "<script/>x</script>y", "<script />x", "<style/>a<b>c</b>", "<title/>a&amp;b</title>c",
	"<textarea/>a&lt;b</textarea>c", "<iframe/>a<b>c</iframe>d", "<object/>a", "<noscript/>a<i>b</i></noscript>c",
	"<plaintext/>a<b>c", "<xmp/>a&amp;<b>", "<SCRIPT/>a", "<a b=/ script>",
	// raw text
	"<script>alert(1)</script>after", "<script>a</SCRIPT>b", "<script>a</ScRiPt >b", "<script>a</script/>b",
	"<script>a</script\n>b", "<script>a</scripty>b</script>c", "<script>a</scrip>b</script>c", "<script>a</script", "<script>a</",
	"<script>a", "<script>", "<script></script>x", "<script>a<b>c</b></script>d", "<style>a</style>b", "<style><b>x</b></style>y",
	"<style>a</STYLE>b", "<style>a</styl>b", "<style>a", "<title>a</title>b", "<title>a<b>c</b></title>d", "<TITLE>a</TiTlE>b",
	"<textarea>a<b>c&amp;d</b>\x00e</textarea>f", "<textarea>&lt;&#0;&#x0;</textarea>", "<textarea>a", "<xmp>a<b>&amp;\x00</xmp>c",
	"<xmp>", "<iframe>a<b>c</b></iframe>d", "<iframe>a</iframe >b", "<noembed>a<b></noembed>c", "<noframes>a</noframes>b",
	"<noscript>a<i>b</i></noscript>c", "<plaintext>a</plaintext><b>c&amp;\x00", "<plaintext>", "<PLAINTEXT>a",
	"<nostyle>a</nostyle>b", "<object>a<b>c</b></object>d", "<frame>a</frame>b", "<frameset>a</frameset>b",
	"<iframe><iframe>in</iframe>still</iframe>out", "</object>stray end<object>x</object>y</object>z",
	"</iframe></iframe><object>a</object>b</object>c", "<object><object>a</object>b</object>c", "<title>x</title>",
	"<textarea>a</textarea\tb>c", "<textarea>a</textareax>b", "<script>a</style>b</script>c", "<style>a</script>b</style>c",
	"<b><script>x</script></b>y", "<script>x</script><b>y</b>", "<script>x</script>y<style>z</style>w",
	"<i>a</script>b", "<script x='</script>'>a</script>b", "<scriptx>a</scriptx>b", "<script\x00>a</script\x00>b",
	"<İframe>a</İframe>b", "<scrİpt>a</scrİpt>b", "<SCRİPT>a</script>b", "<noſcript>a</noscript>b", "<noscript>a</noſcript>b",
	"<ſcript>a</ſcript>b", "<tİtle>a</title>b", "<script>a</scrİpt>b", "<title>a</tİtle>b</title>c", "<script\tsrc=x>a</script>b",
	// script escape states
	"<script><!--a</script>b", "<script><!--<script>a</script>b</script>c", "<script><!--<script>a</script>b-->c</script>d",
	"<script><!--<script>a-->b</script>c", "<script><!-- --></script>a", "<script><!-->a</script>b", "<script><!--->a</script>b",
	"<script><!--<a</script>b", "<script><!--<1</script>b", "<script><!--<sc</script>b", "<script><!--<scripty</script>b",
	"<script><!--<script</script>b", "<script><!--<SCRIPT>a</SCRIPT>b</script>c", "<script><!--<script>a<!--b</script>c-->d</script>e",
	"<script><!--<script>--></script>a", "<script><!--<script>a</scrip>b-->c</script>d", "<script><!--<script/>a</script>b",
	"<script><!--<script>a</script/>b</script>c", "<script><!--<script>a</script", "<script><!--<script>a<", "<script><!--<",
	"<script><!--a-", "<script><!--a--", "<script><!--a-->b</script>c", "<script><!-a</script>b", "<script><!a</script>b",
	"<script><!--a--->b</script>c", "<script><!--a- ->b</script>c", "<script><!--a--<b</script>c", "<script><!--<-</script>a",
	"<script><!--<script>a--<b</script>c", "<script><!--<script>a-<b</script>c", "<script><!--<script>a<<b</script>c",
	"<script><!--<script>a<-b--></script>c", "<script><!--</</script>a", "<script><!--</scrip</script>a", "<script><<!--</script>a",
	"<script><!--><script>a</script>b</script>c", "<script><!--a-><script>x</script>y</script>z",
	"<script><!--a--><script>x</script>y</script>z", "<script><!--a--!><script>x</script>y</script>z",
	"<script><!--<1<script>a</script>b</script>c", "<script><!--< <script>a</script>b</script>c",
	"<script><!--<!--<script>a</script>b</script>c", "<script><!--<1-->a</script>b", "<script><!--<1<!--<script>a</script>b</script>c",
	"<script><!--<script>a</<script>b</script>c", "<script><!--<script\n>a</script>b</script>c", "<script><!--<scRipt>a</script>b",
	// entities in text
	"&lt;b&gt; &#65; &nbsp;", "&amp;", "&amp", "&ampx", "&amp;x", "&AMP;", "&Amp;", "&bogus;", "&bogus", "&", "&;", "&#", "&#;",
	"&#x", "&#x;", "&#X41;", "&#x41", "&#65", "&#65x", "&#0;", "&#00;", "&#x0;", "&#13;", "&#x0d;", "&#10;", "&#128;", "&#x80;",
	"&#x9f;", "&#159;", "&#x81;", "&#xD800;", "&#xdfff;", "&#x10FFFF;", "&#x110000;", "&#1114112;", "&#4294967361;",
	"&#x100000041;", "&#99999999999999999999;", "&#xFFFFFFFFFFFFFFFF41;", "&#-1;", "&#+1;", "&# 1;", "&#x 1;", "&#xg;",
	"&#65;&#66;", "&#6", "a&#6", "&#x4", "&notit;", "&notin;", "&noti", "&not", "&notx", "&nLt;", "&nGt;", "&nLt", "&nLtv;",
	"&NotEqualTilde;", "&lt", "&ltx", "&lt;x", "&LT", "&LT;", "&copy2", "&copy;2", "&acute;", "&aacute", "&aacute;", "&a;",
	"&nbsp", "&nbspx", "&nbsp;x", "&&amp;", "&&", "&#&#65;", "&amp&lt;", "&1;", "&a1;", "&sup2;", "&sup2", "&frac12x",
	"&CounterClockwiseContourIntegral;", "&ThickSpace;", "&fjlig;", "a&b;c", "&\x00;", "&quot;&apos;&#39;&#34;",
	"\"'\r\n\r\r\n", "a\rb", "a\r\nb", "a\r", "\r", "\x00", "a\x00b", "<b>\x00</b>", "&#13;\r&#x0D;",
	// NUL and non-ASCII
	"<div>\x00nul</div>", "<\x00>x", "<a\x00>x</a>", "é<b>ü</b>ß", "<b>日本</b>語", "\xff<b>\xfe</b>", "<a b='\xff'>c",
	"<script>\x00</script>\x00", "<xmp>\x00\r\n</xmp>", "<textarea>&#0;\x00</textarea>",
	// mixed
	"<p>a</p><!-- hidden --><br/>b", "<!DOCTYPE html><title>t</title>x", "<SCRIPT>shout</SCRIPT>ok",
	"<img src=x onerror=y>", "unclosed <b", "<b>bold</b> &amp; <i>it</i>", "<a href=\"x\">link</a>",
	"Use `<b>` for <b>bold</b>.", "x < y && y > z", "<p>1 &lt; 2</p>\n<p>3 &gt; 2</p>\n",
	"<details><summary>s</summary>body</details>", "<kbd>Ctrl</kbd>+<kbd>C</kbd>", "<!-- a --><!-- b -->c",
	"<iframe>a</iframe><title>b</title>c", "<noscript><script>a</script>b</noscript>c", "<title><script>a</script></title>b",
	"<script><title>a</title></script>b", "<textarea><script>a</script></textarea>b", "<style><!--a--></style>b",
}

// stripTagsFragments are put together at random into inputs.
var stripTagsFragments = []string{
	"<", ">", "</", "<!--", "-->", "--", "-", "!", "<!", "<?", "/", "<script>", "</SCRIPT>", "</script>", "<script", "script",
	"<style>", "</style>", "<title>", "</title>", "<textarea>", "</textarea>", "<iframe>", "</iframe>", "<noscript>",
	"</noscript>", "<plaintext>", "<xmp>", "</xmp>", "<object>", "</object>", "<b>", "</b>", "<br/>", "<p ", "<a href=\"x>y\">",
	"</a>", "&amp;", "&lt", "&#65;", "&#x41;", "&nbsp;", "&bogus;", "&", "#", ";", "\"", "'", "=", " ", "\t", "\n", "\r", "\x00",
	"é", "ü", "日", "a", "b", "x", "S", "<!DOCTYPE html>", "<?xml?>", "<![CDATA[", "]]>", "<script/>", "<title/>",
}

func randomHTML(r *rand.Rand) string {
	var b strings.Builder
	for range r.IntN(20) {
		b.WriteString(stripTagsFragments[r.IntN(len(stripTagsFragments))])
	}
	return b.String()
}

func TestStripTagsMatchesReference(t *testing.T) {
	check := func(in string) {
		t.Helper()
		if got, want := stripTags(in), stripTagsReference(in); got != want {
			t.Errorf("stripTags(%q) = %q, x/net/html tokenizer %q", in, got, want)
		}
	}
	for _, in := range stripTagsCorpus {
		check(in)
	}
	r := rand.New(rand.NewPCG(1, 2))
	for range 20000 {
		check(randomHTML(r))
	}
}

// TestStripTagsAsBluemondayRandom is TestStripTagsAsBluemonday on the corpus
// and random inputs. The reference is bluemonday's own loop (less the
// return on a tokenizer error, which a strings.Reader cannot cause), so
// stripTags should match bluemonday wherever it matches the reference.
func TestStripTagsAsBluemondayRandom(t *testing.T) {
	strict := bluemonday.StrictPolicy()
	r := rand.New(rand.NewPCG(3, 4))
	inputs := slices.Clone(stripTagsCorpus)
	for range 5000 {
		inputs = append(inputs, randomHTML(r))
	}
	for _, in := range inputs {
		if got, want := stripTags(in), strict.Sanitize(in); got != want {
			t.Errorf("stripTags(%q) = %q, bluemonday %q", in, got, want)
		}
	}
}

func FuzzStripTagsMatchesReference(f *testing.F) {
	for _, in := range stripTagsCorpus {
		f.Add(in)
	}
	f.Fuzz(func(t *testing.T, in string) {
		if got, want := stripTags(in), stripTagsReference(in); got != want {
			t.Errorf("stripTags(%q) = %q, x/net/html tokenizer %q", in, got, want)
		}
	})
}
