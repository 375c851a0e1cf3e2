package kernel

import (
	"context"
	"strings"
	"testing"
	"time"
)

// startScript starts a fresh-mode (script mode) kernel without prewarm,
// closed when the test ends.
func startScript(t testing.TB) *Kernel {
	t.Helper()
	return startKernel(t, newSandbox(t), Options{Fresh: true, MaxStdout: 4000, MaxStderr: 2000})
}

// startPreloaded starts a fresh-mode kernel with the default prewarm, as
// terp's script mode runs. Only the tests of what the preload changes use
// it: each preload costs a second or more of CPU, which the package's
// tests that wait for an idle core (TestPrewarmDoesNotDelayRuns) share.
func startPreloaded(t testing.TB) *Kernel {
	t.Helper()
	return startKernel(t, newSandbox(t), Options{Fresh: true, Prewarm: DefaultPrewarm, MaxStdout: 4000, MaxStderr: 2000})
}

func TestScriptMode(t *testing.T) {
	t.Parallel()
	s := startScript(t)

	// Only files survive between runs; a module an earlier step saved can
	// be imported.
	wantOK(t, run(t, s, "x = 1\nopen('helper.py', 'w').write('def double(n):\\n    return 2 * n\\n')"), "")
	wantOK(t, run(t, s, "import helper\nprint(helper.double(21))\nprint('x' in globals())"), "42\nFalse\n")
	// No value is shown: it is a script, not a cell.
	wantOK(t, run(t, s, "1 + 1"), "")

	// A timeout kills the run and says so; the next run needs no new worker.
	w := currentWorker(t, s)
	res := runWithin(t, s, "import time\nprint('started', flush=True)\ntime.sleep(60)", 500*time.Millisecond)
	if !res.TimedOut || res.ExitCode != 124 || res.Stdout != "started\n" || !strings.Contains(res.Notice, "timeout") ||
		strings.Contains(res.Notice, "variables") {
		t.Fatalf("timed-out run: %+v", res)
	}
	wantOK(t, run(t, s, "print('next')"), "next\n")
	if currentWorker(t, s) != w {
		t.Error("the timeout replaced the worker; it should have killed the run alone")
	}
}

// TestScriptIsAProgram checks that a run behaves as `python3 main.py` does,
// although it is forked from the worker: its name, argv and file, its exit
// status, its tracebacks, and what the interpreter does at exit, with the
// default preload, none of whose modules the run sees unless it imports them.
func TestScriptIsAProgram(t *testing.T) {
	t.Parallel()
	s := startPreloaded(t)
	for _, tt := range []struct {
		name, code string
		exit       int
		stdout     string
		stderr     []string // each must be in stderr
		notice     string   // must be in the notice; "" wants none
	}{
		{name: "main", code: "import sys\nprint(__name__, __file__, sys.argv, sys.path[0])",
			stdout: "__main__ /work/.terp/main.py ['/work/.terp/main.py'] /work\n"},
		{name: "fresh modules", code: "import sys\nprint('pandas' in sys.modules, 'ast' in sys.modules)",
			stdout: "False False\n"},
		{name: "exception", code: "def f():\n    return 1 / 0\nf()", exit: 1,
			stderr: []string{"Traceback (most recent call last):\n  File \"/work/.terp/main.py\", line 3, in <module>\n    f()\n",
				"line 2, in f\n    return 1 / 0", "ZeroDivisionError: division by zero"}},
		{name: "syntax error", code: "x = (", exit: 1,
			stderr: []string{"  File \"/work/.terp/main.py\", line 1\n    x = (\n        ^\nSyntaxError: '(' was never closed\n"}},
		{name: "sys.exit code", code: "import sys\nsys.exit(3)", exit: 3},
		{name: "sys.exit message", code: "import sys\nsys.exit('bad input')", exit: 1, stderr: []string{"bad input"}},
		{name: "atexit runs", code: "import atexit\natexit.register(print, 'bye')\nprint('hi')", stdout: "hi\nbye\n"},
		{name: "threads are waited for", code: "import threading, time\n" +
			"def late():\n    time.sleep(0.2)\n    print('thread done', flush=True)\n" +
			"threading.Thread(target=late).start()\nprint('main done')", stdout: "main done\nthread done\n"},
		{name: "buffered output kept", code: "import sys\nsys.stdout.write('no newline')", stdout: "no newline"},
		{name: "fork", code: "import os\npid = os.fork()\nif pid == 0:\n    print('child')\n    os._exit(0)\n" +
			"os.waitpid(pid, 0)\nprint('parent')", stdout: "child\nparent\n"},
		{name: "multiprocessing", code: "import multiprocessing as mp\nif __name__ == '__main__':\n" +
			"    with mp.Pool(2) as p:\n        print(sum(p.map(abs, [-1, -2, 3])))", stdout: "6\n"},
		{name: "crash", code: "import ctypes\nprint('before', flush=True)\nctypes.string_at(0)", exit: 139,
			stdout: "before\n", stderr: []string{"Fatal Python error: Segmentation fault", "main.py\", line 3"},
			notice: "SIGSEGV"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			res := run(t, s, tt.code)
			bad := res.ExitCode != tt.exit || res.Stdout != tt.stdout
			for _, want := range tt.stderr {
				bad = bad || !strings.Contains(res.Stderr, want)
			}
			if tt.stderr == nil && res.Stderr != "" {
				bad = true
			}
			if tt.notice == "" {
				bad = bad || res.Notice != ""
			} else {
				bad = bad || !strings.Contains(res.Notice, tt.notice) || strings.Contains(res.Notice, "variables")
			}
			if bad {
				t.Errorf("exit %d, stdout %q, notice %q, stderr:\n%s\nwant exit %d, stdout %q, stderr with %q, notice with %q",
					res.ExitCode, res.Stdout, res.Notice, res.Stderr, tt.exit, tt.stdout, tt.stderr, tt.notice)
			}
		})
	}
}

// TestScriptTimeoutKillsEverything: a run that ignores SIGINT and leaves
// daemons behind is stopped at its timeout with all it started, and nothing
// it started is left for the next run.
func TestScriptTimeoutKillsEverything(t *testing.T) {
	t.Parallel()
	s := startScript(t)
	code := "import signal, subprocess, time\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\n" +
		"subprocess.Popen(['sleep', '300'], start_new_session=True)\n" +
		"print('started', flush=True)\ntime.sleep(300)"
	began := time.Now()
	res := runWithin(t, s, code, 300*time.Millisecond)
	if !res.TimedOut || res.ExitCode != 124 || res.Stdout != "started\n" {
		t.Fatalf("timed-out run: %+v", res)
	}
	if took := time.Since(began); took > DefaultGrace {
		t.Errorf("the run took %s to stop; a fresh-mode worker kills it at once", took)
	}
	wantOK(t, run(t, s, "import os\nprint(sum(open('/proc/%s/cmdline' % p, 'rb').read().startswith(b'sleep')\n"+
		"          for p in os.listdir('/proc') if p.isdigit()))"), "0\n")
}

// TestScriptCancel cancels a run: the error says so and the next run works.
func TestScriptCancel(t *testing.T) {
	t.Parallel()
	s := startScript(t)
	// The deadline is the run's: the worker's start, which the preload's
	// thread shares a busy machine with, is not part of it.
	wantOK(t, run(t, s, "print('ready')"), "ready\n")
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	res, err := s.Run(ctx, "import time\nprint('started', flush=True)\ntime.sleep(60)", time.Minute)
	if err == nil || res.ExitCode != -1 || res.Stdout != "started\n" || res.TimedOut || !strings.Contains(res.Notice, "cancelled") {
		t.Fatalf("cancelled run: %+v, %v", res, err)
	}
	wantOK(t, run(t, s, "print('next')"), "next\n")
}
