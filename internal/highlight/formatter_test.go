package highlight

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/alecthomas/chroma/v2"
	"github.com/alecthomas/chroma/v2/formatters"
	"github.com/alecthomas/chroma/v2/styles"
)

// The copies of chroma's terminal formatters must write, byte for byte,
// what chroma's own formatters package writes, which the terminal UI and
// the Markdown code blocks used before.

// terminals are the names chroma registers its terminal formatters under.
var terminals = []string{"terminal", "terminal8", "terminal16", "terminal256", "terminal16m"}

// pythonCorpus has every kind of token the Python lexer makes, and the text
// the formatters treat specially: empty and blank lines, trailing spaces,
// tabs, unicode, very long lines, tokens that span lines.
var pythonCorpus = map[string]string{
	"sample": sample,
	"keywords": `#!/usr/bin/env python3
# -*- coding: utf-8 -*-
"""Module docstring,
over two lines."""
from __future__ import annotations
import os.path as osp, sys
from typing import Any, Optional


async def fetch(url: str, *, timeout: float = 1.5) -> Optional[bytes]:
    global CACHE
    nonlocal_ = None
    try:
        async with session.get(url) as r:
            return await r.read()
    except (ValueError, KeyError) as e:
        raise RuntimeError("bad") from e
    except* OSError:
        pass
    finally:
        del r
    while True:
        if x is not None and y not in z or not w:
            break
        elif x:
            continue
        else:
            yield from gen()
    assert isinstance(x, int), "x"
    lambda a, b=2, *c, **d: (a, b, c, d)
    match command.split():
        case [action, obj] if obj:
            print(action)
        case Point(x=0, y=_):
            ...
        case _:
            return NotImplemented

class Meta(type, metaclass=ABCMeta):
    __slots__ = ("a",)
    def __init__(self, cls, *args, **kwargs):
        super().__init__()
        self.__dict__.update(kwargs)
        print(__name__, __file__, len(args), range(3), cls)
type Alias = list[int]
`,
	"strings": `s = 'it\'s' + "say \"hi\"\n\t\\" + '\x41\u00e9\U0001F600\N{BULLET}\0\777'
r = r"\d+\.\w*" + R'\n' + b'\x00\xff' + rb"\s" + Br'\\'
u = u"unicode" + "%s is %d years, %(name)r %-5.2f %%" % (n, a)
t = """triple
    "quoted" with \t escapes and 'quotes'
""" + '''single
triple'''
f = f"{x!r:>10} {y=} {z:{width}.{prec}f} {{literal}} {'nested' + f'{a}'} {d['k']}"
g = rf"{x}\d" + fr'{y}\w' + F"{z!s}" + f"""multi
{line}
"""
h = "{0:>10} {name}".format(1, name="x") + "adjacent" "strings"
`,
	"numbers": `n = [0, 42, 1_000_000, 0x1F, 0XdeadBEEF, 0o17, 0O7, 0b1010, 0B1, 007]
f = [3.14, .5, 5., 1e-10, 1E+3, 6.02_214e23, 1.5j, 2J, 0j, 1_0.0_1]
x = -1 + +2 - ~3
`,
	"operators": `a = b + c - d * e / f // g % h ** i @ j
a += 1; a -= 1; a *= 2; a /= 2; a //= 2; a %= 2; a **= 2; a @= m
a &= 1; a |= 1; a ^= 1; a >>= 1; a <<= 1
b = (a << 2) >> 1 & 3 | 4 ^ ~5
c = a == b != c < d > e <= f >= g
if (n := len(a)) > 10: pass
def f(a, /, b, *, c) -> int: ...
x = y[1:2:3], {1: 2}, {3}, (4,), [5]
z = a if b else c; w = not a; v = a.b.c
`,
	"decorators": `@property
def x(self): return self._x

@functools.lru_cache(maxsize=None)
@a.b.c
@dataclass(frozen=True)
class C:
    @staticmethod
    def s(): ...

    @x.setter
    def x(self, v): self._x = v
`,
	"docstring": `  """A docstring, first in the source,
with \n an escape and a trailing space: 
"""
def f():
    r'''Another.'''
` +
		// The lexer's rules for docstrings, the only ones that make
		// LiteralStringDoc, read "{,2}" as text, not as a quantifier.
		`r{,2}"""doc"""` + "\n",
	"comments": `# a comment
x = 1  # trailing comment
# type: ignore
#no space
    # indented comment
'''not a docstring'''
#
`,
	"unicode": `café = "naïve — “quotes” 日本語 😀 e\u0301"
π = 3.14159  # ω, Ω, ∑, 👩‍👩‍👧
def 函数(参数): return 参数 * 2
print("العربية", 'עברית', "русский", "\u200b")
`,
	"whitespace": "\n\nx = 1   \n\t\ty = 2\t\n   \n\n\ndef f():  \n    return  \n\n\n",
	"errors":     "x = $y ? `z` ! 1 \x01\n\"unterminated\nprint('ok')\n",
	"empty":      "",
	"newline":    "\n",
	"no-newline": "x = 1",
	"long": strings.Repeat("x = 1 + 0x2F * 'ab\\n' # c ", 400) + "\n" +
		"s = \"" + strings.Repeat("long string ", 1000) + "\"\n" +
		strings.Repeat("y", 10000) + "\n",
}

// corpus is pythonCorpus as is, with CRLF line endings, and with the odd
// carriage return.
func corpus() map[string]string {
	out := map[string]string{}
	for name, code := range pythonCorpus {
		out[name] = code
		out[name+"/crlf"] = strings.ReplaceAll(code, "\n", "\r\n")
	}
	out["crlf/mixed"] = "x = 1\r\ny = '''a\r\nb\nc\r\r\nd'''\r\r\n# c\r\n\r\nz = 3\r"
	return out
}

// tokenise returns l's tokens of code, as terp's callers have them.
func tokenise(t *testing.T, l chroma.Lexer, code string) []chroma.Token {
	t.Helper()
	return tokeniseWith(t, l, nil, code)
}

func tokeniseWith(t *testing.T, l chroma.Lexer, options *chroma.TokeniseOptions, code string) []chroma.Token {
	t.Helper()
	it, err := chroma.Coalesce(l).Tokenise(options, code)
	if err != nil {
		t.Fatal(err)
	}
	return it.Tokens()
}

func format(t *testing.T, f chroma.Formatter, s *chroma.Style, tokens []chroma.Token) string {
	t.Helper()
	var b strings.Builder
	if err := f.Format(&b, s, chroma.Literator(tokens...)); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// sameBytes reports where got first differs from want.
func sameBytes(t *testing.T, what, got, want string) {
	t.Helper()
	if got == want {
		return
	}
	i := 0
	for i < len(got) && i < len(want) && got[i] == want[i] {
		i++
	}
	from := max(0, i-40)
	t.Errorf("%s: differs from chroma's at byte %d of %d (chroma's %d):\n got …%q…\nwant …%q…",
		what, i, len(got), len(want), got[from:min(len(got), i+40)], want[from:min(len(want), i+40)])
}

// nearest returns the colours of table equally nearest to c.
func nearest(table *ttyTable, c chroma.Colour) []chroma.Colour {
	var out []chroma.Colour
	best := -1.0
	for colour := range table.foreground {
		switch d := colour.Distance(c); {
		case best < 0 || d < best:
			best, out = d, []chroma.Colour{colour}
		case d == best:
			out = append(out, colour)
		}
	}
	return out
}

// resolveTies returns the style chroma's formatter of table must be given to
// write what this copy writes for s. Where a colour of s is equally near to
// two of the table's, chroma takes either, at random (it walks a map), and
// this copy the lower; the style returned has the table's colour that this
// copy takes there, so chroma finds it exactly. Other colours are left to
// both formatters' search. It also returns how many colours were tied.
func resolveTies(t *testing.T, table *ttyTable, s *chroma.Style) (*chroma.Style, int) {
	t.Helper()
	tied := map[chroma.Colour]bool{}
	resolve := func(c chroma.Colour) chroma.Colour {
		if !c.IsSet() {
			return c
		}
		near := nearest(table, c)
		if len(near) < 2 {
			return c
		}
		tied[c] = true
		got := findClosest(table, c)
		if !slices.Contains(near, got) {
			t.Errorf("%s: %v's nearest is %v, not one of %v", s.Name, c, got, near)
		}
		return got
	}
	// The formatters colour with the style as clearBackground leaves it.
	cleared := clearBackground(s)
	for _, tt := range cleared.Types() {
		e := cleared.Get(tt)
		resolve(e.Colour)
		resolve(e.Background)
	}
	if len(tied) == 0 {
		return s, 0
	}
	// A style of its own, every entry as the formatters see it: a builder
	// over the style would lose what an entry does not inherit.
	entries := chroma.StyleEntries{}
	for _, tt := range cleared.Types() {
		e := cleared.Get(tt)
		e.Colour, e.Background = resolve(e.Colour), resolve(e.Background)
		entries[tt] = e.String()
	}
	out, err := chroma.NewStyle(s.Name, entries)
	if err != nil {
		t.Fatal(err)
	}
	return out, len(tied)
}

// tableOf returns the table of the indexed formatter name, or nil for the
// true-colour one.
func tableOf(name string) *ttyTable {
	if f, ok := Formatter(name).(*indexedTTYFormatter); ok {
		return ttyTables()[f.colours]
	}
	return nil
}

// compareStyle formats every source of the corpus in style s with each
// terminal formatter, this copy's and chroma's, and returns how many
// colours of s were tied in the indexed tables.
func compareStyle(t *testing.T, s *chroma.Style, sources map[string][]chroma.Token) int {
	t.Helper()
	ties := 0
	for _, name := range terminals {
		mine, theirs := Formatter(name), formatters.Get(name)
		theirStyle := s
		if table := tableOf(name); table != nil {
			var n int
			theirStyle, n = resolveTies(t, table, s)
			ties += n
		}
		for _, src := range slices.Sorted(func(yield func(string) bool) {
			for k := range sources {
				if !yield(k) {
					return
				}
			}
		}) {
			tokens := sources[src]
			sameBytes(t, fmt.Sprintf("%s, %s, %s", name, s.Name, src),
				format(t, mine, s, tokens), format(t, theirs, theirStyle, tokens))
		}
	}
	return ties
}

func pythonSources(t *testing.T) map[string][]chroma.Token {
	out := map[string][]chroma.Token{}
	// The lexer makes each CRLF an LF, unless told not to; the formatters
	// end their escape sequences before either (they split tokens at
	// `\r?\n`).
	keepCR := &chroma.TokeniseOptions{State: "root", EnsureLF: false}
	crs := 0
	for name, code := range corpus() {
		out[name] = tokenise(t, Python(), code)
		out[name+"/cr kept"] = tokeniseWith(t, Python(), keepCR, code)
		for _, tok := range out[name+"/cr kept"] {
			if tok.Type != chroma.Text && strings.Contains(tok.Value, "\r\n") {
				crs++
			}
		}
	}
	if crs == 0 {
		t.Error("no coloured token of the corpus has a CRLF")
	}
	plain := "plain text\n\n  with \"quotes\" \r\nand CRLF\r\n"
	out["plain"] = tokenise(t, Plaintext(), plain)
	out["plain/cr kept"] = tokeniseWith(t, Plaintext(), keepCR, plain)
	return out
}

// TestFormatterAsChroma formats the corpus in the styles terp uses, with
// each terminal formatter, as chroma's formatters package does.
func TestFormatterAsChroma(t *testing.T) {
	sources := pythonSources(t)
	kinds := map[chroma.TokenType]bool{}
	for _, tokens := range sources {
		for _, tok := range tokens {
			kinds[tok.Type] = true
		}
	}
	// The corpus must hold each kind of token the lexer makes (and Error,
	// for what it does not know). Its rules for docstrings, the only ones
	// with LiteralStringDoc, never match: "{,2}" is no quantifier to
	// chroma's regular expressions.
	for _, tt := range []chroma.TokenType{
		chroma.Keyword, chroma.KeywordNamespace, chroma.KeywordConstant,
		chroma.Name, chroma.NameBuiltin, chroma.NameBuiltinPseudo, chroma.NameClass, chroma.NameFunction,
		chroma.NameFunctionMagic, chroma.NameVariableMagic, chroma.NameDecorator, chroma.NameException, chroma.NameNamespace,
		chroma.LiteralStringSingle, chroma.LiteralStringDouble,
		chroma.LiteralStringEscape, chroma.LiteralStringInterpol, chroma.LiteralStringAffix,
		chroma.LiteralNumberInteger, chroma.LiteralNumberFloat, chroma.LiteralNumberHex, chroma.LiteralNumberOct, chroma.LiteralNumberBin,
		chroma.CommentSingle, chroma.CommentHashbang,
		chroma.Operator, chroma.OperatorWord, chroma.Punctuation, chroma.Text, chroma.Error,
	} {
		if !kinds[tt] {
			t.Errorf("the corpus has no %v", tt)
		}
	}
	for _, name := range []string{"monokai", "github"} {
		if ties := compareStyle(t, Style(name), sources); ties != 0 {
			// chroma itself would colour these at random.
			t.Errorf("%s has %d colours equally near two of a table's", name, ties)
		}
	}
}

// TestFormatterNearestColoursAsChroma formats a token of every type chroma
// names in every style of chroma's, whose many colours the indexed
// formatters must find the nearest of in their tables as chroma does. (Not
// the corpus: chroma searches its table for every token, and the corpus in
// 74 styles took 45 s.)
func TestFormatterNearestColoursAsChroma(t *testing.T) {
	var every []chroma.Token
	for _, tt := range slices.Sorted(func(yield func(chroma.TokenType) bool) {
		for tt := range chroma.StandardTypes {
			if !yield(tt) {
				return
			}
		}
	}) {
		every = append(every, chroma.Token{Type: tt, Value: tt.String()}, chroma.Token{Type: chroma.Text, Value: "\n"})
	}
	sources := map[string][]chroma.Token{"every type": every}
	ties := 0
	for _, name := range styles.Names() {
		ties += compareStyle(t, styles.Get(name), sources)
	}
	if ties == 0 {
		t.Error("no style has a colour equally near two of a table's: resolveTies is untested")
	}
}

// TestFormatterColoursAsChroma colours a token with each colour of the
// tables, exactly, and with random ones, as foreground and background, as
// chroma does.
func TestFormatterColoursAsChroma(t *testing.T) {
	var colours []chroma.Colour
	for _, n := range []int{8, 16, 256} {
		colours = append(colours, ttyTables()[n].colours...)
	}
	r := rand.New(rand.NewPCG(1, 2))
	for range 3000 {
		colours = append(colours, chroma.Colour(r.IntN(1<<24)+1))
	}
	tokens := []chroma.Token{{Type: chroma.Keyword, Value: "def"}, {Type: chroma.Text, Value: " f\n"}}
	for i, fg := range colours {
		bg := colours[(i*7+3)%len(colours)]
		s := chroma.MustNewStyle("colours", chroma.StyleEntries{
			chroma.Background: "bg:#010203",
			chroma.Text:       fg.String(),
			chroma.Keyword:    "bold " + fg.String() + " bg:" + bg.String(),
		})
		for _, name := range terminals {
			theirStyle := s
			if table := tableOf(name); table != nil {
				theirStyle, _ = resolveTies(t, table, s)
			}
			sameBytes(t, fmt.Sprintf("%s, %v on %v", name, fg, bg),
				format(t, Formatter(name), s, tokens), format(t, formatters.Get(name), theirStyle, tokens))
		}
	}
}

func TestFormatterNames(t *testing.T) {
	for _, name := range terminals {
		if Formatter(name) == nil {
			t.Errorf("Formatter(%q) is nil", name)
		}
	}
	for _, name := range []string{"", "noop", "html", "svg", "json", "tokens", "Terminal256", "terminal24"} {
		if f := Formatter(name); f != nil {
			t.Errorf("Formatter(%q) is %v, not nil", name, f)
		}
	}
	tokens := tokenise(t, Python(), pythonCorpus["strings"]+"\r\n")
	sameBytes(t, "NoOp", format(t, NoOp, Style("monokai"), tokens), format(t, formatters.NoOp, Style("monokai"), tokens))
}

// TestFormatterConcurrently formats from several goroutines at once, as
// the terminal UI and the Markdown renderer may: findClosest's answers are
// shared.
func TestFormatterConcurrently(t *testing.T) {
	tokens := tokenise(t, Python(), sample)
	want := map[string]string{}
	for _, name := range terminals {
		want[name] = format(t, formatters.Get(name), Style("github"), tokens)
	}
	var wg sync.WaitGroup
	for range 8 {
		for _, name := range terminals {
			wg.Go(func() {
				var b strings.Builder
				if err := Formatter(name).Format(&b, Style("github"), chroma.Literator(tokens...)); err != nil {
					t.Error(err)
				}
				if b.String() != want[name] {
					t.Errorf("%s: differs from chroma's", name)
				}
			})
		}
	}
	wg.Wait()
}
