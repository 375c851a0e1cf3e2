package kernel

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// jupyterPython is the Python that runs the stock Jupyter kernel: Debian's,
// never the first python3 on PATH (often a pyenv one without Debian's
// libraries). A variable, so the skip can be tried with a Python that lacks
// Jupyter.
var jupyterPython = "/usr/bin/python3"

// jupyterNeeds are what jupyterPython must import for the benchmark; pandas
// is there because the groupby cell needs it.
var jupyterNeeds = []string{"jupyter_client", "ipykernel", "pandas"}

// jupyterDebs are the Debian packages that bring jupyterNeeds; the
// Makefile's TEST_DEBS has them (ipykernel depends on jupyter-client).
const jupyterDebs = "python3-jupyter-client python3-ipykernel python3-pandas"

// jupyterCells are the cells BenchmarkKernelVsJupyter times, after
// jupyterSetup ran on both sides. Each prints the same on both.
var jupyterCells = []struct{ name, code string }{
	{"print1", "print(1)"},
	{"assign", "x = 1"},
	{"groupby", "print(df.groupby('k')['v'].sum())"},
}

const jupyterSetup = `import pandas as pd
df = pd.DataFrame({"k": list("abcab") * 20, "v": range(100)})`

// BenchmarkKernelVsJupyter times the same cells in terp's kernel and in a
// stock ipykernel driven by jupyter_client, the nearest peer. Each iteration
// runs the cell once on each side, in alternating order, so the machine's
// noise falls on both alike; the metrics are terp-ms/cell, jupyter-ms/cell
// and their ratio jupyter/terp. ns/op, which would add the two and the pipe
// to the driver, is not reported.
//
// The comparison is unequal in terp's disfavour: terp's kernel runs inside
// bubblewrap with seccomp and resource limits, and its time is taken around
// Kernel.Run, the whole API; ipykernel runs unsandboxed, and its time is
// taken inside the driver, from sending the request to the kernel's idle
// status.
//
// Both kernels start once, without prewarm, and run jupyterSetup (which
// imports pandas) before the cells: b.Run calls each cell's function more
// than once (b.N=1 first, then per -count), and starting kernels there
// would only repeat the same start-up.
func BenchmarkKernelVsJupyter(b *testing.B) {
	jupyterUsable(b)
	k := startKernel(b, newSandbox(b), Options{})
	jup := startJupyter(b)
	if got, want := jup.run(b, jupyterSetup), runTerp(b, k, jupyterSetup); got.stdout != want {
		b.Fatalf("setup printed %q in Jupyter, %q in terp", got.stdout, want)
	}
	for _, cell := range jupyterCells {
		b.Run("cell="+cell.name, func(b *testing.B) {
			// One untimed run each, which also checks both print the same.
			want := runTerp(b, k, cell.code)
			if got := jup.run(b, cell.code).stdout; got != want {
				b.Fatalf("%s printed %q in Jupyter, %q in terp", cell.code, got, want)
			}
			var terp, jupyter time.Duration
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				for side := range 2 {
					if (i+side)%2 == 0 {
						start := time.Now()
						res, err := k.Run(context.Background(), cell.code, time.Minute)
						terp += time.Since(start)
						if err != nil || res.ExitCode != 0 || res.Stdout != want {
							b.Fatalf("terp: %v, exit %d, stdout %q, want %q, stderr:\n%s", err, res.ExitCode, res.Stdout, want, res.Stderr)
						}
					} else {
						got := jup.run(b, cell.code)
						jupyter += got.elapsed
						if got.stdout != want {
							b.Fatalf("Jupyter printed %q, terp %q", got.stdout, want)
						}
					}
				}
			}
			b.StopTimer()
			b.ReportMetric(0, "ns/op")
			b.ReportMetric(float64(terp)/1e6/float64(b.N), "terp-ms/cell")
			b.ReportMetric(float64(jupyter)/1e6/float64(b.N), "jupyter-ms/cell")
			b.ReportMetric(float64(jupyter)/float64(terp), "jupyter/terp")
		})
	}
}

// jupyterUsable skips the benchmark, loudly, when jupyterPython cannot start
// a python3 Jupyter kernel with pandas.
func jupyterUsable(b *testing.B) {
	b.Helper()
	probe := "import " + strings.Join(jupyterNeeds, ", ") + "\n" +
		"from jupyter_client.kernelspec import KernelSpecManager\n" +
		"KernelSpecManager().get_kernel_spec('python3')"
	out, err := exec.CommandContext(context.Background(), jupyterPython, "-c", probe).CombinedOutput()
	if err == nil {
		return
	}
	why := strings.TrimSpace(string(out))
	if i := strings.LastIndexByte(why, '\n'); i >= 0 {
		why = why[i+1:]
	}
	if why == "" {
		why = err.Error()
	}
	msg := fmt.Sprintf("JUPYTER BENCHMARK SKIPPED: %s cannot start a Jupyter kernel (%s); run `make test-deps`, or `sudo apt-get install %s`", jupyterPython, why, jupyterDebs)
	fmt.Fprintln(os.Stderr, msg)
	b.Skip(msg)
}

// runTerp runs an untimed cell in k and returns what it printed.
func runTerp(b *testing.B, k *Kernel, code string) string {
	b.Helper()
	res, err := k.Run(context.Background(), code, time.Minute)
	if err != nil || res.ExitCode != 0 {
		b.Fatalf("terp: Run(%q): %v, exit %d, stderr:\n%s", code, err, res.ExitCode, res.Stderr)
	}
	return res.Stdout
}

// jupyterDriver is testdata/jupyter_driver.py running a stock Jupyter kernel.
type jupyterDriver struct {
	in     io.Writer
	out    *bufio.Scanner
	stderr *bytes.Buffer
}

// jupyterRun is the driver's answer for one cell.
type jupyterRun struct {
	elapsed time.Duration
	stdout  string
}

// startJupyter starts the driver, which is stopped, and its kernel shut
// down, when the benchmark ends. Jupyter's connection files and IPython's
// profile go to temporary directories, and a PYTHONPATH meant for another
// Python is dropped.
func startJupyter(b *testing.B) *jupyterDriver {
	b.Helper()
	cmd := exec.CommandContext(context.Background(), jupyterPython, "testdata/jupyter_driver.py")
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "PYTHONPATH=") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	// PYDEVD_DISABLE_FILE_VALIDATION quiets the debugger's warning that
	// Debian's kernel spec (debugger: true) prints at every start.
	cmd.Env = append(cmd.Env, "JUPYTER_RUNTIME_DIR="+b.TempDir(), "IPYTHONDIR="+b.TempDir(), "PYDEVD_DISABLE_FILE_VALIDATION=1")
	d := &jupyterDriver{stderr: &bytes.Buffer{}}
	cmd.Stderr = d.stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	d.in = in
	d.out = bufio.NewScanner(out)
	d.out.Buffer(nil, 1<<20)
	b.Cleanup(func() {
		// EOF on stdin makes the driver shut its kernel down and exit.
		_ = in.Close()
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case err := <-done:
			if err != nil {
				b.Errorf("jupyter_driver.py: %v\n%s", err, d.stderr)
			}
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			<-done
			b.Errorf("jupyter_driver.py did not exit within 30s of EOF; killed\n%s", d.stderr)
		}
	})
	return d
}

// run runs code in the Jupyter kernel; a failure fails the benchmark.
func (d *jupyterDriver) run(b *testing.B, code string) jupyterRun {
	b.Helper()
	req, err := json.Marshal(map[string]string{"code": code})
	if err != nil {
		b.Fatal(err)
	}
	if _, err := d.in.Write(append(req, '\n')); err != nil {
		b.Fatalf("jupyter_driver.py: %v\n%s", err, d.stderr)
	}
	if !d.out.Scan() {
		b.Fatalf("jupyter_driver.py stopped answering: %v\n%s", d.out.Err(), d.stderr)
	}
	var answer struct {
		Seconds float64 `json:"seconds"`
		Stdout  string  `json:"stdout"`
		Error   string  `json:"error"`
	}
	if err := json.Unmarshal(d.out.Bytes(), &answer); err != nil {
		b.Fatalf("jupyter_driver.py answered %q: %v", d.out.Bytes(), err)
	}
	if answer.Error != "" {
		b.Fatalf("Jupyter: %s: %s (stdout %q)", code, answer.Error, answer.Stdout)
	}
	return jupyterRun{elapsed: time.Duration(answer.Seconds * float64(time.Second)), stdout: answer.Stdout}
}
