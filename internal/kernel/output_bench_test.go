package kernel

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/terpdev/terp/internal/sandbox"
	"github.com/terpdev/terp/internal/terptest"
)

// print512MiB writes 512 MiB to stdout in 1 KiB lines.
var print512MiB = terptest.PrintMiB(512)

// BenchmarkPrint512MiB times a run that prints 512 MiB, in each mode,
// against the same Python writing into a bare pipe in the same sandbox
// (`python3 -c CODE | cat >/dev/null`). What counts is what the output adds
// beyond each side's fixed cost: terp's is a run of `pass`, the pipe's the
// same command with an empty program. Each iteration runs all four, so the
// machine's noise falls on both sides alike; the metrics are the seconds
// the output adds on each side and their ratio terp/pipe.
//
// live=on runs it as terp's front-ends do, with an output function
// (WithOutput) that keeps up, as a terminal showing the last lines does.
func BenchmarkPrint512MiB(b *testing.B) {
	for _, bc := range []struct {
		name  string
		fresh bool
		live  bool
	}{{"kernel", false, false}, {"kernel", false, true}, {"script", true, false}, {"script", true, true}} {
		name := "mode=" + bc.name + ",live=off"
		ctx := context.Background()
		if bc.live {
			name = "mode=" + bc.name + ",live=on"
			ctx = WithOutput(ctx, func(Output) {})
		}
		b.Run(name, func(b *testing.B) {
			sbx := newSandbox(b)
			k := startKernel(b, sbx, Options{Fresh: bc.fresh})
			runTerp(b, k, "pass")
			var terp, pipe time.Duration
			for b.Loop() {
				terp += timeRun(ctx, b, k, print512MiB) - timeRun(ctx, b, k, "pass")
				pipe += timePipe(b, sbx, print512MiB) - timePipe(b, sbx, "")
			}
			b.ReportMetric(0, "ns/op")
			b.ReportMetric(terp.Seconds()/float64(b.N), "terp-s")
			b.ReportMetric(pipe.Seconds()/float64(b.N), "pipe-s")
			b.ReportMetric(float64(terp)/float64(pipe), "terp/pipe")
		})
	}
}

// timeRun runs code in k and returns how long Run took, checking that the
// output came back bounded, head and tail.
func timeRun(ctx context.Context, b *testing.B, k *Kernel, code string) time.Duration {
	b.Helper()
	start := time.Now()
	res, err := k.Run(ctx, code, 5*time.Minute)
	took := time.Since(start)
	if err != nil || res.ExitCode != 0 {
		b.Fatalf("Run: %v, exit %d, stderr:\n%s", err, res.ExitCode, res.Stderr)
	}
	if code != "pass" && (!strings.Contains(res.Stdout, "bytes omitted") || !strings.HasPrefix(res.Stdout, "xxxx") ||
		!strings.HasSuffix(res.Stdout, "xxxx\n") || len(res.Stdout) > 2*sandbox.DefaultMaxOutput) {
		b.Fatalf("stdout is not a bounded head and tail: %d bytes, %.100q", len(res.Stdout), res.Stdout)
	}
	return took
}

// timePipe runs code in a bare python3 whose stdout is a pipe to cat, in
// sbx, and returns how long the command took.
func timePipe(b *testing.B, sbx sandbox.Sandbox, code string) time.Duration {
	b.Helper()
	start := time.Now()
	res, err := sbx.Exec(context.Background(), []string{"sh", "-c", `python3 -c "$0" | cat >/dev/null`, code},
		sandbox.ExecOptions{Timeout: 5 * time.Minute})
	took := time.Since(start)
	if err != nil || res.ExitCode != 0 {
		b.Fatalf("Exec: %v, exit %d, stderr:\n%s", err, res.ExitCode, res.Stderr)
	}
	return took
}
