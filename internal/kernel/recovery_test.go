package kernel

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/terpdev/terp/internal/sandbox"
)

// wantNotice fails unless notice says every one of want.
func wantNotice(t testing.TB, notice string, want ...string) {
	t.Helper()
	for _, w := range want {
		if !strings.Contains(notice, w) {
			t.Errorf("notice %q does not say %q", notice, w)
		}
	}
}

// wantLost checks that a run found a fresh session that works.
func wantLost(t testing.TB, k *Kernel) {
	t.Helper()
	res := run(t, k, "kept")
	if res.ExitCode != 1 || !strings.Contains(res.Stderr, "NameError: name 'kept' is not defined") {
		t.Errorf("after a restart: exit %d, stderr %q; want the variable gone", res.ExitCode, res.Stderr)
	}
	wantOK(t, run(t, k, "print(open('/work/kept.txt').read())"), "file\n")
}

func TestTimeoutInterrupts(t *testing.T) {
	t.Parallel()
	k := startKernel(t, newSandbox(t), Options{Grace: 5 * time.Second})
	// A signal mask left by an earlier run does not protect a later one.
	wantOK(t, run(t, k, "kept = 1\nimport signal\nsignal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT});"), "")
	res := runWithin(t, k, "import subprocess\nchild = subprocess.Popen(['sleep', '300'])\n"+
		"print('looping', flush=True)\nn = 0\nwhile True:\n    n += 1", time.Second)
	if !res.TimedOut || res.ExitCode != 1 || res.Stdout != "looping\n" ||
		!strings.Contains(res.Stderr, "KeyboardInterrupt") || strings.Contains(res.Stderr, "worker.py") {
		t.Errorf("timed out %v, exit %d, stdout %q, stderr:\n%s", res.TimedOut, res.ExitCode, res.Stdout, res.Stderr)
	}
	wantNotice(t, res.Notice, "timed out after 1s", "interrupted", "variables and imports were kept")
	// The variables survive, including what the interrupted run set; the
	// child it started does not.
	wantOK(t, run(t, k, "print(kept, n > 0, child.poll() is not None)"), "1 True True\n")
}

func TestTimeoutKills(t *testing.T) {
	t.Parallel()
	sbx := newSandbox(t)
	k := startKernel(t, sbx, Options{Grace: 500 * time.Millisecond})
	wantOK(t, run(t, k, "kept = 1\nopen('/work/kept.txt', 'w').write('file');"), "")
	first := currentWorker(t, k)
	// SIGINT is blocked in the main thread, as in a C call that never checks
	// for signals: only SIGKILL ends this.
	res := runWithin(t, k, "import signal, time\nprint('sleeping', flush=True)\n"+
		"signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})\ntime.sleep(60)", time.Second)
	if !res.TimedOut || res.ExitCode != sandbox.ExitTimedOut || res.Stdout != "sleeping\n" {
		t.Errorf("timed out %v, exit %d, stdout %q, stderr %q", res.TimedOut, res.ExitCode, res.Stdout, res.Stderr)
	}
	wantNotice(t, res.Notice, "timed out after 1s and was killed", "restarted",
		"all variables and imports were lost", "Files in /work were kept")
	if currentWorker(t, k) == first {
		t.Error("the worker was not replaced")
	}
	wantLost(t, k)
}

// TestTimeoutKillsAFlood checks that a run still flooding the channel when
// its grace period ends is killed then, as a timeout: frames that keep
// completing are no cut-off frame to wait for a verdict on.
func TestTimeoutKillsAFlood(t *testing.T) {
	t.Parallel()
	k := startKernel(t, newSandbox(t), Options{Grace: 500 * time.Millisecond})
	res := runWithin(t, k, "import os, signal\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\n"+
		"block = b'x' * 65536\nwhile True:\n    os.write(1, block)", time.Second)
	if !res.TimedOut || res.ExitCode != sandbox.ExitTimedOut || !strings.Contains(res.Stdout, "xxx") {
		t.Errorf("timed out %v, exit %d, %d bytes of stdout", res.TimedOut, res.ExitCode, len(res.Stdout))
	}
	wantNotice(t, res.Notice, "timed out after 1s and was killed")
	if res.Duration > 3*time.Second {
		t.Errorf("killed after %s, want about 1.5s", res.Duration)
	}
	wantOK(t, run(t, k, "print('next')"), "next\n")
}

func TestCrashes(t *testing.T) {
	t.Parallel()
	k := startKernel(t, newSandbox(t), Options{})
	for _, tt := range []struct {
		name, code string
		exit       int
		notice     string
		stderr     string
	}{
		{"os._exit", "import os\nos._exit(3)", 3, "exited with code 3", ""},
		{"segfault", "import ctypes\nctypes.string_at(0)", 139,
			"killed by SIGSEGV (segmentation fault)", "Fatal Python error: Segmentation fault"},
		{"SIGKILL", "import os, signal\nos.kill(os.getpid(), signal.SIGKILL)", 137,
			"memory limit", ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			wantOK(t, run(t, k, "kept = 1\nopen('/work/kept.txt', 'w').write('file');"), "")
			// The worker forwards output from a pipe it reads itself, so what
			// is printed in the instant before a hard crash can be lost; the
			// pause lets it through.
			res := run(t, k, "import time\nprint('bye', flush=True)\ntime.sleep(0.5)\n"+tt.code)
			if res.ExitCode != tt.exit || res.Stdout != "bye\n" || res.TimedOut || !strings.Contains(res.Stderr, tt.stderr) {
				t.Errorf("exit %d, stdout %q, stderr %q", res.ExitCode, res.Stdout, res.Stderr)
			}
			wantNotice(t, res.Notice, "crashed", tt.notice, "all variables and imports were lost", "Files in /work were kept")
			wantLost(t, k)
		})
	}
	// faulthandler's report names the model's line, not the worker's.
	res := run(t, k, "import ctypes\n\nctypes.string_at(0)")
	if !strings.Contains(res.Stderr, `>", line 3 in <module>`) || !strings.Contains(res.Stderr, `File "<cell `) || strings.Contains(res.Stderr, "worker.py") {
		t.Errorf("crash report:\n%s", res.Stderr)
	}
}

func TestDiedBetweenRuns(t *testing.T) {
	t.Parallel()
	k := startKernel(t, newSandbox(t), Options{})
	wantOK(t, run(t, k, "kept = 1\nopen('/work/kept.txt', 'w').write('file')\n"+
		"import os, threading\nthreading.Timer(1, os._exit, [5]).start()"), "")
	w := currentWorker(t, k)
	<-w.exited
	res := run(t, k, "kept")
	if res.ExitCode != 1 {
		t.Errorf("exit %d, stderr %q", res.ExitCode, res.Stderr)
	}
	wantNotice(t, res.Notice, "stopped since the last run", "exited with code 5", "all variables and imports were lost")
	if want := (Restart{Reason: RestartCrashed, ExitCode: 5, SessionLost: true}); res.Died == nil || *res.Died != want || res.Cell != 1 {
		t.Errorf("died %+v, cell %d; want %+v, cell 1", res.Died, res.Cell, want)
	}
	wantLost(t, k)
}

func TestCorruptedChannel(t *testing.T) {
	t.Parallel()
	// The grace is shorter than frameStall, so that a run interrupted while
	// a cut-off frame blocks the stream is still judged by the stream.
	k := startKernel(t, newSandbox(t), Options{Grace: 500 * time.Millisecond})
	// Hostile code can find the channel among its descriptors; it can break
	// its own session, but not terp: whatever it writes there, the run ends
	// as a broken channel within seconds, never as a timeout or a result.
	for _, tt := range []struct {
		name, frame string
		after       string        // what the cell does after writing the frame
		timeout     time.Duration // the run's
		notice      string
	}{
		{"garbage", "'garbage\\n'", "time.sleep(10)", time.Minute, "bad frame header"},
		{"huge frame", "'TERP %s out 99999999\\n' % nonce", "time.sleep(10)", time.Minute, "out frames are at most 65536 bytes"},
		// A frame of no run would swallow the real end of the run as its
		// payload.
		{"unknown nonce", "'TERP 0123 out 1000\\n'", "", time.Minute, "belongs to no run in progress"},
		{"unknown nonce, whole frame", "'TERP 0123 done 2\\n{}'", "", time.Minute, "belongs to no run in progress"},
		{"second ready", "'TERP %s ready 2\\n{}' % nonce", "", time.Minute, "ready frame"},
		// The code goes on running, so no frame of the worker's completes it.
		{"truncated header", "'TERP %s out' % nonce", "time.sleep(10)", time.Minute, "stopped inside a frame header"},
		// The run's own frames disappear into its payload.
		{"truncated payload", "'TERP %s out 1000\\nabc' % nonce", "", time.Minute, "stopped inside a frame's payload"},
		{"truncated payload, run times out", "'TERP %s out 1000\\nabc' % nonce", "time.sleep(10)", time.Second,
			"stopped inside a frame's payload"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			wantOK(t, run(t, k, "kept = 1\nopen('/work/kept.txt', 'w').write('file');"), "")
			res := runWithin(t, k, `
import os, sys, time
f = sys._getframe()
while "nonce" not in f.f_locals:
    f = f.f_back
nonce = f.f_locals["nonce"]
print("before", flush=True)
time.sleep(0.1)
for fd in range(3, 1024):
    try:
        os.write(fd, (`+tt.frame+`).encode())
    except OSError:
        pass
`+tt.after+`
`, tt.timeout)
			wantNotice(t, res.Notice, "corrupted terp's output channel", tt.notice, "restarted",
				"all variables and imports were lost", "Files in /work were kept")
			if res.TimedOut || strings.Contains(res.Notice, "timed out") || res.Stdout != "before\n" {
				t.Errorf("timed out %v, stdout %q, notice %q", res.TimedOut, res.Stdout, res.Notice)
			}
			if r := res.Restart; res.Outcome != OutcomeRestarted || r == nil || r.Reason != RestartProtocol ||
				!strings.Contains(r.Detail, tt.notice) || !r.SessionLost {
				t.Errorf("outcome %q, restart %+v; want a broken channel", res.Outcome, r)
			}
			if res.Duration > 5*time.Second {
				t.Errorf("took %s to notice", res.Duration)
			}
			wantLost(t, k)
		})
	}
}

func TestCancel(t *testing.T) {
	t.Parallel()
	k := startKernel(t, newSandbox(t), Options{})
	wantOK(t, run(t, k, "kept = 1"), "")
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	res, err := k.Run(ctx, "print('start', flush=True)\nimport time\ntime.sleep(60)", time.Minute)
	if !errors.Is(err, context.DeadlineExceeded) || res.TimedOut || res.Stdout != "start\n" ||
		!strings.Contains(res.Stderr, "KeyboardInterrupt") {
		t.Errorf("Run = %+v, %v", res, err)
	}
	wantOK(t, run(t, k, "kept"), "1\n")

	// Close from another goroutine ends a run at once.
	go func() {
		time.Sleep(300 * time.Millisecond)
		k.Close()
	}()
	start := time.Now()
	if _, err := k.Run(context.Background(), "import time\ntime.sleep(60)", time.Minute); !errors.Is(err, errClosed) {
		t.Errorf("Run during Close: %v", err)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("Run took %s to end after Close", d)
	}
}

func TestNoProcessOutlivesItsRun(t *testing.T) {
	t.Parallel()
	k := startKernel(t, newSandbox(t), Options{})
	// Names unique to this test, to look for on the host.
	mark := "terp" + newNonce()[:12]
	code := strings.ReplaceAll(`
import os, subprocess, time
bg = subprocess.Popen(["bash", "-c", "exec -a child-MARK sleep 300"])
os.system("setsid bash -c 'exec -a daemon-MARK sleep 301' > /dev/null 2>&1 &")
pid = os.fork()
if pid == 0:
    if os.fork() == 0:
        os.setsid()
        os.execvp("bash", ["bash", "-c", "exec -a forked-MARK sleep 302"])
    os._exit(0)
os.waitpid(pid, 0)
deadline = time.time() + 20
while len([p for p in processes() if p.endswith("-MARK")]) < 3 and time.time() < deadline:
    time.sleep(0.01)
print(processes())
`, "MARK", mark)
	// The processes did start, and are alive as the run ends.
	wantOK(t, run(t, k, listProcesses+code),
		strings.ReplaceAll("['bwrap', 'child-MARK', 'daemon-MARK', 'forked-MARK']\n", "MARK", mark))
	// Checked from inside: only the worker is left in its sandbox, and the
	// sandbox's init.
	wantOK(t, run(t, k, "processes()"), "['bwrap']\n")
	// And from the host.
	if pids := hostProcesses(mark); len(pids) > 0 {
		t.Errorf("processes %v survived", pids)
	}
}

// listProcesses defines processes(), the sorted names of the sandbox's
// processes other than the worker.
const listProcesses = `
import os
def processes():
    names = []
    for p in os.listdir("/proc"):
        if p.isdigit() and int(p) != os.getpid():
            try:
                argv0 = open("/proc/%s/cmdline" % p, "rb").read().split(b"\0")[0].decode()
            except OSError:
                continue
            if argv0:
                names.append(os.path.basename(argv0))
    return sorted(names)
`

// A cell that grows /work past max_work_size is stopped by the sandbox, and
// the model is told that, not a guess about memory.
func TestWorkFullStopsTheCell(t *testing.T) {
	t.Parallel()
	sbx, err := testBackend.Create(t.Context(), sandbox.Options{Limits: sandbox.Limits{WorkBytes: 16 << 20}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sbx.Close(context.Background()) })
	k := startKernel(t, sbx, Options{})
	wantOK(t, run(t, k, "kept = 1\nopen('/work/kept.txt', 'w').write('file');"), "")
	// At most 2 GiB, so that a watch that failed fails the test without
	// filling the disk.
	res := runWithin(t, k, "for n in range(512):\n    open(f'/work/fill{n}', 'wb').write(b'x' * (4 << 20))", time.Minute)
	wantNotice(t, res.Notice, "past the sandbox's 16.0 MiB limit (max_work_size)", "Delete files", "all variables and imports were lost")
	if strings.Contains(res.Notice, "memory") {
		t.Errorf("the notice blames memory: %q", res.Notice)
	}
	if r := res.Restart; r == nil || r.Reason != RestartStopped || !strings.Contains(r.Detail, "max_work_size") {
		t.Errorf("restart %+v; want the sandbox's stop", r)
	}
	// Cleaning up runs, over the limit as /work still is.
	wantOK(t, run(t, k, "import glob, os\nfor p in glob.glob('/work/fill*'): os.remove(p)\nprint('clean')"), "clean\n")
}
