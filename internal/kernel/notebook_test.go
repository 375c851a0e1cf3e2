package kernel

import (
	"bytes"
	"regexp"
	"strings"
	"testing"

	"github.com/terpdev/terp/internal/sandbox"
)

// The notebook layer (notebook.py) must make a cell written for Jupyter run
// alike in both modes, so most of these tests run every case in a kernel and
// in a script-mode worker. The cases print what they check: script mode shows
// no trailing value.

// notebookCase is a cell and what running it must give.
type notebookCase struct {
	name, code string
	exit       int
	stdout     string         // exactly, unless match is set
	match      *regexp.Regexp // stdout must match it
	stderr     string         // must be in stderr; "" wants none
}

func (c notebookCase) check(t *testing.T, res Result) {
	t.Helper()
	bad := res.ExitCode != c.exit || res.Notice != ""
	if c.match != nil {
		bad = bad || !c.match.MatchString(res.Stdout)
	} else {
		bad = bad || res.Stdout != c.stdout
	}
	if c.stderr == "" {
		bad = bad || res.Stderr != ""
	} else {
		bad = bad || !strings.Contains(res.Stderr, c.stderr)
	}
	if bad {
		want := c.stdout
		if c.match != nil {
			want = c.match.String()
		}
		t.Errorf("%s: exit %d, stdout %q, notice %q, stderr:\n%s\nwant exit %d, stdout %q, stderr with %q",
			c.name, res.ExitCode, res.Stdout, res.Notice, res.Stderr, c.exit, want, c.stderr)
	}
}

func runCases(t *testing.T, k *Kernel, cases []notebookCase) {
	t.Helper()
	for _, c := range cases {
		c.check(t, run(t, k, c.code))
	}
}

func TestNotebookEscapes(t *testing.T) {
	t.Parallel()
	eachMode(t, func(t *testing.T, k *Kernel, sbx sandbox.Sandbox) {
		runCases(t, k, []notebookCase{
			{name: "shell", code: "print('before')\n!echo hello\nprint('after')", stdout: "before\nhello\nafter\n"},
			{name: "shell output assigned", code: "x = !printf 'a\\nb\\n'\nprint(type(x).__name__, x, repr(x.s), repr(x.n), x.l is x)",
				stdout: "SList ['a', 'b'] 'a b' 'a\\nb' True\n"},
			{name: "stderr captured too", code: "y = !echo out; echo err >&2\nprint(y)", stdout: "['out', 'err']\n"},
			{name: "line magic", code: "%env GREETING=hi\nimport os\nprint(os.environ['GREETING'])",
				stdout: "env: GREETING=hi\nhi\n"},
			{name: "line magic assigned", code: "%env GREETING=hi\nd = %pwd\nv = %env GREETING\nprint(d, v)",
				stdout: "env: GREETING=hi\n/work hi\n"},
			{name: "indented", code: "for i in range(2):\n    !echo $i\n    if i:\n        %set_env N=$i\nprint('done')",
				stdout: "0\n1\nenv: N=1\ndone\n"},
			{name: "backslash continuation", code: "!echo one \\\n  two\nprint('three')", stdout: "one two\nthree\n"},
			// A line that is not Python by itself and starts with a magic's
			// name (`cd /tmp` is: a division) is that magic.
			{name: "automagic", code: "cd ../tmp\nimport os\nprint(os.getcwd())\ncd ../work", stdout: "/tmp\n/tmp\n/work\n"},
			// `%` and `!` that start a line inside a string, brackets or a
			// backslash continuation are Python's; !echo makes the cell go
			// through the transform.
			{name: "not escapes", code: "!echo start\ns = '''\n%not_a_magic\n!not_a_command\n'''\n" +
				"x = (10\n%3)\ny = 10 \\\n%3\nprint(repr(s), x, y)",
				stdout: "start\n'\\n%not_a_magic\\n!not_a_command\\n' 1 1\n"},
			{name: "plain code unchanged", code: "s = '!not'\nprint(s, 7 % 4)", stdout: "!not 3\n"},
			{name: "failing command", code: "!false\nprint('still running', _exit_code)\n!exit 3\nprint(_exit_code)",
				stdout: "still running 1\n3\n"},
			{name: "shell sees the run's streams", code: "!echo out; echo err >&2", stdout: "out\n", stderr: "err\n"},
			{name: "no input", code: "!cat\nprint('not waiting')", stdout: "not waiting\n"},
			{name: "shell list of /work", code: "open('/work/listed.txt', 'w').close()\nfiles = !ls /work\n" +
				"print(isinstance(files, list), 'listed.txt' in files)", stdout: "True True\n"},
		})
	})
}

func TestNotebookVarExpansion(t *testing.T) {
	t.Parallel()
	eachMode(t, func(t *testing.T, k *Kernel, sbx sandbox.Sandbox) {
		runCases(t, k, []notebookCase{
			{name: "names and expressions", code: "name = 'world'\n!printf '%s\\n' $name ${name} {name.upper()} {len(name) * 2}",
				stdout: "world\nworld\nWORLD\n10\n"},
			{name: "$$ is $", code: "!x=shell; echo $$x", stdout: "shell\n"},
			// The braces and $1 are awk's: the expansion fails, and the
			// command runs as written.
			{name: "awk", code: "!printf 'a b\\nc d\\n' | awk '{print $2}'", stdout: "b\nd\n"},
			{name: "not in single quotes", code: "name = 'world'\n!echo '$name' $name", stdout: "$name world\n"},
			{name: "the caller's locals first", code: "name = 'global'\ndef f():\n    name = 'local'\n    !echo $name\nf()\n!echo $name",
				stdout: "local\nglobal\n"},
			{name: "line magics", code: "v = 'expanded'\n%set_env E=$v\n%env F={v[:3]}", stdout: "env: E=expanded\nenv: F=exp\n"},
		})
	})
}

func TestNotebookErrors(t *testing.T) {
	t.Parallel()
	eachMode(t, func(t *testing.T, k *Kernel, sbx sandbox.Sandbox) {
		file := "<cell"
		if k.opt.Fresh {
			file = "/work/.terp/main.py"
		}
		runCases(t, k, []notebookCase{
			// IPython's words, without a traceback; the rest of the cell does
			// not run.
			{name: "unknown line magic", code: "print('ran')\n%foo bar\nprint('not reached')", exit: 1,
				stdout: "ran\n", stderr: "UsageError: Line magic function `%foo` not found.\n"},
			{name: "unknown cell magic", code: "%%foo\nprint('not reached')", exit: 1,
				stderr: "UsageError: Cell magic `%%foo` not found.\n"},
			{name: "wrong arguments", code: "%timeit -z 1\nprint('not reached')", exit: 1,
				stderr: "UsageError: option -z not recognized by %timeit\n"},
			// Every line stays a line: the error's line number is the cell's.
			{name: "error after a magic", code: "%matplotlib inline\n!true\nx = 1\n1 / 0", exit: 1,
				stderr: file}, // checked below
			{name: "syntax error after a magic", code: "%env A=1\nx = (", exit: 1, stdout: "",
				stderr: "line 2\n    x = (\n        ^\nSyntaxError: '(' was never closed\n"},
			{name: "syntax error without magics", code: "x = 1\ny = (", exit: 1,
				stderr: "line 2\n    y = (\n        ^\nSyntaxError: '(' was never closed\n"},
			{name: "error in a cell magic's body", code: "%%time\nx = 1\n1 / 0", exit: 1, stderr: "ZeroDivisionError"},
			{name: "syntax error in a cell magic's body", code: "%%time\nx = 1\ny = (", exit: 1,
				stderr: "line 3\n    y = (\n        ^\nSyntaxError: '(' was never closed\n"},
		})
		for _, c := range []struct{ code, line string }{
			{"%matplotlib inline\n!true\nx = 1\n1 / 0", `line 4, in <module>` + "\n    1 / 0\n"},
			{"%%time\nx = 1\n1 / 0", `line 3, in <module>` + "\n    1 / 0\n"},
		} {
			res := run(t, k, c.code)
			if !strings.Contains(res.Stderr, file) || !strings.Contains(res.Stderr, c.line) ||
				strings.Contains(res.Stderr, "notebook.py") || strings.Contains(res.Stderr, "worker.py") {
				t.Errorf("%q: traceback\n%s\nwant the cell's %s, without terp's frames", c.code, res.Stderr, c.line)
			}
		}
		// A SyntaxError of a magic's body has the body's own line.
		res := run(t, k, "%%time\nx = 1\ny = (")
		if strings.Contains(res.Stderr, "ast.py") {
			t.Errorf("the body's SyntaxError shows the compile's frames:\n%s", res.Stderr)
		}
	})
}

var (
	timeLines = `CPU times: user [0-9.e+]+ [mµn]?s, sys: [0-9.e+]+ [mµn]?s, total: [0-9.e+]+ [mµn]?s\nWall time: [0-9.e+]+ [mµn]?s\n`
	// The first line is IPython's, when the machine's noise made a run slow.
	timeitRe = regexp.MustCompile(`^(The slowest run took [0-9.]+ times longer than the fastest\. This could mean that an intermediate result is being cached\.\n)?[0-9.]+ [mµn]?s ± [0-9.]+ [mµn]?s per loop \(mean ± std\. dev\. of 3 runs, 10 loops each\)\n$`)
)

func TestNotebookTiming(t *testing.T) {
	t.Parallel()
	eachMode(t, func(t *testing.T, k *Kernel, sbx sandbox.Sandbox) {
		runCases(t, k, []notebookCase{
			{name: "%time statement", code: "%time x = sum(range(100))\nprint(x)", match: regexp.MustCompile("^" + timeLines + "4950\n$")},
			{name: "%time expression", code: "y = %time sum(range(10))\nprint(y)", match: regexp.MustCompile("^" + timeLines + "45\n$")},
			{name: "%%time", code: "%%time\nx = 2\nprint(x * 3)", match: regexp.MustCompile("^6\n" + timeLines + "$")},
			{name: "%timeit", code: "%timeit -n 10 -r 3 sum(range(100))", match: timeitRe},
			{name: "%%timeit", code: "%%timeit -n 10 -r 3 data = list(range(100))\nsorted(data)", match: timeitRe},
			{name: "%timeit -q -o", code: "r = %timeit -q -o -n 5 -r 2 pass\nprint(r.loops, r.repeat, len(r.all_runs))", stdout: "5 2 2\n"},
		})
	})
}

func TestNotebookMagics(t *testing.T) {
	t.Parallel()
	eachMode(t, func(t *testing.T, k *Kernel, sbx sandbox.Sandbox) {
		runCases(t, k, []notebookCase{
			{name: "%%capture", code: "%%capture\nprint('hidden')\n!echo hidden too\nimport sys\nprint('hidden', file=sys.stderr)"},
			{name: "%%capture var", code: "%%capture out\nprint('kept')\n!echo shell\ndisplay('shown')"},
			{name: "%%capture --no-stdout", code: "%%capture --no-stdout\nprint('seen')", stdout: "seen\n"},
			{name: "%%writefile", code: "%%writefile /work/note.txt\nline one\nline two", stdout: "Writing /work/note.txt\n"},
			{name: "%%writefile again", code: "%%writefile note.txt\nnew", stdout: "Overwriting note.txt\n"},
			{name: "%%writefile -a", code: "%%writefile -a note.txt\nmore", stdout: "Appending to note.txt\n"},
			{name: "written", code: "print(repr(open('note.txt').read()))", stdout: "'new\\nmore\\n'\n"},
			{name: "%cd then a relative open", code: "import os\nos.makedirs('/work/sub', exist_ok=True)\n%cd sub\n" +
				"open('rel.txt', 'w').write('x')\n%cd -\nprint(os.path.exists('/work/sub/rel.txt'), os.getcwd())",
				stdout: "/work/sub\n/work\nTrue /work\n"},
			{name: "%env", code: "%env COLOR blue\n%env COLOR=red\nc = %env COLOR\nall_ = %env\nprint(c, all_['COLOR'])",
				stdout: "env: COLOR=blue\nenv: COLOR=red\nred red\n"},
			{name: "%env of a missing variable", code: "%env NO_SUCH_VAR", exit: 1,
				stderr: "UsageError: Environment does not have key: NO_SUCH_VAR\n"},
			{name: "%%bash", code: "%%bash\nfor i in 1 2; do echo $i; done\necho oops >&2", stdout: "1\n2\n", stderr: "oops\n"},
			{name: "%%script python3", code: "%%script python3\nprint(6 * 7)", stdout: "42\n"},
			{name: "%%sh in %%capture's reach", code: "%%capture c\n!echo x", stdout: ""},
			{name: "%%html", code: "%%html\n<b>bold</b>", stdout: "<b>bold</b>\n"},
			{name: "%%markdown", code: "%%markdown\n# Title", stdout: "# Title\n"},
			{name: "aliases", code: "%mkdir -p /work/aliased\n%ls /work/aliased\n!touch /work/aliased/f\n%ls /work/aliased\n%rm -r /work/aliased",
				stdout: "f\n"},
			{name: "%matplotlib", code: "%matplotlib inline\n%matplotlib widget\n%config InlineBackend.figure_format = 'retina'",
				stdout: "%matplotlib widget is not available: terp shows figures as images only, as %matplotlib inline does.\n"},
			{name: "accepted magics", code: "%load_ext autoreload\n%autoreload 2\n%reload_ext autoreload\nprint('ok')", stdout: "ok\n"},
			{name: "%conda", code: "%conda install numpy\nprint('went on')", stdout: "went on\n",
				stderr: "terp: conda is not available in this sandbox; install packages with %pip install instead.\n"},
			{name: "%run", code: "open('/work/prog.py', 'w').write('import sys\\nprint(__name__, sys.argv[1:])\\nanswer = 42\\n')\n" +
				"%run prog.py a 'b c'\nprint(answer)", stdout: "__main__ ['a', 'b c']\n42\n"},
			{name: "%xmode", code: "%xmode plain", stdout: "Exception reporting mode: Plain\n"},
		})
		if !k.opt.Fresh {
			wantOK(t, run(t, k, "print(repr(out.stdout), repr(out.stderr), len(out.outputs))\nout.show()"),
				"'kept\\nshell\\n' '' 1\nkept\nshell\n'shown'\n")
		}
	})
}

func TestNotebookWho(t *testing.T) {
	t.Parallel()
	eachMode(t, func(t *testing.T, k *Kernel, sbx sandbox.Sandbox) {
		runCases(t, k, []notebookCase{
			{name: "empty", code: "%who", stdout: "Interactive namespace is empty.\n"},
			{name: "names", code: "import os\nb = 2\na = 'x'\n_hidden = 1\n%who", stdout: "a\t b\t os\t \n"},
			{name: "by type", code: "import os\nb = 2\na = 'x'\n%who int str\nnames = %who_ls\nprint(names)\ndel names", stdout: "a\t b\t \n['a', 'b', 'os']\n"},
			{name: "whos", code: "b = 2\na = 'x'\nimport os\ndel os\n%whos",
				stdout: "Variable   Type    Data/Info\n----------------------------\na          str     x\nb          int     2\n"},
		})
	})
}

func TestNotebookHelp(t *testing.T) {
	t.Parallel()
	eachMode(t, func(t *testing.T, k *Kernel, sbx sandbox.Sandbox) {
		file := `<cell \d+>`
		if k.opt.Fresh {
			file = "/work/.terp/main.py"
		}
		def := "def f(a, b=2):\n    \"Adds.\"\n    return a + b\n"
		pinfo := regexp.MustCompile("^Signature: f\\(a, b=2\\)\nDocstring: Adds.\nFile:      " + file + "\nType:      function\n\n$")
		runCases(t, k, []notebookCase{
			{name: "obj?", code: def + "f?", match: pinfo},
			{name: "?obj", code: def + "?f", match: pinfo},
			{name: "obj??", code: def + "f??", match: regexp.MustCompile(`(?s)^Signature: f\(a, b=2\)\nSource:   \ndef f\(a, b=2\):\n    "Adds."\n    return a \+ b\nFile: .*Type:      function\n\n$`)},
			{name: "??obj", code: def + "??f", match: regexp.MustCompile(`(?s)^Signature: f\(a, b=2\)\nSource:   \ndef f`)},
			{name: "an instance", code: "x = [1, 2, 3]\nx?", match: regexp.MustCompile(`^Type:        list\nString form: \[1, 2, 3\]\nLength:      3\nDocstring:  \nBuilt-in mutable sequence\.`)},
			{name: "a method", code: "str.upper?", match: regexp.MustCompile(`^Signature: str.upper\(self, /\)\nDocstring: Return a copy`)},
			{name: "not found", code: "no_such_name?", stdout: "Object `no_such_name` not found.\n"},
			{name: "a magic", code: "%time?", match: regexp.MustCompile(`^Docstring:\nTimes a statement`)},
		})
	})
}

func TestNotebookDisplay(t *testing.T) {
	t.Parallel()
	eachMode(t, func(t *testing.T, k *Kernel, sbx sandbox.Sandbox) {
		runCases(t, k, []notebookCase{
			{name: "a DataFrame", code: "import pandas as pd\ndisplay(pd.DataFrame({'a': [1, 2], 'b': [3, 4]}))",
				stdout: "   a  b\n0  1  3\n1  2  4\n"},
			{name: "in order", code: "print('first')\ndisplay(1, 'two')\nprint('last')", stdout: "first\n1\n'two'\nlast\n"},
			{name: "only _repr_html_", code: "class H:\n    def _repr_html_(self):\n        return '<p>html</p>'\ndisplay(H())",
				stdout: "<p>html</p>\n"},
			{name: "markdown and latex hooks", code: "class M:\n    def _repr_markdown_(self):\n        return '*md*'\n" +
				"class L:\n    def _repr_latex_(self):\n        return r'$x^2$'\ndisplay(M(), L())", stdout: "*md*\n$x^2$\n"},
			{name: "_ipython_display_", code: "class D:\n    def _ipython_display_(self):\n        print('displayed itself')\ndisplay(D())",
				stdout: "displayed itself\n"},
			{name: "raw", code: "display({'text/plain': 'plain', 'text/html': '<i>h</i>'}, raw=True)", stdout: "plain\n"},
			{name: "clear_output and update_display", code: "from IPython.display import clear_output, update_display\n" +
				"h = display('a', display_id=True)\nclear_output()\nupdate_display('b', display_id=h.display_id)\nh.update('c')",
				stdout: "'a'\n'b'\n'c'\n"},
			{name: "bounded", code: "class Big:\n    def __repr__(self):\n        return 'x' * 30000\ndisplay(Big())",
				stdout: strings.Repeat("x", 20000) + "\n[... repr cut at 20000 of 30000 characters ...]\n"},
		})
	})
}

// TestNotebookRealIPython checks that the real IPython, when the sandbox has
// one, gives terp's display and get_ipython.
func TestNotebookRealIPython(t *testing.T) {
	t.Parallel()
	eachMode(t, func(t *testing.T, k *Kernel, sbx sandbox.Sandbox) {
		if res := run(t, k, "import IPython"); res.ExitCode != 0 {
			t.Skip("the sandbox's Python has no IPython")
		}
		runCases(t, k, []notebookCase{
			{name: "real", code: "import IPython\nprint(getattr(IPython, '__terp_shim__', False))", stdout: "False\n"},
			{name: "imports", code: "from IPython.display import display as d, Markdown, HTML, Latex, Math\n" +
				"from IPython import get_ipython as g\nfrom IPython.core.getipython import get_ipython as g2\n" +
				"print(g() is get_ipython() is g2(), d.__module__)\n" +
				"d(Markdown('# title'), HTML('<b>b</b>'), Latex(r'$\\alpha$'), Math('x^2'))",
				stdout: "True _terp_notebook\n# title\n<b>b</b>\n$\\alpha$\n$\\displaystyle x^2$\n"},
		})
		wantImageDisplayed(t, k, sbx)
	})
}

// TestNotebookShim checks terp's stand-in for IPython, served when the
// sandbox has none (as the Docker image has none). The machine that runs the
// tests may have one, so the cell hides it the way an uninstalled package is
// hidden: a finder first on sys.meta_path asks every other finder but the
// path finder, which is what would find an installed IPython. The finder
// that then answers must be terp's; nothing in the worker is changed for
// the test.
func TestNotebookShim(t *testing.T) {
	t.Parallel()
	const hide = `import sys, importlib.machinery
class HideInstalled:
    def find_spec(self, name, path, target=None):
        if name != "IPython" and not name.startswith("IPython."):
            return None
        for finder in sys.meta_path:
            if type(finder).__name__ != "HideInstalled" and finder is not importlib.machinery.PathFinder:
                spec = finder.find_spec(name, path, target)
                if spec is not None:
                    return spec
        raise ModuleNotFoundError("No module named %r" % name, name=name)
if not any(type(f).__name__ == "HideInstalled" for f in sys.meta_path):
    sys.meta_path.insert(0, HideInstalled())
`
	eachMode(t, func(t *testing.T, k *Kernel, sbx sandbox.Sandbox) {
		runCases(t, k, []notebookCase{
			{name: "stand-in", code: hide + "import IPython\nfrom IPython.display import display as d, Markdown, HTML, JSON, Pretty\n" +
				"from IPython.core.display import Latex\nfrom IPython import get_ipython as g\nimport builtins\n" +
				"print(IPython.__terp_shim__, g() is builtins.get_ipython())\n" +
				"d(Markdown('**md**'), HTML('<i>h</i>'), Latex('$y$'), JSON({'a': 1}), Pretty('pretty'))\n" +
				"print(repr(HTML('x')))",
				stdout: "True True\n**md**\n<i>h</i>\n$y$\n{\n  \"a\": 1\n}\npretty\n<IPython.core.display.HTML object>\n"},
			{name: "no other submodule", code: hide + "import IPython.terminal", exit: 1, stderr: "ModuleNotFoundError"},
			// matplotlib asks IPython's pylabtools when it finds a shell.
			{name: "matplotlib", code: hide + "import IPython\nimport matplotlib.pyplot as plt\nfig = plt.figure()\nprint('ok')", stdout: "ok\n"},
		})
		run(t, k, hide+"import IPython") // the stand-in stays imported in a kernel
		wantImageDisplayed(t, k, sbx)
	})
}

// wantImageDisplayed displays a PNG with IPython.display.Image (the real one
// or terp's) and checks it was saved as a figure, byte for byte.
func wantImageDisplayed(t *testing.T, k *Kernel, sbx sandbox.Sandbox) {
	t.Helper()
	res := run(t, k, "import matplotlib\nmatplotlib.use('Agg')\nimport matplotlib.pyplot as plt\n"+
		"fig = plt.figure()\nplt.plot([1, 2])\nfig.savefig('/work/source.png')\nplt.close(fig)\n"+
		"from IPython.display import Image\ndisplay(Image(filename='/work/source.png'))\n"+
		"display(Image(open('/work/source.png', 'rb').read()))")
	m := regexp.MustCompile(`^\[image saved as /work/(figure_\d+\.png)\]\n\[image saved as /work/(figure_\d+\.png)\]\n$`).FindStringSubmatch(res.Stdout)
	if res.ExitCode != 0 || m == nil {
		t.Fatalf("displaying an Image: exit %d, stdout %q, stderr:\n%s", res.ExitCode, res.Stdout, res.Stderr)
	}
	want := readFile(t, sbx, "/work/source.png")
	for _, name := range m[1:] {
		if got := readFile(t, sbx, "/work/"+name); !bytes.Equal(got, want) {
			t.Errorf("%s is not the image displayed (%d bytes, want %d)", name, len(got), len(want))
		}
	}
}

func TestNotebookFigures(t *testing.T) {
	t.Parallel()
	sbx := newSandbox(t)
	k := startKernel(t, sbx, Options{})
	// %matplotlib inline changes nothing: figures are saved as before.
	wantOK(t, run(t, k, "%matplotlib inline\nimport matplotlib.pyplot as plt\nplt.plot([1, 2]);"), "")
	wantFiguresSaved(t, k, sbx, "figure_1.png")
	// A displayed figure is saved once, when it is displayed.
	wantOK(t, run(t, k, "fig, ax = plt.subplots()\nax.bar(['a'], [1])\ndisplay(fig)\nprint('after')"),
		"[image saved as /work/figure_2.png]\nafter\n")
	wantFiguresSaved(t, k, sbx, "figure_2.png", "figure_1.png")
	// A figure as a cell's last value too; changed after, it is saved again.
	wantOK(t, run(t, k, "fig, ax = plt.subplots()\nax.plot([3, 1])\nfig"), "[image saved as /work/figure_3.png]\n")
	wantFiguresSaved(t, k, sbx, "figure_3.png", "figure_1.png", "figure_2.png")
	if got := currentValue(k); got != "[image saved as /work/figure_3.png]" {
		t.Errorf("the value of a figure is %q", got)
	}

	// In script mode, display saves it, and nothing else does.
	s := startKernel(t, sbx, Options{Fresh: true})
	res := run(t, s, "import matplotlib.pyplot as plt\nfig = plt.figure()\nplt.plot([1, 2])\ndisplay(fig)")
	if res.ExitCode != 0 || res.Stdout != "[image saved as /work/figure_4.png]\n" {
		t.Errorf("display of a figure in script mode: exit %d, stdout %q, stderr:\n%s", res.ExitCode, res.Stdout, res.Stderr)
	}
	if data := readFile(t, sbx, "/work/figure_4.png"); !bytes.HasPrefix(data, pngMagic) {
		t.Errorf("figure_4.png is not a PNG")
	}
}

// currentValue is the value the kernel's last run showed.
func currentValue(k *Kernel) string {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.last.Value == nil {
		return ""
	}
	return *k.last.Value
}

// TestNotebookValues checks what a kernel shows of a cell's last value: what
// display shows, and a plain builtin value as it always was.
func TestNotebookValues(t *testing.T) {
	t.Parallel()
	k := startKernel(t, newSandbox(t), Options{})
	// Plain cells never load the notebook layer, a DataFrame's repr
	// (pandas asks get_ipython() whether it runs in a notebook) included.
	wantOK(t, run(t, k, "import pandas as pd\nprint(pd.DataFrame({'a': [1]}))\nx = [1, 'a', {2: (3.0, None)}]\nx"),
		"   a\n0  1\n[1, 'a', {2: (3.0, None)}]\n")
	wantOK(t, run(t, k, "import sys\n'_terp_notebook' in sys.modules"), "False\n")
	for _, tt := range []struct{ code, want string }{
		{"from IPython.display import Markdown\nMarkdown('**x**')", "**x**"},
		{"class H:\n    def _repr_html_(self):\n        return '<p>h</p>'\nH()", "<p>h</p>"},
		{"%pwd", "'/work'"},
		{"!!echo hi", "['hi']"},
		{"%time 6 * 7", "42"},
		{"%time 6 * 7;", ""},
		{"import numpy as np\nnp.arange(3)", "array([0, 1, 2])"},
	} {
		res := run(t, k, tt.code)
		if res.ExitCode != 0 || !strings.HasSuffix(res.Stdout, tt.want+"\n") && tt.want != "" || currentValue(k) != tt.want {
			t.Errorf("%q: exit %d, stdout %q, value %q, stderr:\n%s\nwant the value %q", tt.code, res.ExitCode,
				res.Stdout, currentValue(k), res.Stderr, tt.want)
		}
	}
}

func TestNotebookPlainScript(t *testing.T) {
	t.Parallel()
	s := startScript(t)
	// No run loads the layer unless it uses it, nor finds it loaded by an
	// earlier run's use.
	wantOK(t, run(t, s, "display('used')"), "'used'\n")
	wantOK(t, run(t, s, "import sys\nprint('_terp_notebook' in sys.modules, get_ipython().__class__.__name__)"), "False TerpShell\n")
}

func TestNotebookAceTools(t *testing.T) {
	t.Parallel()
	eachMode(t, func(t *testing.T, k *Kernel, sbx sandbox.Sandbox) {
		code := "import pandas as pd\nimport ace_tools as tools\n" +
			"df = pd.DataFrame({'region': ['north', 'south'] * 8, 'sales': range(16)})\n" +
			"r = tools.display_dataframe_to_user(name='Sales by region', dataframe=df)\n" +
			"from caas_jupyter_tools import display_dataframe_to_user\n" +
			"display_dataframe_to_user('Sales by region', {'a': [1]})\n" +
			"back = pd.read_csv('/work/Sales_by_region.csv')\nprint(r, back.equals(df), open('/work/Sales_by_region-2.csv').read())"
		res := run(t, k, code)
		want := "Sales by region: 16 rows × 2 columns, saved as /work/Sales_by_region.csv\n" +
			"  region  sales\n0  north      0\n1  south      1\n"
		if res.ExitCode != 0 || !strings.HasPrefix(res.Stdout, want) ||
			!strings.Contains(res.Stdout, "9  south      9\n[first 10 of 16 rows]\n") ||
			!strings.Contains(res.Stdout, "saved as /work/Sales_by_region-2.csv\n   a\n0  1\n") ||
			!strings.HasSuffix(res.Stdout, "None True a\n1\n\n") {
			t.Errorf("exit %d, stdout:\n%s\nstderr:\n%s", res.ExitCode, res.Stdout, res.Stderr)
		}
	})
}

// TestNotebookPip runs %pip without a network: it says so in one line and
// the cell goes on. (Installs through the network allowlist are tested apart,
// with a network.)
func TestNotebookPip(t *testing.T) {
	t.Parallel()
	eachMode(t, func(t *testing.T, k *Kernel, sbx sandbox.Sandbox) {
		for _, code := range []string{"%pip install tinypkg", "!pip install -q tinypkg", "pip install tinypkg",
			"!python3 -m pip install tinypkg", "import sys\n!{sys.executable} -m pip install tinypkg"} {
			res := run(t, k, code+"\nprint('went on')")
			if res.ExitCode != 0 || res.Stdout != "went on\n" || strings.Count(res.Stderr, "\n") != 1 ||
				!strings.HasPrefix(res.Stderr, "terp: this sandbox has no network") ||
				!strings.Contains(res.Stderr, "--network allowlist") {
				t.Errorf("%q: exit %d, stdout %q, stderr:\n%s", code, res.ExitCode, res.Stdout, res.Stderr)
			}
		}
		// What needs no index runs, as pip: its output and IPython's note.
		res := run(t, k, "%pip --version")
		if res.ExitCode != 0 || !strings.HasPrefix(res.Stdout, "pip ") ||
			!strings.HasSuffix(res.Stdout, "\nNote: you may need to restart the kernel to use updated packages.\n") {
			t.Errorf("%%pip --version: exit %d, stdout %q, stderr:\n%s", res.ExitCode, res.Stdout, res.Stderr)
		}
	})
}

// TestNotebookTransformIsPure checks that script mode keeps nothing from a
// run that used the notebook layer: the worker transforms cells, which must
// leave no state in it.
func TestNotebookTransformIsPure(t *testing.T) {
	t.Parallel()
	s := startScript(t)
	wantOK(t, run(t, s, "%cd /tmp\n%env LEAK=1\nx = 1\n%who"), "/tmp\nenv: LEAK=1\nx\t \n")
	wantOK(t, run(t, s, "%who\nimport os\nprint(os.getcwd(), os.environ.get('LEAK'))"), "Interactive namespace is empty.\n/work None\n")
}

// TestNotebookInternalFiles checks that a run cannot break the notebook layer
// by writing over its file: the worker read it at start.
func TestNotebookInternalFiles(t *testing.T) {
	t.Parallel()
	eachMode(t, func(t *testing.T, k *Kernel, sbx sandbox.Sandbox) {
		wantOK(t, run(t, k, "open('/work/.terp/notebook.py', 'w').write('raise SystemExit(9)')\n"+
			"open('/work/.terp/notebook.cache', 'w').write('garbage');"), "")
		wantOK(t, run(t, k, "!echo still\ndisplay('works')"), "still\n'works'\n")
	})
}
