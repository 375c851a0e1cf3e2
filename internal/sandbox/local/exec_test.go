package local

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/terpdev/terp/internal/sandbox"
)

func TestExecExitCodesAndOutput(t *testing.T) {
	t.Parallel()
	s := newSandbox(t, sandbox.Options{})
	tests := []struct {
		name       string
		code       string
		wantExit   int
		wantStdout string
		wantStderr string
	}{
		{name: "success", code: "print('hello')", wantExit: 0, wantStdout: "hello\n"},
		{name: "exception", code: "print('before')\nraise ValueError('boom')", wantExit: 1,
			wantStdout: "before\n", wantStderr: "ValueError: boom"},
		{name: "sys.exit(3)", code: "import sys\nsys.exit(3)", wantExit: 3},
		{name: "stderr", code: "import sys\nprint('oops', file=sys.stderr)", wantExit: 0, wantStderr: "oops\n"},
		{name: "killed by SIGKILL", code: "import os, signal\nos.kill(os.getpid(), signal.SIGKILL)", wantExit: 128 + 9},
		{name: "killed by SIGTERM", code: "import os, signal\nos.kill(os.getpid(), signal.SIGTERM)", wantExit: 128 + 15},
		{name: "unicode", code: "print('naïve café ✓')", wantExit: 0, wantStdout: "naïve café ✓\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := runPython(t, s, "main.py", tt.code, sandbox.ExecOptions{})
			if res.ExitCode != tt.wantExit {
				t.Errorf("ExitCode = %d, want %d (stderr %q)", res.ExitCode, tt.wantExit, res.Stderr)
			}
			if res.Stdout != tt.wantStdout {
				t.Errorf("Stdout = %q, want %q", res.Stdout, tt.wantStdout)
			}
			if !strings.Contains(res.Stderr, tt.wantStderr) {
				t.Errorf("Stderr = %q, want it to contain %q", res.Stderr, tt.wantStderr)
			}
			if res.StdoutBytes != int64(len(res.Stdout)) || res.TimedOut {
				t.Errorf("StdoutBytes = %d, TimedOut = %v", res.StdoutBytes, res.TimedOut)
			}
		})
	}
}

func TestExecOptions(t *testing.T) {
	t.Parallel()
	s := newSandbox(t, sandbox.Options{})
	writeFile(t, s, "sub/data.txt", "in sub\n")
	code := "import os, sys\n" +
		"print(os.getcwd())\n" +
		"print(os.environ['GREETING'])\n" +
		"print(sys.stdin.read().upper())\n" +
		"print(open('data.txt').read(), end='')\n"
	writeFile(t, s, "main.py", code)
	res, err := s.Exec(t.Context(), []string{"python3", "/work/main.py"}, sandbox.ExecOptions{
		Dir:   "sub",
		Env:   []string{"GREETING=hi there"},
		Stdin: strings.NewReader("from stdin"),
	})
	if err != nil {
		t.Fatal(err)
	}
	want := "/work/sub\nhi there\nFROM STDIN\nin sub\n"
	if res.Stdout != want || res.ExitCode != 0 {
		t.Errorf("got exit %d, stdout %q, stderr %q; want stdout %q", res.ExitCode, res.Stdout, res.Stderr, want)
	}

	if _, err := s.Exec(t.Context(), []string{"true"}, sandbox.ExecOptions{Env: []string{"NOEQUALS"}}); err == nil {
		t.Error("Exec with a malformed Env entry succeeded")
	}
	if _, err := s.Exec(t.Context(), []string{"true"}, sandbox.ExecOptions{Dir: "no/such/dir"}); err == nil ||
		!strings.Contains(err.Error(), "working directory") {
		t.Errorf("Exec in a missing directory: %v, want an error about the working directory", err)
	}
	if _, err := s.Exec(t.Context(), nil, sandbox.ExecOptions{}); err == nil {
		t.Error("Exec with no command succeeded")
	}
}

// TestExecAnalysisLibraries is what the model does all day: pandas, numpy
// (through OpenBLAS, resolved via /etc/alternatives) and a matplotlib figure
// saved to /work with the Agg backend.
func TestExecAnalysisLibraries(t *testing.T) {
	t.Parallel()
	s := newSandbox(t, sandbox.Options{})
	writeFile(t, s, "data.csv", "x,y\n1,2\n2,4\n3,6\n")
	code := `
import numpy as np, pandas as pd, matplotlib
import matplotlib.pyplot as plt
df = pd.read_csv("data.csv")
print("mean y", df.y.mean())
a = np.random.default_rng(0).random((200, 200))
print("inverse ok", np.allclose(a @ np.linalg.inv(a), np.eye(200)))
print("backend", matplotlib.get_backend())
fig, ax = plt.subplots()
ax.plot(df.x, df.y)
fig.savefig("/work/plot.png")
`
	res := runPython(t, s, "main.py", code, sandbox.ExecOptions{Timeout: 60 * time.Second})
	if res.ExitCode != 0 {
		t.Fatalf("exit %d\nstdout: %s\nstderr: %s", res.ExitCode, res.Stdout, res.Stderr)
	}
	for _, want := range []string{"mean y 4.0", "inverse ok True", "backend agg"} {
		if !strings.Contains(strings.ToLower(res.Stdout), strings.ToLower(want)) {
			t.Errorf("stdout %q lacks %q", res.Stdout, want)
		}
	}
	if res.Stderr != "" {
		t.Errorf("unexpected stderr (warnings about the sandbox's setup?): %s", res.Stderr)
	}
	png := readFile(t, s, "/work/plot.png")
	if !strings.HasPrefix(png, "\x89PNG\r\n") {
		t.Errorf("plot.png is not a PNG (%d bytes)", len(png))
	}
}

// backgroundChildren is Python that leaves two processes behind: a plain
// child and a double-forked daemon in its own session, both running
// `sleep <marker-ish number>`. Then it runs main.
func backgroundChildren(mark, main string) string {
	return fmt.Sprintf(`
import os, subprocess, sys, time
subprocess.Popen(["bash", "-c", "exec -a %[1]s-child sleep 1000"])
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        os.execvp("bash", ["bash", "-c", "exec -a %[1]s-daemon sleep 1000"])
    os._exit(0)
time.sleep(0.3)
print("started", flush=True)
%[2]s
`, mark, main)
}

func TestExecLeavesNoProcessBehind(t *testing.T) {
	t.Parallel()
	s := newSandbox(t, sandbox.Options{})
	mark := marker(t)
	res := runPython(t, s, "main.py", backgroundChildren(mark, "sys.exit(0)"), sandbox.ExecOptions{})
	if res.ExitCode != 0 || res.Stdout != "started\n" {
		t.Fatalf("exit %d, stdout %q, stderr %q", res.ExitCode, res.Stdout, res.Stderr)
	}
	waitNoProcesses(t, mark)
}

func TestExecTimeoutKillsEverything(t *testing.T) {
	t.Parallel()
	s := newSandbox(t, sandbox.Options{})
	mark := marker(t)
	start := time.Now()
	res := runPython(t, s, "main.py", backgroundChildren(mark, "time.sleep(1000)"),
		sandbox.ExecOptions{Timeout: 1500 * time.Millisecond})
	if !res.TimedOut || res.ExitCode != sandbox.ExitTimedOut {
		t.Errorf("TimedOut = %v, ExitCode = %d; want true, %d", res.TimedOut, res.ExitCode, sandbox.ExitTimedOut)
	}
	if res.Stdout != "started\n" {
		t.Errorf("output before the timeout was lost: stdout %q, stderr %q", res.Stdout, res.Stderr)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("Exec took %v with a 1.5s timeout", d)
	}
	waitNoProcesses(t, mark)

	// The sandbox is still usable.
	if res := runPython(t, s, "ok.py", "print('ok')", sandbox.ExecOptions{}); res.Stdout != "ok\n" {
		t.Errorf("after a timeout: stdout %q, stderr %q", res.Stdout, res.Stderr)
	}
}

func TestExecContextCancelKills(t *testing.T) {
	t.Parallel()
	s := newSandbox(t, sandbox.Options{})
	mark := marker(t)
	writeFile(t, s, "main.py", backgroundChildren(mark, "time.sleep(1000)"))
	ctx, cancel := context.WithTimeout(t.Context(), 1500*time.Millisecond)
	defer cancel()
	res, err := s.Exec(ctx, []string{"python3", "main.py"}, sandbox.ExecOptions{})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Exec error = %v, want context.DeadlineExceeded", err)
	}
	if res.TimedOut {
		t.Errorf("TimedOut set for a canceled context")
	}
	waitNoProcesses(t, mark)
}

// TestExecOutputIsBounded prints 100 MB and checks that terp keeps only the
// bounded head and tail, and that its own heap stays flat meanwhile. It does
// not run in parallel so that other tests' allocations do not blur the
// measurement.
func TestExecOutputIsBounded(t *testing.T) {
	s := newSandbox(t, sandbox.Options{})
	const lines, lineLen = 100, 1 << 20
	code := fmt.Sprintf(`
import sys
line = "x" * %d + "\n"
sys.stdout.write("FIRST\n")
for _ in range(%d):
    sys.stdout.write(line)
sys.stdout.write("LAST\n")
`, lineLen-1, lines)
	writeFile(t, s, "main.py", code)

	runtime.GC()
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	peak := before.HeapInuse
	stop := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		tick := time.NewTicker(5 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
				var m runtime.MemStats
				runtime.ReadMemStats(&m)
				peak = max(peak, m.HeapInuse)
			}
		}
	}()
	res, err := s.Exec(t.Context(), []string{"python3", "main.py"}, sandbox.ExecOptions{MaxStdout: 4096})
	close(stop)
	<-sampled
	if err != nil {
		t.Fatal(err)
	}

	wantTotal := int64(len("FIRST\n") + lines*lineLen + len("LAST\n"))
	if res.StdoutBytes != wantTotal {
		t.Errorf("StdoutBytes = %d, want %d", res.StdoutBytes, wantTotal)
	}
	if len(res.Stdout) > 4096+64 {
		t.Errorf("kept %d bytes of stdout with MaxStdout 4096", len(res.Stdout))
	}
	if !strings.HasPrefix(res.Stdout, "FIRST\n") || !strings.HasSuffix(res.Stdout, "LAST\n") ||
		!strings.Contains(res.Stdout, "bytes omitted") {
		t.Errorf("stdout does not keep head, marker and tail: %.80q ... %.80q", res.Stdout, res.Stdout[len(res.Stdout)-80:])
	}
	growth := int64(peak) - int64(before.HeapInuse)
	t.Logf("printed %d MB; heap in use grew by at most %d KB", wantTotal>>20, growth>>10)
	if growth > 20<<20 {
		t.Errorf("heap grew by %d MB while reading 100 MB of output", growth>>20)
	}
}

func TestStartProcess(t *testing.T) {
	t.Parallel()
	s := newSandbox(t, sandbox.Options{})
	code := `
import signal, sys, time
def on_int(*_):
    print("interrupted", flush=True)
    sys.exit(7)
signal.signal(signal.SIGINT, on_int)
for line in sys.stdin:
    if line.strip() == "wait":
        print("waiting", flush=True)
        # Short sleeps: a SIGINT that lands after print returned but
        # before one sleep began runs its handler when that sleep ends
        # (CPython checks for signals between calls, not before a sleep),
        # and this test is of the sandbox delivering it, not of that race.
        while True:
            time.sleep(0.05)
    print(line.strip().upper(), flush=True)
`
	writeFile(t, s, "worker.py", code)

	p, err := s.Start(t.Context(), []string{"python3", "worker.py"}, sandbox.ExecOptions{})
	if err != nil {
		t.Fatal(err)
	}
	out := bufio.NewReader(p.Stdout())
	expect := func(want string) {
		t.Helper()
		line, err := out.ReadString('\n')
		if err != nil || line != want+"\n" {
			t.Fatalf("read %q, %v; want %q", line, err, want)
		}
	}
	io.WriteString(p.Stdin(), "hello\n")
	expect("HELLO")
	io.WriteString(p.Stdin(), "wait\n")
	expect("waiting")
	if err := p.Signal(sandbox.SIGINT); err != nil {
		t.Fatal(err)
	}
	expect("interrupted")
	if code, err := p.Wait(); code != 7 || err != nil {
		t.Errorf("Wait = %d, %v; want 7, nil", code, err)
	}

	// SIGKILL takes the whole sandbox down.
	mark := marker(t)
	writeFile(t, s, "bg.py", backgroundChildren(mark, "time.sleep(1000)"))
	p, err = s.Start(t.Context(), []string{"python3", "bg.py"}, sandbox.ExecOptions{})
	if err != nil {
		t.Fatal(err)
	}
	out = bufio.NewReader(p.Stdout())
	expect("started")
	// The marker finds both background processes while they run, so its
	// finding none afterwards means something.
	if pids := hostProcesses(mark); len(pids) != 2 {
		t.Errorf("found %d processes with the marker before the kill, want 2", len(pids))
	}
	if err := p.Signal(sandbox.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if code, err := p.Wait(); code != 128+9 || err != nil {
		t.Errorf("Wait = %d, %v; want 137, nil", code, err)
	}
	waitNoProcesses(t, mark)
	if rest, _ := io.ReadAll(p.Stderr()); len(rest) != 0 {
		t.Errorf("stderr: %s", rest)
	}
}
