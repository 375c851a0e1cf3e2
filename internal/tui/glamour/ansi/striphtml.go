package ansi

import (
	"html"
	"slices"
	"strconv"
	"strings"
)

// stripTags is what glamour had bluemonday's StrictPolicy().Sanitize do: drop
// every tag, comment and doctype, and the content of the elements whose
// content is not text (script, style, iframe...), and keep the rest of the
// text, escaped. It is written out here because bluemonday compiles dozens
// of regular expressions when Go initialises it, before any terp command
// runs, for the one policy glamour uses, which needs none of them.
//
// bluemonday reads the HTML with golang.org/x/net/html's tokenizer, and so
// did this function, until that package (whose entity table Go builds at
// initialisation) was linked for nothing else. The scanner below follows
// that tokenizer wherever it shows in the output: where tags, comments and
// raw text begin and end, and how a text token is printed. The tests check
// it against the tokenizer.
func stripTags(s string) string {
	if strings.TrimSpace(s) == "" {
		return s
	}
	var (
		b        strings.Builder
		skipping bool   // inside an element whose content is dropped
		depth    int64  // how many of those are open (bluemonday's count: a stray end tag makes it negative)
		recent   string // the latest start tag, until its end tag
	)
	text := func(raw string, rawText, unescape bool) {
		if !skipping && recent != "script" && recent != "style" {
			b.WriteString(textToken(raw, rawText, unescape))
		}
	}
	for i := 0; i < len(s); {
		j := markupStart(s, i)
		if j > i {
			text(s[i:j], false, true)
		}
		if j == len(s) {
			break
		}
		switch c := s[j+1]; {
		case isLetter(c): // start tag
			name, end, selfClosing := readTag(s, j+1)
			if end < 0 {
				// The tokenizer stops with io.EOF in a tag that s ends
				// in. (A strings.Reader gives it no other error, so the
				// branch where bluemonday returns nothing on one is gone.)
				return b.String()
			}
			i = end
			// bluemonday ignores self-closing tags, but the tokenizer
			// reads raw text after <script/> as after <script>.
			if !selfClosing {
				recent = name
				if dropsContent(name) {
					skipping = true
					depth++
				}
			}
			if end := rawTextEnd(s, i, name); end > i {
				text(s[i:end], true, name == "textarea" || name == "title")
				i = end
			}
		case c == '/' && isLetter(s[j+2]): // end tag
			name, end, _ := readTag(s, j+2)
			if end < 0 {
				return b.String()
			}
			i = end
			if recent == name {
				recent = ""
			}
			if dropsContent(name) {
				depth--
				if depth == 0 {
					skipping = false
				}
			}
		case strings.HasPrefix(s[j:], "<!--"):
			i = commentEnd(s, j+len("<!--"))
		default:
			// "</>", "</" and something else than a letter, "<!" that
			// does not open a comment (a doctype, CDATA...) and "<?" are
			// bogus comments, which end at the first ">".
			i = len(s)
			if n := strings.IndexByte(s[j+2:], '>'); n >= 0 {
				i = j + 2 + n + 1
			}
		}
	}
	return b.String()
}

// markupStart returns the index of the first "<" at or after s[i] that starts
// markup (a letter, "/", "!" or "?" follows it), or len(s). A "</" that ends
// s is text.
func markupStart(s string, i int) int {
	for ; i+1 < len(s); i++ {
		if c := s[i+1]; s[i] == '<' && (isLetter(c) || c == '!' || c == '?' || c == '/' && i+2 < len(s)) {
			return i
		}
	}
	return len(s)
}

// readTag reads a tag whose name starts at s[i], just after "<" or "</", as
// x/net/html's readTag does, and returns its name (ASCII lower-cased), the
// index just past its ">" (-1 if s ends first), and whether it is
// self-closing. Attributes matter only for where the tag ends (a quoted
// value may hold a ">") and for whether it is self-closing.
func readTag(s string, i int) (name string, end int, selfClosing bool) {
	j := i
	for j < len(s) && !isSpace(s[j]) && s[j] != '/' && s[j] != '>' {
		j++
	}
	name = lowerASCII(s[i:j])
	var keys []string // lower-cased keys of the attributes the tokenizer keeps
	lastVal := -1     // index of the last byte of the last kept value
	for {
		if j = skipSpace(s, j); j == len(s) {
			return name, -1, false
		}
		if s[j] == '>' {
			break
		}
		// The key runs to a space, "=", "/" or ">", but an "=" that starts
		// it is part of it. An empty key is a stray "/".
		k := j
		for j < len(s) && (j == k && s[j] == '=' || !isSpace(s[j]) && s[j] != '=' && s[j] != '/' && s[j] != '>') {
			j++
		}
		key := lowerASCII(s[k:j])
		valEnd := j // no value is an empty one just after the key
		if j = skipSpace(s, j); j < len(s) && s[j] == '/' {
			j++
		} else if j < len(s) && s[j] == '=' {
			if j = skipSpace(s, j+1); j < len(s) {
				switch q := s[j]; q {
				case '"', '\'':
					n := strings.IndexByte(s[j+1:], q)
					if n < 0 {
						return name, -1, false
					}
					valEnd = j + 1 + n
					j = valEnd + 1
				default: // to a space or ">", so empty in "a=>"
					for j < len(s) && !isSpace(s[j]) && s[j] != '>' {
						j++
					}
					valEnd = j
				}
			}
		}
		// The first of attributes with the same key is the one kept.
		if key != "" && !slices.Contains(keys, key) {
			keys = append(keys, key)
			lastVal = valEnd - 1
		}
	}
	// s[j] is the ">". A "/" before it makes the tag self-closing, unless it
	// ends an unquoted value, as in <p a=/>.
	return name, j + 1, s[j-1] == '/' && (len(keys) == 0 || j-1 != lastVal)
}

// dropsContent reports whether bluemonday's StrictPolicy drops the content
// of the element. script and style are in its list too, but bluemonday drops
// their content through recent, and their tags leave depth alone.
func dropsContent(name string) bool {
	switch name {
	case "frame", "frameset", "iframe", "noembed", "noframes", "noscript", "nostyle", "object", "title":
		return true
	}
	return false
}

// rawTextEnd returns where the text that follows start tag name at s[i] ends
// if the tokenizer reads it raw, up to the end tag and not as markup (to the
// end of s for plaintext), or i.
func rawTextEnd(s string, i int, name string) int {
	switch name {
	case "plaintext":
		return len(s)
	case "script":
		return scriptEnd(s, i)
	case "iframe", "noembed", "noframes", "noscript", "style", "textarea", "title", "xmp":
		for i < len(s) && !endTagAt(s, i, name) {
			i++
		}
	}
	return i
}

// scriptEnd is rawTextEnd for a script, in which "<!--" starts an escaped
// state where "<script" starts a double-escaped one that hides "</script"
// until "</script" goes back to the escaped state; "-->" goes back to plain
// script data. This is x/net/html's take on the HTML standard, which also
// goes back to plain script data when, in the escaped state, a "<" is
// followed by neither "/" nor a letter.
func scriptEnd(s string, i int) int {
	const (
		data = iota
		escaped
		doubleEscaped
	)
	state, dashes := data, 0
	for ; i < len(s); i++ {
		if state == data {
			if endTagAt(s, i, "script") {
				return i
			}
			if strings.HasPrefix(s[i:], "<!--") {
				state, dashes = escaped, 2 // so "<!-->" goes back at once
				i += len("<!-")            // the loop steps over the last "-"
			}
			continue
		}
		switch s[i] {
		case '-':
			dashes++
			continue
		case '>':
			if dashes >= 2 {
				state = data
			}
		case '<':
			next := byte(0)
			if i+1 < len(s) {
				next = s[i+1]
			}
			switch {
			case state == escaped && endTagAt(s, i, "script"):
				return i
			case state == escaped && isLetter(next):
				if tagNameAt(s, i+1, "script") {
					state = doubleEscaped
					i += len("<script") // the loop steps over the byte after the name
				}
			case state == escaped && next != '/':
				state = data
			case state == doubleEscaped && next == '/' && tagNameAt(s, i+2, "script"):
				state = escaped
				i += len("</script")
			}
		}
		dashes = 0
	}
	return len(s)
}

// endTagAt reports whether s[i:] starts with "</name" that ends raw text.
func endTagAt(s string, i int, name string) bool {
	return strings.HasPrefix(s[i:], "</") && tagNameAt(s, i+2, name)
}

// tagNameAt reports whether s[i:] starts with name, in any ASCII case,
// followed by a space, "/" or ">" (not by the end of s).
func tagNameAt(s string, i int, name string) bool {
	n := i + len(name)
	return n < len(s) && lowerASCII(s[i:n]) == name && (isSpace(s[n]) || s[n] == '/' || s[n] == '>')
}

// commentEnd returns the index just past the comment whose data starts at
// s[i], after "<!--", or len(s) if it is not closed. As in x/net/html, a ">"
// closes it after two dashes or after nothing but dashes ("<!-->",
// "<!--->"), and so does "--!>"; but the byte after "--!" is consumed
// whatever it is, and "--!-" counts as one dash.
func commentEnd(s string, i int) int {
	dashes, beginning := 0, true
	for ; i < len(s); i++ {
		switch s[i] {
		case '-':
			dashes++
			continue
		case '>':
			if dashes >= 2 || beginning {
				return i + 1
			}
		case '!':
			if dashes >= 2 && i+1 < len(s) {
				i++
				switch s[i] {
				case '>':
					return i + 1
				case '-':
					dashes, beginning = 1, false
					continue
				}
			}
		}
		dashes, beginning = 0, false
	}
	return len(s)
}

// textToken is what x/net/html's Token().String() makes of a text token:
// newlines normalised, NUL replaced in raw text (not in ordinary text),
// entities decoded unless the text is raw (textarea's and title's are
// decoded), and &, ', <, >, " and \r escaped.
func textToken(raw string, rawText, unescape bool) string {
	raw = strings.ReplaceAll(strings.ReplaceAll(raw, "\r\n", "\n"), "\r", "\n")
	if rawText {
		raw = strings.ReplaceAll(raw, "\x00", "\uFFFD")
	}
	if unescape {
		raw = unescapeEntities(raw)
	}
	return strings.ReplaceAll(html.EscapeString(raw), "\r", "&#13;")
}

// unescapeEntities is x/net/html's unescape(s, false). Named references go
// to the standard html.UnescapeString, whose table is the same but for two
// entries it leaves out. Numeric ones are parsed here, as x/net/html parses
// them: it takes "&#1" at the very end of s, not "&#x;", and caps a value
// that overflows rather than wrapping it. The value then goes to
// UnescapeString in a form both read alike, for the replacement of NUL,
// surrogates, values past U+10FFFF and the Windows-1252 range.
func unescapeEntities(s string) string {
	if !strings.Contains(s, "&") {
		return s
	}
	var b strings.Builder
	for i := strings.IndexByte(s, '&'); i >= 0; i = strings.IndexByte(s, '&') {
		b.WriteString(s[:i])
		s = s[i:]
		if x, n := numericRef(s); n > 0 {
			b.WriteString(html.UnescapeString("&#" + strconv.Itoa(x) + ";"))
			s = s[n:]
			continue
		}
		n := 1
		for n < len(s) && (isLetter(s[n]) || '0' <= s[n] && s[n] <= '9') {
			n++
		}
		if n < len(s) && s[n] == ';' {
			n++
		}
		switch ref := s[:n]; ref {
		case "&nLt;": // the two left out, for being wider than their names
			b.WriteString("\u226A\u20D2")
		case "&nGt;":
			b.WriteString("\u226B\u20D2")
		default:
			b.WriteString(html.UnescapeString(ref))
		}
		s = s[n:]
	}
	b.WriteString(s)
	return b.String()
}

// numericRef parses a reference like "&#65;" or "&#x41" at the start of s as
// x/net/html does, and returns its value, capped just past U+10FFFF, and its
// length, or 0, 0.
func numericRef(s string) (x, n int) {
	if len(s) < 3 || s[1] != '#' {
		return 0, 0
	}
	base, i := 10, 2
	if s[i] == 'x' || s[i] == 'X' {
		base, i = 16, 3
	}
	start := i
	for ; i < len(s); i++ {
		d, err := strconv.ParseUint(s[i:i+1], base, 8)
		if err != nil {
			break
		}
		if x <= 0x10FFFF {
			x = x*base + int(d)
		}
	}
	if i == start {
		return 0, 0
	}
	if i < len(s) && s[i] == ';' {
		i++
	}
	return x, i
}

func isLetter(c byte) bool { return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' }

func isSpace(c byte) bool { return c == ' ' || c == '\n' || c == '\r' || c == '\t' || c == '\f' }

func skipSpace(s string, i int) int {
	for i < len(s) && isSpace(s[i]) {
		i++
	}
	return i
}

// lowerASCII lower-cases A-Z only, as the tokenizer does: strings.ToLower
// would make a script of "<scrİpt>" (U+0130), and strings.EqualFold would
// take "<noſcript>" (U+017F) for noscript.
func lowerASCII(s string) string {
	b := []byte(s)
	for i, c := range b {
		if 'A' <= c && c <= 'Z' {
			b[i] = c + 'a' - 'A'
		}
	}
	return string(b)
}
