package kernel

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/terpdev/terp/internal/sandbox"
	"github.com/terpdev/terp/internal/terptest"
)

// firstStep is a first tool call that needs pandas and matplotlib.
var firstStep = terptest.AnalysisSteps[2]

// modelLatency stands for the model writing its first tool call, which the
// prewarm imports overlap with.
const modelLatency = 2 * time.Second

// benchSandbox makes a sandbox with examples/sales.csv uploaded.
func benchSandbox(b *testing.B) sandbox.Sandbox {
	b.Helper()
	sbx := newSandbox(b)
	f, err := os.Open("../../examples/sales.csv")
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	if err := sbx.WriteFile(context.Background(), "/work/sales.csv", f); err != nil {
		b.Fatal(err)
	}
	return sbx
}

func benchRun(b *testing.B, r Runner, code string) {
	b.Helper()
	res, err := r.Run(context.Background(), code, time.Minute)
	if err != nil || res.ExitCode != 0 {
		b.Fatalf("Run: %v, exit %d, stderr:\n%s", err, res.ExitCode, res.Stderr)
	}
}

// BenchmarkFiveStepAnalysis compares a whole five-step analysis in both
// modes. Kernel mode pays its start (with the default prewarm) and Close
// inside the measurement.
func BenchmarkFiveStepAnalysis(b *testing.B) {
	b.Run("mode=kernel", func(b *testing.B) {
		sbx := benchSandbox(b)
		for b.Loop() {
			k, err := Start(context.Background(), sbx, Options{Prewarm: DefaultPrewarm})
			if err != nil {
				b.Fatal(err)
			}
			for _, step := range terptest.AnalysisSteps {
				benchRun(b, k, step)
			}
			if err := k.Close(); err != nil {
				b.Fatal(err)
			}
		}
	})
	// The steps alone, once the worker is ready: a conversation's steady
	// state, and its first step too when the model's first reply takes
	// longer than the prewarm imports.
	b.Run("mode=kernel,ready", func(b *testing.B) {
		sbx := benchSandbox(b)
		for i := 0; i < b.N; i++ {
			b.StopTimer()
			k, err := Start(context.Background(), sbx, Options{Prewarm: DefaultPrewarm})
			if err != nil {
				b.Fatal(err)
			}
			// A cell importing more than the standard library waits for the
			// prewarm imports to end, as a first step does after a model
			// slower than they are.
			benchRun(b, k, "import numpy")
			b.StartTimer()
			for _, step := range terptest.AnalysisSteps {
				benchRun(b, k, step)
			}
			b.StopTimer()
			if err := k.Close(); err != nil {
				b.Fatal(err)
			}
		}
	})
	// Script mode preloads the same modules as kernel mode prewarms; the
	// steps are timed once the preload is over, as in mode=kernel,ready.
	b.Run("mode=script", func(b *testing.B) {
		s := startKernel(b, benchSandbox(b), Options{Fresh: true, Prewarm: DefaultPrewarm})
		benchRun(b, s, "import pandas, matplotlib")
		for b.Loop() {
			for _, step := range terptest.AnalysisSteps {
				benchRun(b, s, step)
			}
		}
	})
	// Script mode as it was before the preload: every step imports.
	b.Run("mode=script,prewarm=off", func(b *testing.B) {
		s := startKernel(b, benchSandbox(b), Options{Fresh: true})
		for b.Loop() {
			for _, step := range terptest.AnalysisSteps {
				benchRun(b, s, step)
			}
		}
	})
}

// BenchmarkFirstStep measures the first run only, after the model's latency,
// with and without prewarm imports.
func BenchmarkFirstStep(b *testing.B) {
	for _, bc := range []struct {
		name    string
		fresh   bool
		prewarm []string
	}{
		{"prewarm=on", false, DefaultPrewarm},
		{"prewarm=off", false, nil},
		// Script mode's preload, and script mode as it was before it.
		{"mode=script,prewarm=on", true, DefaultPrewarm},
		{"mode=script,prewarm=off", true, nil},
	} {
		b.Run(bc.name, func(b *testing.B) {
			sbx := benchSandbox(b)
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				k, err := Start(context.Background(), sbx, Options{Fresh: bc.fresh, Prewarm: bc.prewarm})
				if err != nil {
					b.Fatal(err)
				}
				time.Sleep(modelLatency)
				b.StartTimer()
				benchRun(b, k, firstStep)
				b.StopTimer()
				if err := k.Close(); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
			}
		})
	}
}
