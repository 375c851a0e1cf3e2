package kernel

import (
	"fmt"
	"strings"
	"testing"
)

// TestForkedChildren runs cells whose forked children come back into the
// worker's code: by falling off the end of the cell, raising, or calling
// sys.exit. Only the worker may answer for a cell, so the cell's output must
// be the parent's and the children's, whole, and the next cells must run in
// the same worker, each with its own output.
func TestForkedChildren(t *testing.T) {
	t.Parallel()
	k := startKernel(t, newSandbox(t), Options{})
	wantOK(t, run(t, k, "import os\nworker_pid = os.getpid()\nkept = 'kept'"), "")
	first := currentWorker(t, k)

	for _, tt := range []struct {
		name, code string
		stdout     string
		stderr     string // a fragment of it
	}{
		{
			"child falls off the cell",
			"import os\nprint('parent before', flush=True)\npid = os.fork()\nif pid == 0:\n    print('child')\n" +
				"else:\n    _, status = os.waitpid(pid, 0)\n    print('parent after, child exit', os.waitstatus_to_exitcode(status))",
			"parent before\nchild\nparent after, child exit 0\n", "",
		},
		{
			"child raises",
			"import os\npid = os.fork()\nif pid == 0:\n    raise ValueError('in the child')\n" +
				"_, status = os.waitpid(pid, 0)\nprint('child exit', os.waitstatus_to_exitcode(status))",
			"child exit 1\n", "ValueError: in the child",
		},
		{
			"child calls sys.exit",
			"import os, sys\npid = os.fork()\nif pid == 0:\n    sys.exit(3)\n" +
				"_, status = os.waitpid(pid, 0)\nprint('child exit', os.waitstatus_to_exitcode(status))",
			"child exit 3\n", "",
		},
		{
			// What the parent printed but had not flushed at the fork is not
			// printed twice, and what the child printed without a newline is
			// not lost.
			"unflushed output",
			"import os\nprint('a', end='')\npid = os.fork()\nif pid == 0:\n    print('b', end='')\n" +
				"else:\n    os.waitpid(pid, 0)\n    print('c')",
			"abc\n", "",
		},
		{
			// Sixteen processes, fifteen of which fall off the cell at once.
			"fork tree",
			"import os, time\nroot = os.getpid()\nfor i in range(4):\n    os.fork()\n" +
				"if os.getpid() == root:\n    time.sleep(0.5)\n    print('root done')",
			"root done\n", "",
		},
		{
			// A fork(2) that bypasses os.fork and its at-fork hooks; PyDLL
			// keeps the GIL across the call, so the child can run Python.
			"bare fork(2)",
			"import ctypes, os\npid = ctypes.PyDLL(None).fork()\nif pid == 0:\n    print('child')\n" +
				"else:\n    os.waitpid(pid, 0)\n    print('parent after')",
			"child\nparent after\n", "",
		},
		{
			"multiprocessing fork",
			"import multiprocessing as mp\nctx = mp.get_context('fork')\ndef put(q):\n    q.put(42)\n" +
				"q = ctx.Queue()\np = ctx.Process(target=put, args=(q,))\np.start()\nprint(q.get())\np.join()\nprint('exit', p.exitcode)",
			"42\nexit 0\n", "",
		},
		{
			"multiprocessing fork pool",
			"import multiprocessing as mp\nwith mp.get_context('fork').Pool(2) as pool:\n    print(pool.map(abs, [-1, -2, -3]))",
			"[1, 2, 3]\n", "",
		},
	} {
		t.Run(tt.name, func(t *testing.T) {
			res := run(t, k, tt.code)
			if res.ExitCode != 0 || res.Stdout != tt.stdout || !strings.Contains(res.Stderr, tt.stderr) ||
				res.Notice != "" || res.TimedOut {
				t.Errorf("exit %d, timed out %v, stdout %q, notice %q, stderr:\n%s\nwant exit 0, stdout %q",
					res.ExitCode, res.TimedOut, res.Stdout, res.Notice, res.Stderr, tt.stdout)
			}
			// The next cells run in the worker itself, not in a forked copy,
			// and each gets its own output.
			for i := range 3 {
				wantOK(t, run(t, k, fmt.Sprintf("print(%d, os.getpid() == worker_pid, kept)", i)),
					fmt.Sprintf("%d True kept\n", i))
			}
			if currentWorker(t, k) != first {
				t.Error("the worker was replaced")
			}
		})
	}
}
