package conformance

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/terpdev/terp/internal/kernel"
	"github.com/terpdev/terp/internal/sandbox"
)

// Bench measures what a conversation pays on a backend, with the same code
// on every backend so their numbers compare (docs/benchmarks.md, section
// "Backends"). A backend calls it from its own tests:
//
//	func BenchmarkBackend(b *testing.B) {
//		conformance.Bench(b, func(b *testing.B) sandbox.Backend { return newBackend(b) })
//	}
//
// newBackend is called once per sub-benchmark run. The sub-benchmarks are:
//
//	Create            create a sandbox and close it (a conversation's start and end)
//	ExecPrint         Exec of python3 -c 'print(1)' (a command in a new process)
//	PrintStep         print(1) in script mode (a run forked by the script-mode worker)
//	PandasKernelStep  a pandas groupby cell in a warm kernel (one kernel-mode step)
//	PauseResume       pause a sandbox holding a file, resume it (the user went away)
func Bench(b *testing.B, newBackend func(b *testing.B) sandbox.Backend) {
	b.Run("Create", func(b *testing.B) { benchCreate(b, newBackend(b)) })
	b.Run("ExecPrint", func(b *testing.B) { benchExecPrint(b, newBackend(b)) })
	b.Run("PrintStep", func(b *testing.B) { benchPrintStep(b, newBackend(b)) })
	b.Run("PandasKernelStep", func(b *testing.B) { benchPandasKernelStep(b, newBackend(b)) })
	b.Run("PauseResume", func(b *testing.B) { benchPauseResume(b, newBackend(b)) })
}

// benchOptions are a conversation's sandbox options: the seed's lifetime,
// limits left to the backend's defaults.
var benchOptions = sandbox.Options{Timeout: 30 * time.Minute}

// benchSandbox creates a sandbox closed when the benchmark ends.
func benchSandbox(b *testing.B, backend sandbox.Backend) sandbox.Sandbox {
	b.Helper()
	sbx, err := backend.Create(b.Context(), benchOptions)
	if err != nil {
		b.Fatalf("Create: %v", err)
	}
	b.Cleanup(func() { _ = sbx.Close(context.Background()) })
	return sbx
}

func benchCreate(b *testing.B, backend sandbox.Backend) {
	ctx := b.Context()
	for b.Loop() {
		sbx, err := backend.Create(ctx, benchOptions)
		if err != nil {
			b.Fatalf("Create: %v", err)
		}
		if err := sbx.Close(ctx); err != nil {
			b.Fatalf("Close: %v", err)
		}
	}
}

func benchPrintStep(b *testing.B, backend sandbox.Backend) {
	k, err := kernel.Start(context.Background(), benchSandbox(b, backend), kernel.Options{Fresh: true})
	if err != nil {
		b.Fatalf("kernel.Start: %v", err)
	}
	b.Cleanup(func() { _ = k.Close() })
	for b.Loop() {
		res, err := k.Run(b.Context(), "print(1)", time.Minute)
		if err != nil || res.ExitCode != 0 || res.Stdout != "1\n" {
			b.Fatalf("Run = %+v, %v", res, err)
		}
	}
}

func benchExecPrint(b *testing.B, backend sandbox.Backend) {
	sbx := benchSandbox(b, backend)
	cmd := []string{"python3", "-c", "print(1)"}
	for b.Loop() {
		res, err := sbx.Exec(b.Context(), cmd, sandbox.ExecOptions{Timeout: time.Minute})
		if err != nil || res.ExitCode != 0 || res.Stdout != "1\n" {
			b.Fatalf("Exec = %+v, %v", res, err)
		}
	}
}

// benchCSV is a sales table of 10,000 rows over 12 regions, small enough
// to upload in no time and big enough that groupby does real work.
func benchCSV() string {
	var sb strings.Builder
	sb.WriteString("region,month,revenue\n")
	for i := range 10000 {
		fmt.Fprintf(&sb, "r%02d,2025-%02d,%d\n", i%12, i%12+1, (i*7919)%10007)
	}
	return sb.String()
}

// pandasStep is the measured cell: what a model writes once the data is
// loaded, a groupby and a print.
const pandasStep = `top = df.groupby("region")["revenue"].agg(["sum", "mean"]).sort_values("sum").tail(3)
print(top)`

func benchPandasKernelStep(b *testing.B, backend sandbox.Backend) {
	sbx := benchSandbox(b, backend)
	if err := sbx.WriteFile(b.Context(), "/work/sales.csv", strings.NewReader(benchCSV())); err != nil {
		b.Fatalf("WriteFile: %v", err)
	}
	k, err := kernel.Start(context.Background(), sbx, kernel.Options{Prewarm: kernel.DefaultPrewarm})
	if err != nil {
		b.Fatalf("kernel.Start: %v", err)
	}
	b.Cleanup(func() { _ = k.Close() })
	// Warm: the prewarm imports are done and the data is loaded, as after
	// a conversation's first step.
	res, err := k.Run(b.Context(), `import pandas as pd; df = pd.read_csv("/work/sales.csv"); len(df)`, 2*time.Minute)
	if err != nil || res.ExitCode != 0 || res.Stdout != "10000\n" {
		b.Fatalf("warm-up = %+v, %v", res, err)
	}
	for b.Loop() {
		res, err := k.Run(b.Context(), pandasStep, time.Minute)
		if err != nil || res.ExitCode != 0 || !strings.Contains(res.Stdout, "mean") {
			b.Fatalf("Run = %+v, %v", res, err)
		}
	}
}

func benchPauseResume(b *testing.B, backend sandbox.Backend) {
	ctx := b.Context()
	sbx, err := backend.Create(ctx, benchOptions)
	if err != nil {
		b.Fatalf("Create: %v", err)
	}
	b.Cleanup(func() { _ = sbx.Close(context.Background()) })
	if err := sbx.WriteFile(ctx, "/work/kept.txt", strings.NewReader("kept")); err != nil {
		b.Fatalf("WriteFile: %v", err)
	}
	for b.Loop() {
		id, err := sbx.Pause(ctx)
		if err != nil {
			b.Fatalf("Pause: %v", err)
		}
		if sbx, err = backend.Resume(ctx, id); err != nil {
			b.Fatalf("Resume: %v", err)
		}
	}
	// What the loop measured must still be a sandbox with its file.
	files, err := sbx.List(ctx, sandbox.WorkDir)
	if err != nil {
		b.Fatalf("List after resume: %v", err)
	}
	for _, f := range files {
		if f.Path == "kept.txt" {
			return
		}
	}
	b.Fatalf("kept.txt is gone after pause and resume: %+v", files)
}
