package memory_test

import (
	"io"
	"strings"
	"testing"
	"time"

	"github.com/terpdev/terp/internal/kernel"
	"github.com/terpdev/terp/internal/sandbox"
	"github.com/terpdev/terp/internal/sandbox/memory"
)

// startScript starts a script-mode kernel on sbx, closed when the test ends.
func startScript(t *testing.T, sbx sandbox.Sandbox) *kernel.Kernel {
	t.Helper()
	k, err := kernel.Start(t.Context(), sbx, kernel.Options{Fresh: true, MaxStdout: 1000, MaxStderr: 1000})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k.Close() })
	return k
}

// The stand-in is what the script runner runs on a memory sandbox: its
// code reads what was uploaded, writes what the next step reads, and its
// output and exit code come back as the model would be told them.
func TestPythonStandInWithScriptRunner(t *testing.T) {
	_, sbx := newSandbox(t, map[string]memory.Program{"python3": memory.PythonStandIn}, sandbox.Options{})
	csv := "month,revenue\n2024-01,100\n"
	if err := sbx.WriteFile(t.Context(), "/work/sales.csv", strings.NewReader(csv)); err != nil {
		t.Fatal(err)
	}
	s := startScript(t, sbx)

	res, err := s.Run(t.Context(), "# read the upload\ncat sales.csv\nwrite out/summary.txt 1 month\nprint saved\n", time.Minute)
	if err != nil || res.ExitCode != 0 || res.Stdout != csv+"saved\n" || res.Stderr != "" {
		t.Fatalf("first step: %+v, %v", res, err)
	}
	res, err = s.Run(t.Context(), "cat out/summary.txt\nstderr a warning\nexit 3\nprint never", time.Minute)
	if err != nil || res.ExitCode != 3 || res.Stdout != "1 month" || res.Stderr != "a warning\n" {
		t.Fatalf("second step: %+v, %v", res, err)
	}

	rc, err := sbx.ReadFile(t.Context(), "/work/out/summary.txt")
	if err != nil {
		t.Fatal(err)
	}
	if data, _ := io.ReadAll(rc); string(data) != "1 month" {
		t.Errorf("the file the code wrote reads %q", data)
	}
}

func TestPythonStandInTimeout(t *testing.T) {
	_, sbx := newSandbox(t, map[string]memory.Program{"python3": memory.PythonStandIn}, sandbox.Options{})
	res, err := startScript(t, sbx).Run(t.Context(), "print started\nsleep 1h\nprint never", 10*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if !res.TimedOut || res.ExitCode != sandbox.ExitTimedOut || !strings.Contains(res.Notice, "timeout") || strings.Contains(res.Stdout, "never") {
		t.Errorf("a step past its timeout: %+v", res)
	}
}

// Real Python reaching the stand-in fails before any of it runs, saying
// where.
func TestPythonStandInRefusesPython(t *testing.T) {
	_, sbx := newSandbox(t, map[string]memory.Program{"python3": memory.PythonStandIn}, sandbox.Options{})
	res, err := startScript(t, sbx).Run(t.Context(), "print hello\nimport pandas as pd\n", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if res.ExitCode != 1 || res.Stdout != "" || !strings.Contains(res.Stderr, "line 2") || !strings.Contains(res.Stderr, "SyntaxError") {
		t.Errorf("Python code: exit %d stdout %q stderr %q", res.ExitCode, res.Stdout, res.Stderr)
	}
	// Reported as the worker reports Python's, with what stderr shows.
	if e := res.Exception; res.Outcome != kernel.OutcomeError || e == nil || e.Name != "SyntaxError" ||
		!strings.HasSuffix(e.Value, "(main.py, line 2)") || strings.Join(e.Traceback, "\n")+"\n" != res.Stderr {
		t.Errorf("outcome %q, exception %+v, stderr %q", res.Outcome, e, res.Stderr)
	}
}

func TestPythonStandInCommandLines(t *testing.T) {
	_, sbx := newSandbox(t, map[string]memory.Program{"python3": memory.PythonStandIn}, sandbox.Options{})
	for _, tc := range []struct {
		name  string
		cmd   []string
		stdin string
		want  string
	}{
		{"-c", []string{"python3", "-I", "-c", "print from -c"}, "", "from -c\n"},
		{"stdin", []string{"python3"}, "print from stdin", "from stdin\n"},
	} {
		res, err := sbx.Exec(t.Context(), tc.cmd, sandbox.ExecOptions{Stdin: strings.NewReader(tc.stdin)})
		if err != nil || res.ExitCode != 0 || res.Stdout != tc.want {
			t.Errorf("%s: %+v, %v", tc.name, res, err)
		}
	}
	res, err := sbx.Exec(t.Context(), []string{"python3", "missing.py"}, sandbox.ExecOptions{})
	if err != nil || res.ExitCode != 2 || !strings.Contains(res.Stderr, "can't open file") {
		t.Errorf("a missing script: %+v, %v", res, err)
	}
}
