package ansi

import (
	"testing"

	"github.com/microcosm-cc/bluemonday"
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
