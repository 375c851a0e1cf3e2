package kernel

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestCells runs notebook-style cells in one kernel: the subtests build on
// each other's state, in order.
func TestCells(t *testing.T) {
	t.Parallel()
	k := startKernel(t, newSandbox(t), Options{Prewarm: []string{"pandas"}})

	t.Run("state persists", func(t *testing.T) {
		wantOK(t, run(t, k, "import pandas as pd\nx = 21\ndf = pd.DataFrame({'a': [1, 2, 3]})\n"+
			"def double(n):\n    return n * 2\n"), "")
		wantOK(t, run(t, k, "print(double(x), df['a'].sum(), pd.__name__)"), "42 6 pandas\n")
	})

	t.Run("trailing expression", func(t *testing.T) {
		for _, tt := range []struct{ code, want string }{
			{"double(x)", "42\n"},
			{"y = 1\ny + 1  # a comment\n\n", "2\n"},
			{"double(x);", ""},
			{"double(x);  # hidden\n", ""},
			{"'a;b'", "'a;b'\n"},
			{"print('printed')", "printed\n"}, // None is not shown
			{"x = 5; x", "5\n"},
			{"if True:\n    x = 21\n    x", ""}, // only a top-level expression is shown
			{"__name__", "'__main__'\n"},
			{"df", "   a\n0  1\n1  2\n2  3\n"},
		} {
			res := run(t, k, tt.code)
			wantOK(t, res, tt.want)
			// The value is also told apart, for an export: the repr the
			// output ends with.
			if want := strings.TrimSuffix(tt.want, "\n"); tt.code != "print('printed')" && res.Value != want {
				t.Errorf("%q: value %q, want %q", tt.code, res.Value, want)
			}
		}
		if res := run(t, k, "print('out')\n7 * 6"); res.Stdout != "out\n42\n" || res.Value != "42" {
			t.Errorf("output then a value: stdout %q, value %q", res.Stdout, res.Value)
		}
		if res := run(t, k, "print('no value')"); res.Value != "" {
			t.Errorf("a cell without a last expression has the value %q", res.Value)
		}
		res := run(t, k, "'z' * 50000")
		if res.ExitCode != 0 || !strings.Contains(res.Stdout, "[... repr cut at 20000 of 50002 characters ...]") ||
			len(res.Stdout) > 21000 {
			t.Errorf("a huge repr: exit %d, %d bytes of stdout ending %q", res.ExitCode, len(res.Stdout),
				res.Stdout[max(0, len(res.Stdout)-80):])
		}
	})

	t.Run("traceback shows the cells", func(t *testing.T) {
		wantOK(t, run(t, k, "def ratio(a, b):\n    return a / b\n"), "")
		res := run(t, k, "print('before')\nratio(1, 0)\nprint('not reached')")
		if res.ExitCode != 1 || res.Stdout != "before\n" {
			t.Errorf("exit %d, stdout %q", res.ExitCode, res.Stdout)
		}
		for _, want := range []string{
			"Traceback (most recent call last):",
			"line 2, in <module>\n    ratio(1, 0)",
			"line 2, in ratio\n    return a / b",
			"ZeroDivisionError: division by zero",
		} {
			if !strings.Contains(res.Stderr, want) {
				t.Errorf("traceback lacks %q:\n%s", want, res.Stderr)
			}
		}
		if strings.Contains(res.Stderr, "worker.py") || strings.Contains(res.Stderr, ".terp") {
			t.Errorf("traceback shows the worker:\n%s", res.Stderr)
		}
		// A chained exception and one raised inside a library keep their frames.
		res = run(t, k, "try:\n    {}['k']\nexcept KeyError as e:\n    raise ValueError('v') from e")
		if res.ExitCode != 1 || !strings.Contains(res.Stderr, "KeyError: 'k'") ||
			!strings.Contains(res.Stderr, "direct cause") || strings.Contains(res.Stderr, "worker.py") {
			t.Errorf("chained: exit %d, stderr:\n%s", res.ExitCode, res.Stderr)
		}
		res = run(t, k, "pd.read_csv('/work/missing.csv')")
		if res.ExitCode != 1 || !strings.Contains(res.Stderr, "pandas/io") ||
			!strings.Contains(res.Stderr, "FileNotFoundError") || strings.Contains(res.Stderr, "worker.py") {
			t.Errorf("library error: exit %d, stderr:\n%s", res.ExitCode, res.Stderr)
		}
	})

	t.Run("syntax error", func(t *testing.T) {
		res := run(t, k, "x = 1\nprint(x\n")
		if res.ExitCode != 1 || res.Stdout != "" || strings.Contains(res.Stderr, "Traceback") ||
			!strings.Contains(res.Stderr, "SyntaxError: '(' was never closed") ||
			!strings.Contains(res.Stderr, "    print(x\n         ^") {
			t.Errorf("exit %d, stdout %q, stderr:\n%s", res.ExitCode, res.Stdout, res.Stderr)
		}
		if res := run(t, k, "x"); res.Stdout != "1\n" && res.Stdout != "21\n" {
			// The failed cell ran nothing: x is still what it was.
			t.Errorf("x = %q after a syntax error", res.Stdout)
		}
	})

	t.Run("sys.exit", func(t *testing.T) {
		for _, tt := range []struct {
			code   string
			exit   int
			stderr string
		}{
			{"import sys\nsys.exit(3)", 3, ""},
			{"sys.exit()", 0, ""},
			{"sys.exit(0)", 0, ""},
			{"raise SystemExit(None)", 0, ""},
			{"sys.exit('bye')", 1, "bye\n"},
			{"sys.exit(256 + 7)", 7, ""},
		} {
			res := run(t, k, tt.code)
			if res.ExitCode != tt.exit || res.Stderr != tt.stderr || res.Notice != "" {
				t.Errorf("%q: exit %d, stderr %q, notice %q; want %d, %q", tt.code, res.ExitCode, res.Stderr,
					res.Notice, tt.exit, tt.stderr)
			}
		}
		// exit() closes sys.stdin on its way out; the next run gets a new one.
		if res := run(t, k, "exit(2)"); res.ExitCode != 2 {
			t.Errorf("exit(2): exit %d, stderr %q", res.ExitCode, res.Stderr)
		}
		wantOK(t, run(t, k, "import sys\nsys.stdin.read()"), "''\n")
		wantOK(t, run(t, k, "double(4)"), "8\n") // the session survived
	})

	t.Run("descriptor-level output", func(t *testing.T) {
		res := run(t, k, `
import os, sys, ctypes, subprocess
print("print")
os.write(1, b"fd1\n")
os.write(2, b"fd2\n")
libc = ctypes.CDLL(None)
libc.printf(b"printf %d\n", 42)
libc.fflush(None)
subprocess.run(["echo", "child"])
os.system("echo shell >&2")
print("stderr", file=sys.stderr)
`)
		if res.ExitCode != 0 || res.Stdout != "print\nfd1\nprintf 42\nchild\n" || res.Stderr != "fd2\nshell\nstderr\n" {
			t.Errorf("exit %d, stdout %q, stderr %q", res.ExitCode, res.Stdout, res.Stderr)
		}
	})

	t.Run("stdin is empty", func(t *testing.T) {
		res := run(t, k, "import sys\ntry:\n    input('? ')\nexcept EOFError as e:\n    print('EOF:', e)\n"+
			"print(repr(sys.stdin.read()))")
		wantOK(t, res, "? EOF: EOF when reading a line\n''\n")
		wantOK(t, run(t, k, "double(5)"), "10\n")
	})

	t.Run("printed frames are output", func(t *testing.T) {
		// The code finds the run's real nonce in the worker's frames and
		// prints well-formed frames with it, on every descriptor it has.
		code := `
import os, sys, time
f = sys._getframe()
while f is not None and "nonce" not in f.f_locals:
    f = f.f_back
n = f.f_locals["nonce"]
done = '{"exit_code": 7}'
fake = "TERP %s done %d\n%s" % (n, len(done), done)
fake += "TERP %s out 5\nhello" % n
fake += "TERP 00 done 2\n{}"
print(fake)
sys.stdout.flush()
os.write(1, fake.encode())
sys.stderr.write(fake)
os.write(2, fake.encode())
os.system("printf 'TERP %s done 2\\n{}'" % n)
time.sleep(0.2)
print("after")
`
		res := run(t, k, code)
		if res.ExitCode != 0 || !strings.HasSuffix(res.Stdout, "after\n") ||
			strings.Count(res.Stdout, `done 16`+"\n"+`{"exit_code": 7}`) != 2 ||
			strings.Count(res.Stderr, `{"exit_code": 7}`) != 2 || strings.Count(res.Stdout, "done 2\n{}") != 3 {
			t.Errorf("exit %d, notice %q\nstdout %q\nstderr %q", res.ExitCode, res.Notice, res.Stdout, res.Stderr)
		}
	})
}

// currentWorker returns the kernel's worker, to inspect it.
func currentWorker(t testing.TB, k *Kernel) *worker {
	t.Helper()
	<-k.started
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.w == nil {
		t.Fatal("no worker")
	}
	return k.w
}

func TestRunAfterClose(t *testing.T) {
	t.Parallel()
	k := startKernel(t, newSandbox(t), Options{})
	wantOK(t, run(t, k, "1 + 1"), "2\n")
	if err := k.Close(); err != nil {
		t.Fatal(err)
	}
	if err := k.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if _, err := k.Run(context.Background(), "1", time.Minute); !errors.Is(err, errClosed) {
		t.Errorf("Run after Close: %v", err)
	}
}

// TestReady waits for the worker's start without running a cell, as a
// warm sandbox is made: the first cell is still cell 1, with the
// interpreter's start behind it; a worker that cannot start is Ready's
// error; a closed kernel is never ready.
func TestReady(t *testing.T) {
	t.Parallel()
	sbx := newSandbox(t)
	k := startKernel(t, sbx, Options{})
	if err := k.Ready(context.Background()); err != nil {
		t.Fatalf("Ready: %v", err)
	}
	if res := run(t, k, "print(__name__)"); res.Cell != 1 || res.Stdout != "__main__\n" {
		t.Errorf("the first cell after Ready: cell %d, %+v", res.Cell, res)
	}

	select {
	case <-k.Warmed():
	default:
		t.Errorf("a kernel without prewarm is not warm once ready")
	}

	// With imports to make, Warmed closes once they are over, in both
	// modes (one that fails counts as over): in kernel mode a cell that
	// imports nothing, and so waits for nothing, then finds them.
	for _, fresh := range []bool{false, true} {
		k := startKernel(t, sbx, Options{Fresh: fresh, Prewarm: []string{"no_such_module_here", "pandas"}})
		select {
		case <-k.Warmed():
		case <-time.After(time.Minute):
			t.Fatalf("fresh=%v: the kernel never said its prewarm was over", fresh)
		}
		want := "True\n"
		if fresh {
			want = "False\n" // a run sees only what it imports itself
		}
		if res := run(t, k, "print(hasattr(__import__('sys').modules.get('pandas'), '__all__'))"); res.Stdout != want {
			t.Errorf("fresh=%v: after Warmed: %+v", fresh, res)
		}
	}

	// A worker not ready in time is killed, and that is Ready's error.
	k = startKernel(t, newSandbox(t), Options{ReadyTimeout: time.Nanosecond})
	if err := k.Ready(context.Background()); err == nil || !strings.Contains(err.Error(), "was not ready after") {
		t.Errorf("Ready of a worker that did not start in time: %v", err)
	}

	k = startKernel(t, sbx, Options{})
	if err := k.Close(); err != nil {
		t.Fatal(err)
	}
	if err := k.Ready(context.Background()); !errors.Is(err, errClosed) {
		t.Errorf("Ready after Close = %v, want errClosed", err)
	}
}

// TestCloseWhileStarting closes kernels before their worker has started,
// as a conversation that ends at once does: Close waits for the start and
// kills the worker, and the kernel stays closed.
func TestCloseWhileStarting(t *testing.T) {
	t.Parallel()
	sbx := newSandbox(t)
	for _, fresh := range []bool{false, true} {
		k, err := Start(context.Background(), sbx, Options{Fresh: fresh})
		if err != nil {
			t.Fatal(err)
		}
		if err := k.Close(); err != nil {
			t.Fatalf("Close: %v", err)
		}
		if k.w != nil {
			t.Error("Close left a worker")
		}
		if _, err := k.Run(context.Background(), "print(1)", time.Minute); !errors.Is(err, errClosed) {
			t.Errorf("Run after Close = %v, want errClosed", err)
		}
	}
}

// TestQueuedRunGivesUp cancels a Run that waits for another to end: it
// returns ctx's error at once, and its code never runs.
func TestQueuedRunGivesUp(t *testing.T) {
	t.Parallel()
	sbx := newSandbox(t)
	k := startKernel(t, sbx, Options{})
	running := make(chan struct{})
	var once sync.Once
	first := make(chan error, 1)
	go func() {
		ctx := WithOutput(context.Background(), func(Output) { once.Do(func() { close(running) }) })
		_, err := k.Run(ctx, "import os, time\nprint('running', flush=True)\n"+
			"while not os.path.exists('/work/release'):\n    time.sleep(0.01)", time.Minute)
		first <- err
	}()
	<-running

	ctx, cancel := context.WithCancel(context.Background())
	type ran struct {
		res Result
		err error
	}
	queued := make(chan ran, 1)
	go func() {
		res, err := k.Run(ctx, "open('/work/queued-ran', 'w').close()", time.Minute)
		queued <- ran{res, err}
	}()
	// A moment for it to queue; the test holds whenever it is cancelled.
	time.Sleep(100 * time.Millisecond)
	cancel()
	q := <-queued
	if !errors.Is(q.err, context.Canceled) || q.res.Cell != 0 || q.res.Outcome != "" {
		t.Errorf("queued Run = cell %d, outcome %q, %v; want it cancelled before it began", q.res.Cell, q.res.Outcome, q.err)
	}
	select {
	case err := <-first:
		t.Fatalf("the first run ended (%v) before the queued one gave up", err)
	default:
	}
	writeFile(t, sbx, "/work/release", "")
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	res := run(t, k, "import os\nprint(os.path.exists('/work/queued-ran'))")
	wantOK(t, res, "False\n")
	if res.Cell != 2 {
		t.Errorf("cell %d after the cancelled run; want 2, as if it had never been", res.Cell)
	}
}
