package kernel

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// The notices tell the model, in plain words, what happened to its session,
// because its next step depends on it: after a restart it must import and
// load its data again, and it should not retry code that blew the memory
// limit unchanged.

const (
	lostSession = "Python was restarted, so all variables and imports were lost. " + filesKept
	filesKept   = "Files in /work were kept."
)

// crashNotice explains a worker that went away during a run; lost is what
// that cost beyond the run (lostSession, or filesKept in fresh mode).
func crashNotice(code int, streamErr error, lost string) string {
	if errors.Is(streamErr, errProtocol) {
		return "The Python process corrupted terp's output channel (" + streamErr.Error() + "), so the run's " +
			"output may be incomplete and its end could not be read; the process was killed. " + lost
	}
	return "The Python process crashed during the run: " + describeExit(code) + ". " + lost
}

// killedNotice explains a fresh-mode run that a signal ended.
func killedNotice(sig int) string {
	return "The run's Python process ended abnormally: " + describeExit(128+sig) + ". " + filesKept
}

// stoppedNotice explains a fresh-mode run stopped for its timeout (cause
// nil) or because its context ended.
func stoppedNotice(timeout time.Duration, cause error) string {
	if cause != nil {
		return "The run was cancelled and stopped; all its processes were killed. " + filesKept
	}
	return fmt.Sprintf("The run was stopped after %s, the per-command timeout; all its processes "+
		"were killed. "+filesKept, timeout)
}

// diedBetweenRunsNotice explains why a run found a fresh session.
func diedBetweenRunsNotice(code int, streamErr error) string {
	why := describeExit(code)
	if errors.Is(streamErr, errProtocol) {
		why = "it corrupted terp's output channel"
	}
	return "The Python process had stopped since the last run (" + why + "), so this run started a new " +
		"session: all variables and imports from earlier runs were lost. Files in /work were kept."
}

// describeExit says how a process with this exit status ended, naming the
// signal for 128+signal, the shell's convention that the sandbox follows.
func describeExit(code int) string {
	if code > 128 && code < 128+65 {
		sig := unix.Signal(code - 128)
		name := unix.SignalName(sig)
		if name == "" {
			name = fmt.Sprintf("signal %d", code-128)
		}
		if sig == unix.SIGKILL {
			return "it was killed with SIGKILL: most likely it went over the sandbox's memory limit, unless the code killed it"
		}
		return fmt.Sprintf("it was killed by %s (%s)", name, sig)
	}
	if code < 0 {
		return "it was stopped"
	}
	return fmt.Sprintf("it exited with code %d", code)
}

// crashReport keeps the useful part of what the worker wrote on its own
// stderr during a run: faulthandler's report of a fatal signal, which names
// the line of the model's code that crashed. The worker's own frames and the
// list of loaded extension modules are noise to the model.
func crashReport(diag string) string {
	var keep []string
	for line := range strings.Lines(diag) {
		line = strings.TrimRight(line, "\n")
		if strings.Contains(line, workerPath) || strings.HasPrefix(line, "Extension modules:") ||
			strings.HasPrefix(line, "terp worker:") {
			continue
		}
		keep = append(keep, line)
	}
	return strings.TrimSpace(strings.Join(keep, "\n"))
}

// diagSuffix appends the worker's stderr to an error about its start-up.
func diagSuffix(diag string) string {
	if diag == "" {
		return ""
	}
	return ":\n" + diag
}

func joinNotices(a, b string) string {
	switch {
	case a == "":
		return b
	case b == "":
		return a
	}
	return a + " " + b
}
