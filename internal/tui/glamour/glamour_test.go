package glamour

import (
	"fmt"
	"strings"
	"testing"

	upstream "github.com/charmbracelet/glamour"
	"github.com/muesli/termenv"
)

// answer has what a model's answer holds, and a little of everything else
// glamour draws. Its Python has no comment: the dark style colours comments
// #676767, which lies exactly between two of the terminal's 256 colours,
// and chroma's formatter, which glamour uses, takes either, at random once
// per process (it walks a map); terp's copy (internal/highlight) always
// takes the lower.
const answer = `# Growth by month

**December** grew the most: revenue rose by ` + "`26,450`" + ` over _November_.
See [the chart](chart.png) and https://github.com/terpdev/terp/issues/35.

- it is the holiday season
  1. nested, numbered
- [x] done ~~struck~~

> A quote, with <b>HTML</b> &amp; an entity.

| month | revenue |
|-------|--------:|
| 2025-11 | 100 |
| 2025-12 | 26,550 |

` + "```python" + `
import pandas as pd
df = pd.read_csv("/work/sales.csv")
print(df.loc[df["revenue"].diff().idxmax(), "month"], 0x1F, f"{1e3!r}")
` + "```" + `

` + "```py" + `
x = 1
` + "```" + `

    indented = "code"

<div>an HTML block <script>gone()</script>&amp; <i>kept</i></div>

Term
: its definition

---
Done.
`

// TestRendersAsGlamour renders the same Markdown with this copy and with
// glamour v1.0.0 itself, in every style and colour profile terp uses: the
// copy exists to start faster, not to look different.
func TestRendersAsGlamour(t *testing.T) {
	for _, style := range []string{DarkStyle, LightStyle, NoTTYStyle} {
		for _, profile := range []termenv.Profile{termenv.TrueColor, termenv.ANSI256, termenv.ANSI, termenv.Ascii} {
			for _, width := range []int{40, 100} {
				t.Run(fmt.Sprintf("%s/%v/%d", style, profile, width), func(t *testing.T) {
					ours, err := NewTermRenderer(WithStandardStyle(style), WithColorProfile(profile), WithWordWrap(width))
					if err != nil {
						t.Fatal(err)
					}
					theirs, err := upstream.NewTermRenderer(upstream.WithStandardStyle(style), upstream.WithColorProfile(profile), upstream.WithWordWrap(width))
					if err != nil {
						t.Fatal(err)
					}
					got, err := ours.Render(answer)
					if err != nil {
						t.Fatal(err)
					}
					want, err := theirs.Render(answer)
					if err != nil {
						t.Fatal(err)
					}
					g, w := strings.Split(got, "\n"), strings.Split(want, "\n")
					for i := range min(len(g), len(w)) {
						if g[i] != w[i] {
							t.Fatalf("line %d differs from glamour's:\n got %q\nwant %q", i+1, g[i], w[i])
						}
					}
					if len(g) != len(w) {
						t.Errorf("%d lines, glamour %d", len(g), len(w))
					}
				})
			}
		}
	}
}

func TestUnknownStyle(t *testing.T) {
	if _, err := NewTermRenderer(WithStandardStyle("pink")); err == nil {
		t.Error("a style terp does not have was accepted")
	}
}
