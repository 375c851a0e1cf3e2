package ansi

import (
	"io"
	"strconv"
	"strings"

	"golang.org/x/net/html"
)

// stripTags is what glamour had bluemonday's StrictPolicy().Sanitize do: drop
// every tag, comment and doctype, and the content of the elements whose
// content is not text (script, style, iframe...), and keep the rest of the
// text, escaped. It is written out here because bluemonday compiles dozens
// of regular expressions when Go initialises it, before any terp command
// runs, for the one policy glamour uses, which needs none of them.
func stripTags(s string) string {
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
			recent = elementName(t.Data)
			if recent == "script" || recent == "style" {
				continue
			}
			if _, ok := contentDropped[t.Data]; ok {
				skipping = true
				depth++
			}
		case html.EndTagToken:
			name := elementName(t.Data)
			if recent == name {
				recent = ""
			}
			if name == "script" || name == "style" {
				continue
			}
			if _, ok := contentDropped[t.Data]; ok {
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

// contentDropped are the elements bluemonday drops with their content.
var contentDropped = map[string]struct{}{
	"frame": {}, "frameset": {}, "iframe": {}, "noembed": {}, "noframes": {}, "noscript": {},
	"nostyle": {}, "object": {}, "script": {}, "style": {}, "title": {},
}

// elementName is bluemonday's normaliseElementName.
func elementName(s string) string {
	return strings.TrimSuffix(strings.TrimPrefix(strings.ToLower(strconv.QuoteToASCII(s)), `"`), `"`)
}
