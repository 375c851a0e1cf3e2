package kernel

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/terpdev/terp/internal/sandbox"
)

// analysisSteps are five tool calls of a typical analysis of
// examples/sales.csv, each importing and loading what it needs, as a model
// writes them when it does not count on a persistent session (and as it
// must in script mode).
var analysisSteps = []string{
	`import pandas as pd
df = pd.read_csv("/work/sales.csv")
print(df.shape)
print(df.describe())`,

	`import pandas as pd
df = pd.read_csv("/work/sales.csv", parse_dates=["month"])
df["growth_pct"] = df["revenue"].pct_change() * 100
print(df.round(2).to_string(index=False))`,

	`import pandas as pd
import matplotlib.pyplot as plt
df = pd.read_csv("/work/sales.csv", parse_dates=["month"])
fig, ax = plt.subplots(figsize=(8, 4))
ax.plot(df["month"], df["revenue"], marker="o")
ax.set_title("Monthly revenue")
ax.set_ylabel("revenue")
fig.autofmt_xdate()
fig.tight_layout()
fig.savefig("/work/chart.png", dpi=100)
plt.close(fig)
print("saved /work/chart.png")`,

	`import pandas as pd
df = pd.read_csv("/work/sales.csv", parse_dates=["month"])
df["rolling_3"] = df["revenue"].rolling(3).mean()
print(df.tail(6).to_string(index=False))`,

	`import pandas as pd
df = pd.read_csv("/work/sales.csv", parse_dates=["month"])
growth = df["revenue"].pct_change()
best = df.loc[growth.idxmax(), "month"]
print(f"total revenue {df['revenue'].sum():,}")
print(f"mean monthly growth {growth.mean() * 100:.2f}%")
print(f"best month {best:%Y-%m} ({growth.max() * 100:.1f}%)")`,
}

// firstStep is a first tool call that needs pandas and matplotlib.
var firstStep = analysisSteps[2]

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
			for _, step := range analysisSteps {
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
			for _, step := range analysisSteps {
				benchRun(b, k, step)
			}
			b.StopTimer()
			if err := k.Close(); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("mode=script", func(b *testing.B) {
		s := startKernel(b, benchSandbox(b), Options{Fresh: true})
		for b.Loop() {
			for _, step := range analysisSteps {
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
		prewarm []string
	}{
		{"prewarm=on", DefaultPrewarm},
		{"prewarm=off", nil},
	} {
		b.Run(bc.name, func(b *testing.B) {
			sbx := benchSandbox(b)
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				k, err := Start(context.Background(), sbx, Options{Prewarm: bc.prewarm})
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
