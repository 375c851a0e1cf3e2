package conformance

import (
	"bytes"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/terpdev/terp/internal/kernel"
	"github.com/terpdev/terp/internal/sandbox"
)

// shellChecks are the checks that need what every real backend has and an
// in-memory one cannot fake: sh, python3 and its libraries, processes that
// fork and signal, and a network stack.
var shellChecks = []check{
	{"Python", python},
	{"KilledBySignal", killedBySignal},
	{"TimeoutKillsChildren", timeoutKillsChildren},
	{"NoNetwork", noNetwork},
	{"Kernel", kernelMode},
	{"DataDirHolds", dataDirHolds},
	{"NotebookCells", notebookCells},
}

func python(t *testing.T, b sandbox.Backend, _ Commands) {
	sbx := create(t, b)
	res := sh(t, sbx, "pwd; python3 -c 'print(6*7)'", sandbox.ExecOptions{})
	if res.ExitCode != 0 || res.Stdout != sandbox.WorkDir+"\n42\n" {
		t.Errorf("got exit %d stdout %q stderr %q", res.ExitCode, res.Stdout, res.Stderr)
	}
}

func killedBySignal(t *testing.T, b sandbox.Backend, _ Commands) {
	sbx := create(t, b)
	res := sh(t, sbx, "kill -KILL $$", sandbox.ExecOptions{})
	if res.ExitCode != 128+9 {
		t.Errorf("killed by SIGKILL: exit %d, want 137", res.ExitCode)
	}
}

func timeoutKillsChildren(t *testing.T, b sandbox.Backend, _ Commands) {
	sbx := create(t, b)
	start := time.Now()
	// The child outlives its parent's death unless the backend kills the
	// whole tree; if it survives it writes the marker file.
	res := sh(t, sbx, "(sleep 3; echo alive > /work/marker) & sleep 60", sandbox.ExecOptions{Timeout: time.Second})
	if !res.TimedOut || res.ExitCode != sandbox.ExitTimedOut {
		t.Errorf("TimedOut %v exit %d, want true %d", res.TimedOut, res.ExitCode, sandbox.ExitTimedOut)
	}
	if d := time.Since(start); d > 20*time.Second {
		t.Errorf("a 1s timeout took %v", d)
	}
	time.Sleep(4 * time.Second)
	if _, err := sbx.ReadFile(ctx(t), "/work/marker"); err == nil {
		t.Error("a child of the timed-out command survived and wrote its marker")
	}
}

func noNetwork(t *testing.T, b sandbox.Backend, _ Commands) {
	sbx := create(t, b)
	script := `import socket
s = socket.socket()
s.settimeout(3)
try:
    s.connect(("1.1.1.1", 80))
    print("CONNECTED")
except OSError as e:
    print("blocked", e)
`
	write(t, sbx, "/work/net.py", []byte(script))
	res := sh(t, sbx, "python3 /work/net.py", sandbox.ExecOptions{Timeout: 30 * time.Second})
	if strings.Contains(res.Stdout, "CONNECTED") || !strings.Contains(res.Stdout, "blocked") {
		t.Errorf("network is not off: stdout %q stderr %q", res.Stdout, res.Stderr)
	}
}

func kernelMode(t *testing.T, b sandbox.Backend, _ Commands) {
	sbx := create(t, b)
	k, err := kernel.Start(ctx(t), sbx, kernel.Options{})
	if err != nil {
		t.Fatalf("kernel.Start: %v", err)
	}
	defer func() { _ = k.Close() }()
	steps := []struct{ code, want string }{
		{"x = 41\nprint('set')", "set\n"},
		{"x += 1\nprint(x)", "42\n"},
		{"import matplotlib\nmatplotlib.use('Agg')\nimport matplotlib.pyplot as plt\nplt.plot([1, 2, 3], [x, 2, 1])\nplt.savefig('/work/chart.png')\nprint('saved')", "saved\n"},
	}
	for _, s := range steps {
		res, err := k.Run(ctx(t), s.code, 30*time.Second)
		if err != nil {
			t.Fatalf("Run %q: %v", s.code, err)
		}
		if res.ExitCode != 0 || res.Stdout != s.want {
			t.Fatalf("Run %q: exit %d stdout %q stderr %q notice %q", s.code, res.ExitCode, res.Stdout, res.Stderr, res.Notice)
		}
	}
	// A step that times out is interrupted; the session and its variables
	// survive it.
	res, err := k.Run(ctx(t), "import time\ntime.sleep(60)", time.Second)
	if err != nil || !res.TimedOut {
		t.Fatalf("a step past its timeout: %+v, %v", res, err)
	}
	res, err = k.Run(ctx(t), "print(x)", 30*time.Second)
	if err != nil || res.Stdout != "42\n" {
		t.Errorf("after an interrupted step: %+v, %v", res, err)
	}
	png := read(t, sbx, "/work/chart.png")
	if !bytes.HasPrefix(png, []byte("\x89PNG")) {
		t.Errorf("the chart is not a PNG (%d bytes)", len(png))
	}
}

// dataDirHolds checks that the code cannot take /mnt/data away from /work:
// neither removing, renaming nor replacing it with a link works, and
// afterwards it is still /work, also for a program started in it.
func dataDirHolds(t *testing.T, b sandbox.Backend, _ Commands) {
	sbx := create(t, b)
	script := `rmdir /mnt/data 2>/dev/null && echo REMOVED
mv /mnt/data /mnt/moved 2>/dev/null && echo MOVED
ln -sfn /tmp /mnt/data 2>/dev/null; rm -f /mnt/data/tmp
mkdir -p /mnt/data/sub && cd /mnt/data/sub && pwd && echo here > f.txt
python3 -c 'import os; print(os.path.samefile("/work", "/mnt/data"))'`
	res := sh(t, sbx, script, sandbox.ExecOptions{})
	if res.Stdout != sandbox.DataDir+"/sub\nTrue\n" {
		t.Errorf("after trying to remove /mnt/data: exit %d stdout %q stderr %q", res.ExitCode, res.Stdout, res.Stderr)
	}
	if got := string(read(t, sbx, "/work/sub/f.txt")); got != "here\n" {
		t.Errorf("/work/sub/f.txt = %q, want what was written in /mnt/data/sub", got)
	}
	if _, err := sbx.ReadFile(ctx(t), "/tmp/data"); err == nil {
		t.Error("ReadFile /tmp/data succeeded")
	}
}

// notebookCells runs a cell written as notebook-trained models write it, in
// both modes: /mnt/data, shell escapes, display() of an IPython.display
// object (IPython's own where the sandbox has it, terp's stand-in where it
// does not) and a file saved under /mnt/data that terp reads under /work.
func notebookCells(t *testing.T, b sandbox.Backend, _ Commands) {
	sbx := create(t, b)
	write(t, sbx, "/work/sales.csv", []byte("month,revenue\n1,10\n2,32\n"))
	code := `import pandas as pd
df = pd.read_csv('/mnt/data/sales.csv')
!ls /mnt/data
names = !ls /work
print(names)
!false
from IPython.display import display, Markdown
display(Markdown('**total** %d' % df.revenue.sum()))
df.to_csv('/mnt/data/out_%s.csv' % mode, index=False)
`
	for _, mode := range []string{"kernel", "script"} {
		k, err := kernel.Start(ctx(t), sbx, kernel.Options{Fresh: mode == "script"})
		if err != nil {
			t.Fatalf("kernel.Start: %v", err)
		}
		res, err := k.Run(ctx(t), "mode = "+strconv.Quote(mode)+"\n"+code, 60*time.Second)
		_ = k.Close()
		if err != nil {
			t.Fatalf("%s: Run: %v", mode, err)
		}
		want := "sales.csv\n['sales.csv']\n**total** 42\n"
		if mode == "script" {
			want = "out_kernel.csv\nsales.csv\n['out_kernel.csv', 'sales.csv']\n**total** 42\n"
		}
		if res.ExitCode != 0 || res.Stdout != want {
			t.Errorf("%s: exit %d stdout %q stderr %q, want stdout %q", mode, res.ExitCode, res.Stdout, res.Stderr, want)
		}
		if got := string(read(t, sbx, "/work/out_"+mode+".csv")); got != "month,revenue\n1,10\n2,32\n" {
			t.Errorf("%s: /work/out_%s.csv = %q", mode, mode, got)
		}
	}
}
