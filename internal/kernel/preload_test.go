package kernel

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"
)

// freshProbes are programs whose output depends on what an interpreter
// holds at start: the modules in sys.modules, matplotlib's state, the
// warnings filters, the working directory, argv. Each must print the same
// in a script-mode run, forked from a worker that preloaded numpy, pandas
// and matplotlib, as in a new python3 started by that run.
var freshProbes = []struct{ name, code string }{
	{"plain", "import sys\n" + watched},
	{"pandas", "import sys, pandas\n" + watched + "print(pandas.__spec__.origin, pandas.DataFrame({'a': [1, 2]}).a.sum())"},
	{"numpy", "import sys, numpy\n" + watched + "print(numpy.__spec__.name, numpy.__spec__.origin)"},
	{"matplotlib", "import sys, matplotlib\n" + watched + "print(matplotlib.rcParams['lines.linewidth'])"},
	{"pyplot", "import sys, matplotlib.pyplot as plt\n" + watched +
		"print(plt.get_backend(), plt.get_fignums(), plt.rcParams['lines.linewidth'], plt.rcParams['axes.facecolor'])"},
	{"submodule", "import sys, numpy.linalg\n" + watched},
	{"from import", "import sys\nfrom pandas import DataFrame\n" + watched},
	{"warnings", "import warnings\nprint(len(warnings.filters))\nimport numpy\n" +
		"print(len(warnings.filters), [f[0] for f in warnings.filters if f[2] is numpy.RankWarning])"},
	{"pandas options", "import pandas\nprint(pandas.get_option('display.max_rows'))"},
	{"cwd and argv", "import os, sys\nprint(os.getcwd(), len(sys.argv))"},
}

// watched prints which of the preloaded modules, and of the modules they
// import, a program has in sys.modules.
const watched = "print([m for m in ('numpy', 'numpy.random', 'numpy.linalg', 'pandas', 'matplotlib', " +
	"'matplotlib.pyplot', 'matplotlib.backends.backend_agg', 'dateutil', 'pytz', 'ast', 'decimal') if m in sys.modules])\n"

// TestScriptStartsFresh checks that a script-mode run with the default
// preload starts as `python3 main.py` would, after a run that changed
// everything it could in its own interpreter.
func TestScriptStartsFresh(t *testing.T) {
	t.Parallel()
	s := startPreloaded(t)
	// A run that imports a preloaded module waits for the preload, so the
	// runs below see it done.
	wantOK(t, run(t, s, "import numpy"), "")
	wantOK(t, run(t, s, `import os, sys, warnings, random
import numpy, pandas, matplotlib, matplotlib.pyplot as plt
os.chdir('/tmp')
sys.argv.append('x')
warnings.simplefilter('error')
numpy.random.seed(1)
random.seed(1)
pandas.set_option('display.max_rows', 3)
plt.rcParams['lines.linewidth'] = 7
plt.style.use('ggplot')
plt.figure()
matplotlib.use('pdf')
print('dirty')`), "dirty\n")
	for _, p := range freshProbes {
		t.Run(p.name, func(t *testing.T) {
			got := run(t, s, p.code)
			// The same program in a new interpreter, started by a run.
			want := run(t, s, "import subprocess, sys\nsys.exit(subprocess.run([sys.executable, '-c', "+strconv.Quote(p.code)+"]).returncode)")
			if got.ExitCode != 0 || want.ExitCode != 0 || got.Stdout != want.Stdout {
				t.Errorf("a run printed (exit %d):\n%s%s\na new python3 (exit %d):\n%s%s",
					got.ExitCode, got.Stdout, got.Stderr, want.ExitCode, want.Stdout, want.Stderr)
			}
		})
	}
}

// TestScriptRandomness: numpy's global RandomState is seeded when numpy is
// imported, which the preload does once for every run; each run must still
// draw numbers of its own, from numpy and from Python's random.
func TestScriptRandomness(t *testing.T) {
	t.Parallel()
	s := startPreloaded(t)
	draw := "import random\nimport numpy as np\nprint(np.random.randint(1 << 30), random.getrandbits(30), np.random.default_rng().integers(1 << 30))"
	seen := map[string]bool{}
	for i := 0; i < 3; i++ {
		res := run(t, s, draw)
		if res.ExitCode != 0 {
			t.Fatalf("exit %d, stderr:\n%s", res.ExitCode, res.Stderr)
		}
		for _, n := range strings.Fields(res.Stdout) {
			if seen[n] {
				t.Errorf("run %d drew %s again (outputs so far %v)", i+1, n, seen)
			}
			seen[n] = true
		}
	}
}

// TestScriptBLAS multiplies matrices large enough for OpenBLAS to use its
// threads, which the worker started when it imported numpy and which a
// forked child does not have: the product must be right, and the run must
// not hang.
func TestScriptBLAS(t *testing.T) {
	t.Parallel()
	s := startPreloaded(t)
	code := `import numpy as np
a = (np.arange(250000) % 7).reshape(500, 500).astype(float)
b = (np.arange(250000) % 5).reshape(500, 500).astype(float)
c = a @ b
# Small integers: every sum is exact, whatever order BLAS adds in.
total = sum(x * y for x, y in zip(a.sum(0).tolist(), b.sum(1).tolist()))
cell = sum(a[3, k] * b[k, 5] for k in range(500))
print(c.sum() == total, c[3, 5] == cell)`
	for i := 0; i < 2; i++ {
		wantOK(t, run(t, s, code), "True True\n")
	}
}

// TestScriptForkDuringPreload forks runs while the preload thread is in the
// middle of an import, holding its module's lock. A run that imports only
// the standard library does not wait for the preload, and its child, where
// that thread does not exist, must import the same module itself instead
// of waiting for the lock forever; a run that imports only what was
// preloaded by then does not wait either, and gets it; a run that waits
// for the preload can be cancelled while it waits.
func TestScriptForkDuringPreload(t *testing.T) {
	t.Parallel()
	sbx := newSandbox(t)
	// blocker stops the preload thread in its import until told to go on.
	writeFile(t, sbx, "/work/blocker.py", `import os, threading, time
if threading.current_thread().name == 'terp-prewarm':
    open('/work/blocker.started', 'w').close()
    while not os.path.exists('/work/blocker.release'):
        time.sleep(0.01)
`)
	s := startKernel(t, sbx, Options{Fresh: true, Prewarm: []string{"numpy", "blocker", "pandas"}})

	// This run waits for the preload, which lets the thread import at once
	// (IdleCoreGate); it is cancelled once the thread is inside blocker.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	waited := make(chan error, 1)
	go func() {
		res, err := s.Run(ctx, "import blocker\nprint('ran')", time.Minute)
		if err == nil || res.Stdout != "" {
			err = errors.Join(err, errors.New("the run was not cancelled: "+res.Stdout))
		} else {
			err = nil
		}
		waited <- err
	}()
	for !sandboxHas(t, s, "/work/blocker.started") {
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	if err := <-waited; err != nil {
		t.Fatal(err)
	}

	// The preload imports with the collector off; the child runs with it on.
	wantOK(t, run(t, s, "import gc, sys\nm = __import__('blocker')\nprint(m.__name__, 'numpy' in sys.modules, gc.isenabled())"),
		"blocker False True\n")
	// numpy was preloaded before blocker: this run does not wait for the
	// rest, which would never end.
	wantOK(t, run(t, s, "import sys, numpy\nprint(numpy.ones(3).sum(), 'numpy.linalg' in sys.modules, 'blocker' in sys.modules)"),
		"3.0 True False\n")
	writeFile(t, sbx, "/work/blocker.release", "")
	wantOK(t, run(t, s, "import sys, pandas\nprint(pandas.Series([1, 2]).sum(), 'blocker' in sys.modules)"), "3 False\n")
}

// sandboxHas tells whether path exists in the kernel's sandbox.
func sandboxHas(t *testing.T, k *Kernel, path string) bool {
	t.Helper()
	rc, err := k.sbx.ReadFile(context.Background(), path)
	if err != nil {
		return false
	}
	rc.Close()
	return true
}
