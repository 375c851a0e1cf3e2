package kernel

import (
	"context"
	"fmt"
	"path"
	"time"

	"github.com/terpdev/terp/internal/sandbox"
)

// InternalDir is terp's own directory in /work, relative to it: the script
// being run and the worker's source live there. It is never listed to the
// model nor downloaded.
const InternalDir = ".terp"

// Script runs each piece of code as a new Python process, as the seed does
// with main.py: nothing but files survives between runs.
type Script struct {
	sbx       sandbox.Sandbox
	maxStdout int
	maxStderr int
}

var _ Runner = (*Script)(nil)

// NewScript returns a script-mode runner on sbx that keeps at most maxStdout
// and maxStderr bytes of each run's output.
func NewScript(sbx sandbox.Sandbox, maxStdout, maxStderr int) *Script {
	return &Script{sbx: sbx, maxStdout: maxStdout, maxStderr: maxStderr}
}

// pythonEnv is environment every Python terp starts in a sandbox gets.
// matplotlib's font cache lives in /work/.terp rather than the default
// /tmp, which a backend may give each command afresh: building the cache
// costs a second or more, and it should be paid once per sandbox.
var pythonEnv = []string{"MPLCONFIGDIR=" + path.Join(sandbox.WorkDir, InternalDir, "matplotlib")}

// scriptPath is where the code of a run is written before it runs.
var scriptPath = path.Join(sandbox.WorkDir, InternalDir, "main.py")

// Run writes code to /work/.terp/main.py and runs it with python3 in /work.
// The output comes at the end, in Result, even under WithOutput: the
// sandbox's Exec hands it over only then. Kernel mode, the default, is the
// one that shows a long run's output as it goes.
func (s *Script) Run(ctx context.Context, code string, timeout time.Duration) (Result, error) {
	if err := writeInternal(ctx, s.sbx, scriptPath, code); err != nil {
		return Result{}, fmt.Errorf("write the script: %w", err)
	}
	run, err := s.sbx.Exec(ctx, []string{"python3", path.Join(InternalDir, "main.py")}, sandbox.ExecOptions{
		Dir: sandbox.WorkDir,
		// Python puts the script's own directory first on sys.path; /work
		// must be there too, so code can import a module an earlier step
		// saved.
		Env:       append([]string{"PYTHONPATH=" + sandbox.WorkDir}, pythonEnv...),
		Timeout:   timeout,
		MaxStdout: s.maxStdout,
		MaxStderr: s.maxStderr,
	})
	if err != nil {
		// A run cut short by ctx still tells what it printed.
		return Result{ExitCode: run.ExitCode, Stdout: run.Stdout, Stderr: run.Stderr, Duration: run.Duration},
			fmt.Errorf("run the code: %w", err)
	}
	res := Result{ExitCode: run.ExitCode, Stdout: run.Stdout, Stderr: run.Stderr, TimedOut: run.TimedOut, Duration: run.Duration}
	if run.TimedOut {
		res.Notice = fmt.Sprintf("The run was stopped after %s, the per-command timeout; all its processes "+
			"were killed. Files in /work were kept.", timeout)
	}
	if run.Stopped != "" {
		res.Notice = run.Stopped + "."
	}
	return res, nil
}

// Close does nothing: a script leaves nothing running.
func (s *Script) Close() error { return nil }
