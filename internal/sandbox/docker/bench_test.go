package docker

import (
	"context"
	"testing"
	"time"

	"github.com/terpdev/terp/internal/kernel"
	"github.com/terpdev/terp/internal/sandbox"
)

// The Docker backend's costs, for docs/benchmarks.md: creating a sandbox
// (volume, container, start, /work prepared), a print(1) step through
// Exec, a pandas step in kernel mode, and pause plus resume.

// BenchmarkCreate times Create; Close is outside the measurement.
func BenchmarkCreate(b *testing.B) {
	be := newBackend(b)
	if err := be.Check(context.Background()); err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	for i := 0; i < b.N; i++ {
		sbx, err := be.Create(ctx, sandbox.Options{})
		if err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		if err := sbx.Close(ctx); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
}

func BenchmarkExecPrint1(b *testing.B) {
	s := create(b, newBackend(b), sandbox.Options{})
	for b.Loop() {
		res, err := s.Exec(context.Background(), []string{"python3", "-c", "print(1)"}, sandbox.ExecOptions{})
		if err != nil || res.Stdout != "1\n" {
			b.Fatalf("Exec = %+v, %v", res, err)
		}
	}
}

// BenchmarkKernelPandasStep times one pandas step in a ready kernel (numpy,
// pandas and matplotlib prewarmed, as by default).
func BenchmarkKernelPandasStep(b *testing.B) {
	s := create(b, newBackend(b), sandbox.Options{})
	k, err := kernel.Start(context.Background(), s, kernel.Options{Prewarm: kernel.DefaultPrewarm})
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = k.Close() }()
	step := "import pandas as pd\ndf = pd.DataFrame({'m': range(12), 'r': [100 + 7 * i for i in range(12)]})\nprint(df['r'].pct_change().mean().round(4))"
	if res, err := k.Run(context.Background(), step, time.Minute); err != nil || res.ExitCode != 0 {
		b.Fatalf("warm-up step: %+v %v", res, err)
	}
	for b.Loop() {
		res, err := k.Run(context.Background(), step, time.Minute)
		if err != nil || res.ExitCode != 0 || res.Stdout == "" {
			b.Fatalf("step: %+v %v", res, err)
		}
	}
}

// BenchmarkPauseResume times Pause followed by Resume of the same sandbox.
func BenchmarkPauseResume(b *testing.B) {
	be := newBackend(b)
	var sbx sandbox.Sandbox = create(b, be, sandbox.Options{})
	ctx := context.Background()
	for b.Loop() {
		id, err := sbx.Pause(ctx)
		if err != nil {
			b.Fatal(err)
		}
		if sbx, err = be.Resume(ctx, id); err != nil {
			b.Fatal(err)
		}
	}
	b.Cleanup(func() { _ = sbx.Close(ctx) })
}
