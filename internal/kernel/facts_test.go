package kernel

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/terpdev/terp/internal/sandbox"
)

// These tests check the facts of a Result that a protocol forwards
// (Jupyter's error, execute_result and display_data messages): the
// exception, the cell number, the figures, the outcome and the restart.

// wantException fails unless res ended with the exception name(value),
// whose traceback holds lines in this order (as whole lines), names none of
// terp's files, and is what the model read on stderr.
func wantException(t testing.TB, res Result, name, value string, lines ...string) {
	t.Helper()
	e := res.Exception
	if e == nil {
		t.Fatalf("no exception reported; exit %d, outcome %q, stderr:\n%s", res.ExitCode, res.Outcome, res.Stderr)
	}
	if e.Name != name || e.Value != value || res.Outcome != OutcomeError {
		t.Errorf("exception %s(%q), outcome %q; want %s(%q), %q", e.Name, e.Value, res.Outcome, name, value, OutcomeError)
	}
	at := 0
	for _, l := range e.Traceback {
		if at < len(lines) && l == lines[at] {
			at++
		}
		if strings.Contains(l, "worker.py") || strings.Contains(l, "notebook.py") || strings.Contains(l, "\n") {
			t.Errorf("traceback line %q: a line of terp's, or more than a line", l)
		}
	}
	if at < len(lines) {
		t.Errorf("traceback %q lacks %q (in this order)", e.Traceback, lines[at:])
	}
	if len(e.Traceback) > 0 && !strings.Contains(res.Stderr, strings.Join(e.Traceback, "\n")+"\n") {
		t.Errorf("traceback %q is not what stderr shows:\n%s", e.Traceback, res.Stderr)
	}
}

func TestExceptionIsReported(t *testing.T) {
	eachMode(t, func(t *testing.T, k *Kernel, _ sandbox.Sandbox) {
		file := func(res Result) string {
			if k.opt.Fresh {
				return `"/work/.terp/main.py"`
			}
			return fmt.Sprintf(`"<cell %d>"`, res.Cell)
		}

		res := run(t, k, "def f():\n    return 1 / 0\nf()")
		wantException(t, res, "ZeroDivisionError", "division by zero",
			"Traceback (most recent call last):", "  File "+file(res)+", line 3, in <module>",
			"  File "+file(res)+", line 2, in f", "    return 1 / 0", "ZeroDivisionError: division by zero")
		if last := res.Exception.Traceback[len(res.Exception.Traceback)-1]; last != "ZeroDivisionError: division by zero" {
			t.Errorf("the traceback ends with %q", last)
		}

		res = run(t, k, "def f():\n    return 1 / 0\ntry:\n    {}['k']\nexcept KeyError:\n"+
			"    try:\n        f()\n    except ZeroDivisionError as z:\n        raise ValueError('bad') from z")
		wantException(t, res, "ValueError", "bad",
			"KeyError: 'k'", "During handling of the above exception, another exception occurred:",
			"ZeroDivisionError: division by zero", "The above exception was the direct cause of the following exception:",
			"  File "+file(res)+", line 9, in <module>", "ValueError: bad")

		// A SyntaxError's traceback is the formatted error alone.
		res = run(t, k, "x = (")
		name := strings.Trim(file(res), `"`)
		if k.opt.Fresh {
			name = "main.py"
		}
		wantException(t, res, "SyntaxError", "'(' was never closed ("+name+", line 1)")
		if want := []string{"  File " + file(res) + ", line 1", "    x = (", "        ^", "SyntaxError: '(' was never closed"}; !slices.Equal(res.Exception.Traceback, want) {
			t.Errorf("SyntaxError traceback %q, want %q", res.Exception.Traceback, want)
		}

		// A magic misused prints no traceback, as in IPython.
		res = run(t, k, "%nosuchmagic")
		wantException(t, res, "UsageError", "Line magic function `%nosuchmagic` not found.")
		if len(res.Exception.Traceback) != 0 || res.Stderr != "UsageError: Line magic function `%nosuchmagic` not found.\n" {
			t.Errorf("UsageError: traceback %q, stderr %q", res.Exception.Traceback, res.Stderr)
		}

		res = run(t, k, "import sys\nsys.exit(3)")
		wantException(t, res, "SystemExit", "3")
		if res.ExitCode != 3 {
			t.Errorf("sys.exit(3): exit %d", res.ExitCode)
		}

		for _, code := range []string{"print('fine')", "import sys\nsys.exit(0)"} {
			if res := run(t, k, code); res.Exception != nil || res.Outcome != OutcomeOK || res.Notice != "" {
				t.Errorf("%q: exception %+v, outcome %q, notice %q", code, res.Exception, res.Outcome, res.Notice)
			}
		}
	})
}

// TestCellNumbers: a kernel's cells are numbered as a notebook's are, from
// 1 again after a restart, as the tracebacks name them; a script's runs
// keep counting, since each is a program of its own anyway.
func TestCellNumbers(t *testing.T) {
	eachMode(t, func(t *testing.T, k *Kernel, _ sandbox.Sandbox) {
		for want := 1; want <= 3; want++ {
			if res := run(t, k, "x = 1"); res.Cell != want {
				t.Errorf("run %d: cell %d", want, res.Cell)
			}
		}
		res := run(t, k, "1 / 0")
		if !k.opt.Fresh && (res.Cell != 4 || !strings.Contains(res.Stderr, `File "<cell 4>"`)) {
			t.Errorf("cell %d, stderr %q; want cell 4, named in the traceback", res.Cell, res.Stderr)
		}
		res = run(t, k, "import os, signal\nos.kill(os.getpid(), signal.SIGKILL)")
		if res.Cell != 5 || res.Outcome != OutcomeRestarted {
			t.Errorf("the crash: cell %d, outcome %q", res.Cell, res.Outcome)
		}
		want := 6
		if !k.opt.Fresh {
			want = 1
		}
		if res := run(t, k, "x = 1"); res.Cell != want {
			t.Errorf("after the crash: cell %d, want %d", res.Cell, want)
		}
	})
}

// TestFiguresListed: the images a run saved are listed, in both modes: in
// script mode display() saves them in the run's own process, which tells
// the worker.
func TestFiguresListed(t *testing.T) {
	eachMode(t, func(t *testing.T, k *Kernel, sbx sandbox.Sandbox) {
		res := run(t, k, "import matplotlib.pyplot as plt\n"+
			"fig = plt.figure()\nplt.plot([1, 2])\ndisplay(fig)\n"+
			"plt.figure()\nplt.plot([2, 1])\nplt.show()")
		want := []string{"figure_1.png", "figure_2.png"}
		if k.opt.Fresh {
			want = want[:1] // a script's plt.show() shows nothing (Agg)
		}
		if res.ExitCode != 0 || !slices.Equal(res.Figures, want) {
			t.Fatalf("exit %d, figures %q, stderr %q; want %q", res.ExitCode, res.Figures, res.Stderr, want)
		}
		for _, f := range want {
			if b := readFile(t, sbx, "/work/"+f); !strings.HasPrefix(string(b), "\x89PNG") {
				t.Errorf("%s is no PNG", f)
			}
		}
		if res := run(t, k, "print(1)"); len(res.Figures) != 0 {
			t.Errorf("a run that saved nothing lists %q", res.Figures)
		}
	})
}

// TestInterruptKeepsTheSession cancels a run's ctx once the code runs: it is
// interrupted, and in kernel mode the session survives, with what the
// interrupted cell had set.
func TestInterruptKeepsTheSession(t *testing.T) {
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			t.Parallel()
			// A grace a loaded machine cannot miss: the run must stop on the
			// interrupt, not be killed after it.
			interruptKeepsTheSession(t, startKernel(t, newSandbox(t), Options{Fresh: m.fresh, Grace: 30 * time.Second}))
		})
	}
}

// interruptKeepsTheSession is TestInterruptKeepsTheSession on k.
func interruptKeepsTheSession(t *testing.T, k *Kernel) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	live := WithOutput(ctx, func(o Output) {
		if strings.Contains(o.Text, "running") {
			cancel()
		}
	})
	res, err := k.Run(live, "import time\nx = 42\nprint('running', flush=True)\ntime.sleep(60)", time.Minute)
	if !errors.Is(err, context.Canceled) || res.Outcome != OutcomeInterrupted || res.Restart != nil || res.TimedOut {
		t.Fatalf("Run = outcome %q, restart %+v, timed out %v, %v", res.Outcome, res.Restart, res.TimedOut, err)
	}
	if k.opt.Fresh {
		// The worker kills the run's process, which the interrupt may
		// have reached first.
		if res.ExitCode != -1 || (res.Exception != nil && res.Exception.Name != "KeyboardInterrupt") {
			t.Errorf("exit %d, exception %+v; want -1, killed", res.ExitCode, res.Exception)
		}
		return
	}
	if res.Exception == nil || res.Exception.Name != "KeyboardInterrupt" {
		t.Errorf("exception %+v, want KeyboardInterrupt", res.Exception)
	}
	wantOK(t, run(t, k, "print(x)"), "42\n")
}

// TestTimeoutFacts: a timeout that an interrupt stops is timed out; one
// that it does not stop restarts a kernel's session, killed.
func TestTimeoutFacts(t *testing.T) {
	eachMode(t, func(t *testing.T, k *Kernel, _ sandbox.Sandbox) {
		res := runWithin(t, k, "import time\ntime.sleep(60)", 500*time.Millisecond)
		if res.Outcome != OutcomeTimedOut || !res.TimedOut || res.Restart != nil {
			t.Errorf("outcome %q, timed out %v, restart %+v", res.Outcome, res.TimedOut, res.Restart)
		}
		if !k.opt.Fresh && (res.Exception == nil || res.Exception.Name != "KeyboardInterrupt") {
			t.Errorf("exception %+v, want KeyboardInterrupt", res.Exception)
		}
	})
	t.Run("killed", func(t *testing.T) {
		t.Parallel()
		k := startKernel(t, newSandbox(t), Options{Grace: 500 * time.Millisecond})
		res := runWithin(t, k, "import signal, time\nsignal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})\ntime.sleep(60)", 500*time.Millisecond)
		r := res.Restart
		if res.Outcome != OutcomeRestarted || !res.TimedOut || r == nil || r.Reason != RestartKilled || !r.SessionLost {
			t.Fatalf("outcome %q, timed out %v, restart %+v; want killed, the session lost", res.Outcome, res.TimedOut, r)
		}
	})
}

// TestCrashFacts kills the code's Python with SIGKILL: in kernel mode that
// is the worker, and the session is lost; in script mode the run's own
// process, and the worker lives on.
func TestCrashFacts(t *testing.T) {
	eachMode(t, func(t *testing.T, k *Kernel, _ sandbox.Sandbox) {
		w := currentWorker(t, k)
		res := run(t, k, "import os, signal\nos.kill(os.getpid(), signal.SIGKILL)")
		want := Restart{Reason: RestartCrashed, ExitCode: 137, Signal: 9, SessionLost: !k.opt.Fresh}
		if res.Outcome != OutcomeRestarted || res.Restart == nil || *res.Restart != want || res.TimedOut || res.Exception != nil {
			t.Fatalf("outcome %q, restart %+v, exception %+v; want %+v", res.Outcome, res.Restart, res.Exception, want)
		}
		if replaced := currentWorker(t, k) != w; replaced == k.opt.Fresh {
			t.Errorf("the worker replaced: %v", replaced)
		}
		wantOK(t, run(t, k, "print('next')"), "next\n")
	})
}

// With ValueApart, a cell's trailing value is a fact of its own, not
// output: a front-end that shows it apart (Jupyter's execute_result) does
// not show it twice. A figure it is is saved and listed as any other.
func TestValueApart(t *testing.T) {
	sbx := newSandbox(t)
	k := startKernel(t, sbx, Options{ValueApart: true})
	res := run(t, k, "print('printed')\n6 * 7")
	if res.Value != "42" || res.Stdout != "printed\n" {
		t.Errorf("value %q, stdout %q; want 42 apart from the printed line", res.Value, res.Stdout)
	}
	res = run(t, k, "import pandas as pd\npd.DataFrame({'a': [1, 2]})")
	if !strings.Contains(res.Value, "a") || strings.Contains(res.Stdout, "a") {
		t.Errorf("a DataFrame's value %q, stdout %q; want its table as the value only", res.Value, res.Stdout)
	}
	res = run(t, k, "import matplotlib.pyplot as plt\nfig = plt.figure()\nplt.plot([1, 2])\nfig")
	if !slices.Equal(res.Figures, []string{"figure_1.png"}) || res.Stdout != "" {
		t.Errorf("a Figure as the value: figures %q, stdout %q; want it saved and listed, nothing printed", res.Figures, res.Stdout)
	}
	// Without it, the value is the cell's last output, as a model reads it.
	plain := startKernel(t, newSandbox(t), Options{})
	if res := run(t, plain, "6 * 7"); res.Value != "42" || res.Stdout != "42\n" {
		t.Errorf("without ValueApart: value %q, stdout %q", res.Value, res.Stdout)
	}
}
