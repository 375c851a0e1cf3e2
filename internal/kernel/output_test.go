package kernel

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/terpdev/terp/internal/sandbox"
)

// TestOutputArrivesWhileTheCodeRuns holds the code until the test has seen,
// through WithOutput, what it printed first: a kernel that reported output
// only at the end would never let it go on.
func TestOutputArrivesWhileTheCodeRuns(t *testing.T) {
	t.Parallel()
	sbx := newSandbox(t)
	k := startKernel(t, sbx, Options{})
	var (
		mu       sync.Mutex
		out, err string
		released bool
	)
	ctx := WithOutput(context.Background(), func(o Output) {
		mu.Lock()
		defer mu.Unlock()
		switch o.Stream {
		case Stdout:
			out += o.Text
		case Stderr:
			err += o.Text
		default:
			t.Errorf("output on stream %q", o.Stream)
		}
		if !released && strings.Contains(out, "first\n") && strings.Contains(err, "warning\n") {
			released = true
			if err := sbx.WriteFile(context.Background(), "/work/go-on", strings.NewReader("")); err != nil {
				t.Error(err)
			}
		}
	})
	code := "import os, sys, time\nprint('first')\nsys.stderr.write('warning\\n')\n" +
		"deadline = time.time() + 60\n" +
		"while not os.path.exists('/work/go-on'):\n" +
		"    if time.time() > deadline:\n        sys.exit('nobody saw the first line')\n" +
		"    time.sleep(0.01)\nprint('second')"
	res, runErr := k.Run(ctx, code, 2*time.Minute)
	if runErr != nil || res.ExitCode != 0 || res.Stdout != "first\nsecond\n" {
		t.Fatalf("Run = %+v, %v; want the code released by the first line it printed", res, runErr)
	}
	mu.Lock()
	defer mu.Unlock()
	if !released || !strings.HasPrefix(out, "first\n") {
		t.Errorf("live output: stdout %q, stderr %q", out, err)
	}
}

// TestStuckOutputConsumerDoesNotHoldUpTheCode keeps the output function
// stuck in its first call until the code has printed far more than any pipe
// holds (2 MB) and finished: the run must end with its output all the same.
func TestStuckOutputConsumerDoesNotHoldUpTheCode(t *testing.T) {
	t.Parallel()
	sbx := newSandbox(t)
	k := startKernel(t, sbx, Options{MaxStdout: 1 << 20})
	var calls, got int
	ctx := WithOutput(context.Background(), func(o Output) {
		calls++
		got += len(o.Text)
		if calls > 1 {
			return
		}
		for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
			if rc, err := sbx.ReadFile(context.Background(), "/work/finished"); err == nil {
				rc.Close()
				return
			}
		}
		t.Error("the code never finished while the output function was stuck")
	})
	code := "for i in range(200000):\n    print('line', i)\nopen('/work/finished', 'w').close()\nprint('end')"
	res, err := k.Run(ctx, code, 2*time.Minute)
	if err != nil || res.ExitCode != 0 || !strings.HasSuffix(res.Stdout, "line 199999\nend\n") || !strings.HasPrefix(res.Stdout, "line 0\n") {
		t.Fatalf("Run = exit %d, %d bytes of stdout, %v; want the whole output", res.ExitCode, len(res.Stdout), err)
	}
	if calls == 0 {
		t.Error("the output function was never called")
	}
	// What found the queue full was dropped.
	printed := len("end\n")
	for i := range 200000 {
		printed += len(fmt.Sprintf("line %d\n", i))
	}
	if got >= printed {
		t.Errorf("the output function got %d bytes of the %d printed; want pieces dropped", got, printed)
	}
}

// TestScriptCancelKeepsTheOutput cancels a script mid-run: the error says
// so, and the result still has what it printed and how long it ran.
func TestScriptCancelKeepsTheOutput(t *testing.T) {
	t.Parallel()
	sbx := newSandbox(t)
	s := startKernel(t, sbx, Options{Fresh: true})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		// Cancelled once the code has printed and is sleeping.
		for ctx.Err() == nil {
			if rc, err := sbx.ReadFile(ctx, "/work/started"); err == nil {
				_, _ = io.Copy(io.Discard, rc)
				rc.Close()
				cancel()
				return
			}
			time.Sleep(10 * time.Millisecond)
		}
	}()
	res, err := s.Run(ctx, "import time\nprint('started', flush=True)\nopen('/work/started', 'w').close()\ntime.sleep(60)", 2*time.Minute)
	if !errors.Is(err, context.Canceled) || res.Stdout != "started\n" || res.Duration <= 0 {
		t.Fatalf("Run = %+v, %v; want cancelled with the output so far", res, err)
	}
}

// What the model reads of a run is what a terminal would show: a line
// redrawn with carriage returns 3,000 times is its last state, colour codes
// are gone, both before the head-and-tail bound, which then holds the
// useful text whole. The live feed still gets the raw pieces.
func TestOutputIsWhatATerminalShows(t *testing.T) {
	t.Parallel()
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			t.Parallel()
			k := startKernel(t, newSandbox(t), Options{Fresh: m.fresh, MaxStdout: 300, MaxStderr: 300})
			code := `import sys
for i in range(3000):
    print(f"\rprogress {i * 100 // 2999:3d}%", end="", flush=True)
print()
for i in range(3):
    sys.stderr.write(f"\r  {i}/3 |{'#' * i}{' ' * (3 - i)}|")
sys.stderr.write("\r100%|###| 3/3\n")
print("\x1b[1;32mresult\x1b[0m 42 \x1b]0;a title\x07done")
`
			var raw strings.Builder
			var mu sync.Mutex
			ctx := WithOutput(context.Background(), func(o Output) {
				mu.Lock()
				raw.WriteString(o.Text)
				mu.Unlock()
			})
			res, err := k.Run(ctx, code, time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			if res.ExitCode != 0 || res.Stdout != "progress 100%\nresult 42 done\n" || res.Stderr != "100%|###| 3/3\n" {
				t.Errorf("exit %d\nstdout %q\nstderr %q\nwant the last state of each line, without escapes", res.ExitCode, res.Stdout, res.Stderr)
			}
			mu.Lock()
			defer mu.Unlock()
			// A slow reader may miss pieces of the feed (under the race
			// detector it misses the tail), so only the rawness is checked:
			// the redraws are there as sent.
			if n := strings.Count(raw.String(), "\rprogress"); n < 2 {
				t.Errorf("the live feed got %d redraws, want the raw stream", n)
			}
		})
	}
}

// lines is what `for i in range(n): print('%07d' % i)` prints.
func lines(n int) string {
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, "%07d\n", i)
	}
	return b.String()
}

// TestAllOutputArrives prints 2 MB to a consumer slower than the code:
// under WithAllOutput every byte arrives, in order, before Run returns.
func TestAllOutputArrives(t *testing.T) {
	eachMode(t, func(t *testing.T, k *Kernel, _ sandbox.Sandbox) {
		var got strings.Builder
		pieces := 0
		ctx := WithAllOutput(context.Background(), func(o Output) {
			if o.Stream == Stdout {
				got.WriteString(o.Text)
			}
			pieces++
			time.Sleep(time.Millisecond)
		})
		const n = 1 << 18 // 8 bytes each: 2 MiB
		res, err := k.Run(ctx, fmt.Sprintf("import sys\nfor i in range(%d):\n    sys.stdout.write('%%07d\\n' %% i)", n), 2*time.Minute)
		if err != nil || res.ExitCode != 0 {
			t.Fatalf("Run = exit %d, %v, stderr %q", res.ExitCode, err, res.Stderr)
		}
		want := lines(n)
		if g := got.String(); g != want {
			i := 0
			for i < min(len(g), len(want)) && g[i] == want[i] {
				i++
			}
			t.Errorf("got %d bytes in %d pieces, want %d; they differ from byte %d", len(g), pieces, len(want), i)
		}
	})
}

// TestAllOutputGivesUpWithItsContext: a consumer that stops reading holds
// the code up, but not beyond ctx: the run then ends as cancelled, without
// waiting for the consumer.
func TestAllOutputGivesUpWithItsContext(t *testing.T) {
	t.Parallel()
	k := startKernel(t, newSandbox(t), Options{})
	release := make(chan struct{})
	defer close(release)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	live := WithAllOutput(ctx, func(Output) {
		cancel()
		<-release
	})
	res, err := k.Run(live, "x = 1\nfor i in range(1 << 18):\n    print('%07d' % i)", 2*time.Minute)
	if !errors.Is(err, context.Canceled) || res.Outcome != OutcomeInterrupted {
		t.Fatalf("Run = outcome %q, %v; want interrupted", res.Outcome, err)
	}
	wantOK(t, run(t, k, "print(x)"), "1\n")
}

// TestLiveFeedKeepsTheTail sends a feed for a WithOutput function far more
// than its backlog, in small pieces of both streams, faster than it is
// called: the function is called far less often than pieces came, in the
// order they came, never with more than the backlog, and what it got last
// (stop passes on what is left) ends with the last bytes sent.
func TestLiveFeedKeepsTheTail(t *testing.T) {
	t.Parallel()
	var got []Output
	f := startFeed(WithOutput(context.Background(), func(o Output) { got = append(got, o) }))
	const pieces = 20000
	var last string
	for i := range pieces {
		stream := Stdout
		if i%1000 == 999 {
			stream = Stderr
		}
		last = fmt.Sprintf("%s line %06d\n", stream, i)
		f.send(stream, []byte(last))
	}
	f.stop()
	if len(got) == 0 || len(got) > pieces/10 {
		t.Fatalf("%d calls for %d pieces; want a few, each with what gathered", len(got), pieces)
	}
	prev := -1
	for _, o := range got {
		if len(o.Text) > liveBacklog {
			t.Errorf("a call with %d bytes, more than the backlog (%d)", len(o.Text), liveBacklog)
		}
		for _, line := range strings.Split(strings.TrimSuffix(o.Text, "\n"), "\n") {
			var stream string
			var n int
			if _, err := fmt.Sscanf(line, "%s line %d", &stream, &n); err != nil {
				continue // the first line of a cut piece
			}
			if stream != o.Stream || n <= prev {
				t.Fatalf("line %q in a call on %s after line %d: out of order or on the wrong stream", line, o.Stream, prev)
			}
			prev = n
		}
	}
	if end := got[len(got)-1]; !strings.HasSuffix(end.Text, last) {
		t.Errorf("the last call ends with %q, want the last piece %q", end.Text[max(len(end.Text)-40, 0):], last)
	}
}
