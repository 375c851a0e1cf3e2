package highlight

import (
	"slices"
	"testing"

	"github.com/alecthomas/chroma/v2"
	"github.com/alecthomas/chroma/v2/lexers"
	"github.com/alecthomas/chroma/v2/styles"
)

// The copies must colour code as chroma's own lexers and styles packages
// do, which the terminal UI and the exported page used before.

const sample = `import pandas as pd  # the data
df = pd.read_csv("/work/sales.csv")
@dataclass
class Row:
    n: int = 0x1F
    def f(self, *a, **k) -> str:
        return f"{self.n!r:>10} {a}" + 'x\n' + """doc"""
print(df.loc[df["revenue"].diff().idxmax(), "month"], None, True, 1e3)
`

func tokens(t *testing.T, l chroma.Lexer, code string) []chroma.Token {
	t.Helper()
	it, err := chroma.Coalesce(l).Tokenise(nil, code)
	if err != nil {
		t.Fatal(err)
	}
	return it.Tokens()
}

func TestPythonTokensAsChroma(t *testing.T) {
	got, want := tokens(t, Python(), sample), tokens(t, lexers.Get("python"), sample)
	if !slices.Equal(got, want) {
		t.Errorf("tokens differ from chroma's lexer:\n got %v\nwant %v", got, want)
	}
	plain := "a b\nc\n"
	if got, want := tokens(t, Plaintext(), plain), tokens(t, lexers.Fallback, plain); !slices.Equal(got, want) {
		t.Errorf("plain text: got %v, want %v", got, want)
	}
}

func TestLexerFindsPythonAsChroma(t *testing.T) {
	for _, name := range []string{"python", "Python", "py", "python3", "PY3", "x.py", "py2", "pycon", "bash", "go", "", "text"} {
		got := Lexer(name) != nil
		want := lexers.Get(name) == lexers.Get("python")
		if got != want {
			t.Errorf("Lexer(%q) is Python: %v, chroma's lexers.Get: %v", name, got, want)
		}
	}
}

func TestStylesAsChroma(t *testing.T) {
	for _, name := range []string{"monokai", "github"} {
		got, want := Style(name), styles.Get(name)
		for _, tt := range want.Types() {
			if g, w := got.Get(tt), want.Get(tt); g != w {
				t.Errorf("%s, %v: %v, chroma's: %v", name, tt, g, w)
			}
		}
	}
	if Style("dracula") != nil {
		t.Error("a style not copied is not nil")
	}
}
