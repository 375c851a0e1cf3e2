package adversarial

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/terpdev/terp/internal/kernel"
)

// TestHostileKernelChannel writes frames into the kernel worker's private
// channel to terp, which the code can find among its descriptors: a frame
// of no run, and frames cut off halfway, whose size would make the worker's
// real frames their payload. Each must end the run as a broken channel,
// within seconds, with the notice that says so, never as a timeout; the
// next cell must work.
func TestHostileKernelChannel(t *testing.T) {
	t.Parallel()
	hostileKernelChannel(t, localTarget())
}

// TestHostileKernelChannelCPUOS runs the same cells through the cpuos
// client, where the worker's stream crosses HTTP.
func TestHostileKernelChannelCPUOS(t *testing.T) {
	t.Parallel()
	hostileKernelChannel(t, cpuosTarget(t))
}

// findNonce is Python that finds the run's nonce in the worker's frames,
// as hostile code can.
const findNonce = `import os, sys, time
f = sys._getframe()
while "nonce" not in f.f_locals:
    f = f.f_back
nonce = f.f_locals["nonce"]
`

func hostileKernelChannel(t *testing.T, tg *target) {
	sbx := tg.create(t, small)
	k, err := kernel.Start(context.Background(), sbx, kernel.Options{Grace: 500 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { k.Close() })

	for _, tt := range []struct {
		name, frame, after string
		timeout            time.Duration
	}{
		{"protocol/unknown-nonce", "'TERP 0123 out 1000\\n'", "", time.Minute},
		{"protocol/truncated-header", "'TERP %s out' % nonce", "time.sleep(30)", time.Minute},
		{"protocol/truncated-payload", "'TERP %s out 60000\\nabc' % nonce", "", time.Minute},
		{"protocol/truncated-payload-timeout", "'TERP %s out 1000\\nabc' % nonce", "time.sleep(30)", time.Second},
	} {
		code := findNonce + "for fd in range(3, 1024):\n    try:\n        os.write(fd, (" + tt.frame + ").encode())\n" +
			"    except OSError:\n        pass\n" + tt.after + "\n"
		res, err := k.Run(t.Context(), code, tt.timeout)
		t.Run(tt.name, func(t *testing.T) {
			if err != nil {
				t.Fatalf("run: %v", err)
			}
			t.Logf("after %s: exit %d, notice %q", res.Duration.Round(time.Millisecond), res.ExitCode, res.Notice)
			if res.TimedOut || !strings.Contains(res.Notice, "corrupted terp's output channel") ||
				!strings.Contains(res.Notice, "variables and imports were lost") {
				t.Errorf("timed out %v, notice %q; want the broken channel said", res.TimedOut, res.Notice)
			}
			if res.Duration > 6*time.Second {
				t.Errorf("took %s to notice", res.Duration)
			}
			next, err := k.Run(t.Context(), "print('alive')", 30*time.Second)
			if err != nil || next.Stdout != "alive\n" || next.Notice != "" {
				t.Errorf("the next cell: %+v, %v", next, err)
			}
		})
	}
}
