package kernel

import (
	"bytes"
	"context"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/terpdev/terp/internal/egress"
	"github.com/terpdev/terp/internal/sandbox"
)

// pngMagic starts every PNG file.
var pngMagic = []byte("\x89PNG\r\n\x1a\n")

func TestFigures(t *testing.T) {
	t.Parallel()
	sbx := newSandbox(t)
	k := startKernel(t, sbx, Options{Prewarm: []string{"matplotlib"}, Grace: 500 * time.Millisecond})

	wantFigures := func(t *testing.T, want ...string) {
		t.Helper()
		k.mu.Lock()
		got := k.last.Figures
		k.mu.Unlock()
		if !slices.Equal(got, want) {
			t.Errorf("done reported figures %q, want %q", got, want)
		}
		for _, name := range want {
			if data := readFile(t, sbx, "/work/"+name); !bytes.HasPrefix(data, pngMagic) || len(data) < 1000 {
				t.Errorf("%s is not a PNG: %d bytes starting %q", name, len(data), data[:min(len(data), 8)])
			}
		}
	}

	// Prewarming matplotlib imports pyplot too.
	wantOK(t, run(t, k, awaitPrewarm+"import sys\n'matplotlib.pyplot' in sys.modules"), "True\n")

	// plt.show() saves and closes; a figure left open is saved after the run.
	wantOK(t, run(t, k, "import matplotlib.pyplot as plt\nplt.plot([1, 2, 3])\nplt.title('shown')\nplt.show()\n"+
		"print(plt.get_fignums())\nfig = plt.figure()\nplt.bar(['a', 'b'], [3, 4]);"), "[]\n")
	wantFigures(t, "figure_1.png", "figure_2.png")
	wantOK(t, run(t, k, "print(plt.get_fignums())"), "[]\n")
	wantFigures(t)

	// A figure the code saved and closed itself is not saved again.
	wantOK(t, run(t, k, "plt.plot([1, 2])\nplt.savefig('/work/chart.png')\nplt.close()"), "")
	wantFigures(t)

	// Nor is one the code saved and left open, unless it changed it after.
	wantOK(t, run(t, k, "plt.plot([1, 2])\nplt.savefig('/work/left-open.png')"), "")
	wantFigures(t)
	wantOK(t, run(t, k, "plt.plot([2, 1])\nplt.savefig('/work/changed.png')\nplt.title('changed after saving');"), "")
	wantFigures(t, "figure_3.png")

	// An existing file is never overwritten: numbering continues after it.
	writeFile(t, sbx, "/work/figure_4.png", "mine")
	wantOK(t, run(t, k, "plt.plot([3, 1]);"), "")
	wantFigures(t, "figure_5.png")
	if got := string(readFile(t, sbx, "/work/figure_4.png")); got != "mine" {
		t.Errorf("figure_4.png was overwritten: %q", got)
	}

	// A restarted worker continues the numbering too.
	res := runWithin(t, k, "import signal, time\nsignal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})\n"+
		"time.sleep(60)", 500*time.Millisecond)
	if res.ExitCode != 124 {
		t.Fatalf("exit %d, want the worker killed", res.ExitCode)
	}
	wantOK(t, run(t, k, "import matplotlib.pyplot as plt\nplt.plot([1, 2])\nplt.show()"), "")
	wantFigures(t, "figure_6.png")

	// A Python started by the code gets the usual backend, not the worker's.
	wantOK(t, run(t, k, "import subprocess\nsubprocess.run(['python3', '-c', "+
		"'import matplotlib; print(matplotlib.get_backend())'])\nimport matplotlib\nprint(matplotlib.get_backend())"),
		"agg\nmodule://_terp_mpl_backend\n")
}

// slowmod is a module whose import blocks until /work/release exists.
const slowmod = "import os, time\nopen('/work/started', 'w').close()\n" +
	"while not os.path.exists('/work/release'):\n    time.sleep(0.01)\n"

// awaitPrewarm is code that waits for the worker's prewarm imports to end.
const awaitPrewarm = "import threading\nfor t in threading.enumerate():\n" +
	"    if t.name == 'terp-prewarm':\n        t.join()\n"

func TestPrewarmDoesNotDelayRuns(t *testing.T) {
	t.Parallel()
	sbx := newSandbox(t)
	// slowmod's import blocks until the test releases it, so Start and the
	// runs can only return if they do not wait for the prewarm imports.
	writeFile(t, sbx, "/work/slowmod.py", slowmod)
	k := startKernel(t, sbx, Options{Prewarm: []string{"slowmod", "no_such_module"}, ReadyTimeout: 5 * time.Second})
	waitForFile(t, sbx, "started")
	// The prewarm imports with the collector off; code runs with it on.
	wantOK(t, run(t, k, "import gc\nx = 6 * 7\nx, gc.isenabled()"), "(42, True)\n")
	wantOK(t, run(t, k, "x"), "42\n")
	// A cell that imports only the standard library does not wait; one
	// that imports more waits for the prewarm imports, and can be
	// interrupted while it waits.
	wantOK(t, run(t, k, "import os, json\nfrom collections import Counter\nprint('stdlib')"), "stdlib\n")
	// A wait cut short by the timeout must not leave the next cell taking
	// the prewarm for over.
	for _, code := range []string{"import os\nimport notstdlib", "from multiprocessing import Pool", "import sys", "import notstdlib"} {
		res, err := k.Run(context.Background(), code, 300*time.Millisecond)
		if err != nil || !res.TimedOut || !strings.Contains(res.Stderr, "KeyboardInterrupt") {
			t.Errorf("%q before the prewarm's end: %v, %+v; want it to wait", code, err, res)
		}
	}

	writeFile(t, sbx, "/work/release", "")
	wantOK(t, run(t, k, awaitPrewarm+"import sys\n'slowmod' in sys.modules, 'no_such_module' in sys.modules"),
		"(True, False)\n")
	w := currentWorker(t, k)
	if !strings.HasPrefix(w.info.Python, "3.") {
		t.Errorf("ready message %+v", w.info)
	}
	// The worker's stderr is read aside, so the line may come a little later.
	failed := "prewarm no_such_module: ModuleNotFoundError"
	for deadline := time.Now().Add(10 * time.Second); !strings.Contains(w.diagnostics(), failed); {
		if time.Now().After(deadline) {
			t.Fatalf("the worker's diagnostics do not name the module that failed:\n%s", w.diagnostics())
		}
		time.Sleep(10 * time.Millisecond)
	}

	if _, err := Start(context.Background(), sbx, Options{Prewarm: []string{"os; rm -rf /"}}); err == nil {
		t.Error("Start accepted a bad module name")
	}
}

// TestPrewarmWaitsForIdleCores checks the gate that holds the prewarm
// thread back while the machine is busy: the code makes the gate see a
// busy machine, and the thread then waits before its next module until a
// run is in progress.
func TestPrewarmWaitsForIdleCores(t *testing.T) {
	t.Parallel()
	sbx := newSandbox(t)
	writeFile(t, sbx, "/work/slowmod.py", slowmod)
	writeFile(t, sbx, "/work/nextmod.py", "open('/work/nextmod-imported', 'w').close()\n")
	k := startKernel(t, sbx, Options{Prewarm: []string{"slowmod", "nextmod"}})
	waitForFile(t, sbx, "started")
	// Every look at the machine's load, which the gate takes between runs
	// only, now finds it busy and leaves a mark.
	// __import__ is not an import statement, which would wait for the
	// prewarm imports.
	wantOK(t, run(t, k, `sys = __import__("sys")
gate = next(f for f in sys.meta_path if type(f).__name__ == "IdleCoreGate")
looks = []
def busy():
    looks.append(1)
    open("/work/busy-%d" % len(looks), "w").close()
    return True
gate.busy = busy`), "")

	writeFile(t, sbx, "/work/release", "")
	waitForFile(t, sbx, "busy-3")
	if files := listWork(t, sbx); slices.Contains(files, "nextmod-imported") {
		t.Fatalf("the prewarm imported nextmod while the machine was busy: %v", files)
	}
	// A run lets it go on: the code might be waiting for its imports.
	wantOK(t, run(t, k, awaitPrewarm+"import sys\n'nextmod' in sys.modules"), "True\n")
	waitForFile(t, sbx, "nextmod-imported")
}

// listWork returns the names of the files in /work.
func listWork(t testing.TB, sbx sandbox.Sandbox) []string {
	t.Helper()
	files, err := sbx.List(context.Background(), sandbox.WorkDir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, f := range files {
		names = append(names, f.Path)
	}
	return names
}

// waitForFile waits until the code created /work/name.
func waitForFile(t testing.TB, sbx sandbox.Sandbox, name string) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		files, err := sbx.List(context.Background(), sandbox.WorkDir)
		if err != nil {
			t.Fatal(err)
		}
		if slices.ContainsFunc(files, func(f sandbox.FileInfo) bool { return f.Path == name }) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("/work/%s never appeared", name)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestOutputIsBounded(t *testing.T) {
	t.Parallel()
	k := startKernel(t, newSandbox(t), Options{MaxStdout: 4000, MaxStderr: 2000})
	const mb = 1 << 20

	for _, size := range []int{100, 1024} {
		t.Run(fmt.Sprintf("%dMB", size), func(t *testing.T) {
			runtime.GC()
			var before runtime.MemStats
			runtime.ReadMemStats(&before)
			peak := sampleHeap(t)
			code := fmt.Sprintf("import os, sys\nline = 'x' * 1023 + '\\n'\nblock = line.encode() * 1024\n"+
				"print('first')\nfor i in range(%d):\n    os.write(1, block) if i %% 2 else sys.stdout.write(line * 1024)\n"+
				"sys.stderr.write('e' * %d)\nprint('last')", size, 10*mb)
			// What is tested is the bound, not the speed: a loaded machine
			// under -race may take minutes to print a gigabyte.
			res := runWithin(t, k, code, 5*time.Minute)
			heap := peak()
			if res.ExitCode != 0 || !strings.HasPrefix(res.Stdout, "first\nxxx") || !strings.HasSuffix(res.Stdout, "xx\nlast\n") ||
				!strings.Contains(res.Stdout, "bytes omitted") || len(res.Stdout) > 4100 || len(res.Stderr) > 2100 {
				t.Errorf("exit %d, %d bytes of stdout, %d of stderr:\n%.300s", res.ExitCode, len(res.Stdout), len(res.Stderr), res.Stdout)
			}
			if grew := int64(heap) - int64(before.HeapAlloc); grew > 16*mb {
				t.Errorf("the heap grew by %d MB while %d MB were printed", grew/mb, size)
			}
			t.Logf("%d MB in %s", size, res.Duration)
		})
	}
}

// sampleHeap records the Go heap's peak until the returned function is
// called, which returns it.
func sampleHeap(t testing.TB) func() uint64 {
	var (
		mu   sync.Mutex
		peak uint64
		stop = make(chan struct{})
		done = make(chan struct{})
	)
	go func() {
		defer close(done)
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		for {
			var m runtime.MemStats
			runtime.ReadMemStats(&m)
			mu.Lock()
			peak = max(peak, m.HeapAlloc)
			mu.Unlock()
			select {
			case <-stop:
				return
			case <-tick.C:
			}
		}
	}()
	return func() uint64 {
		close(stop)
		<-done
		mu.Lock()
		defer mu.Unlock()
		return peak
	}
}

// TestUserSite checks that a package in the conversation's package directory
// (where pip installs in the allowlist mode) can be imported by the next run,
// in both modes, however it got there: here it is made by hand.
func TestUserSite(t *testing.T) {
	t.Parallel()
	eachMode(t, func(t *testing.T, k *Kernel, sbx sandbox.Sandbox) {
		wantOK(t, run(t, k, "import site\nprint(site.getuserbase())"), egress.UserBase+"\n")
		res := run(t, k, "import handmade")
		if res.ExitCode != 1 || !strings.Contains(res.Stderr, "No module named 'handmade'") {
			t.Fatalf("handmade imported before it was made: %+v", res)
		}
		wantOK(t, run(t, k, "import os, site\np = os.path.join(site.getusersitepackages(), 'handmade')\n"+
			"os.makedirs(p)\nopen(os.path.join(p, '__init__.py'), 'w').write('answer = 42\\n');"), "")
		wantOK(t, run(t, k, "import sys, site, handmade\nprint(handmade.answer, sys.path.index(site.getusersitepackages()) < "+
			"min(i for i, p in enumerate(sys.path) if p.endswith('-packages') and p != site.getusersitepackages()))"), "42 True\n")
	})
}
