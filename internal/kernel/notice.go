package kernel

import (
	"fmt"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// The notices tell the model, in plain words, what happened to its session,
// because its next step depends on it: after a restart it must import and
// load its data again, and it should not retry code that blew the memory
// limit unchanged. They are worded here alone, from the facts of a Result,
// so that a protocol that forwards the facts and the model that reads the
// words are told the same.

// filesKept ends every notice of a run that lost something.
const filesKept = "Files in /work were kept."

// LostSession tells the model what a new Python session lost, after why: a
// sentence, without its period, saying how the session came to be new
// ("Python was restarted"). The kernel's notices use it, and so do those of
// the services above it that start Python anew (a conversation resumed
// without its kernel, a restart asked for), so that the model reads one
// wording whatever restarted it.
func LostSession(why string) string {
	return why + ", so all variables and imports were lost. " + filesKept
}

// notice words what the model must be told of res, a run whose timeout was
// timeout: that the session it ran in had died, and how the run ended, when
// that was more than the code's own doing. A run that ended by itself needs
// none: its output says it all.
func (k *Kernel) notice(res Result, timeout time.Duration) string {
	var parts []string
	if res.Died != nil {
		parts = append(parts, diedNotice(*res.Died))
	}
	switch res.Outcome {
	case OutcomeTimedOut, OutcomeInterrupted:
		parts = append(parts, k.stoppedNotice(res.Outcome, timeout))
	case OutcomeRestarted:
		if res.Restart != nil {
			parts = append(parts, k.restartNotice(*res.Restart, res.TimedOut, timeout))
		}
	}
	return strings.Join(parts, " ")
}

// diedNotice explains why a run found a fresh session.
func diedNotice(r Restart) string {
	if r.Reason == RestartStopped {
		return r.Detail + ". " + LostSession("Python was restarted")
	}
	why := describeExit(r.ExitCode)
	if r.Reason == RestartProtocol {
		why = "it corrupted terp's output channel"
	}
	return LostSession("The Python process had stopped since the last run (" + why + ") and was restarted")
}

// stoppedNotice explains a run that an interrupt stopped, with the session
// (or, in script mode, the worker) surviving.
func (k *Kernel) stoppedNotice(outcome Outcome, timeout time.Duration) string {
	switch {
	case k.opt.Fresh && outcome == OutcomeInterrupted:
		return "The run was cancelled and stopped; all its processes were killed. " + filesKept
	case k.opt.Fresh:
		return fmt.Sprintf("The run was stopped after %s, the per-command timeout; all its processes "+
			"were killed. "+filesKept, timeout)
	}
	return fmt.Sprintf("The run %s: it was interrupted (KeyboardInterrupt) and stopped. The Python "+
		"session survived, so variables and imports were kept, including any the code set before it "+
		"was stopped. "+filesKept, stopped(outcome == OutcomeTimedOut, timeout))
}

// restartNotice explains a session that ended during the run, and what that
// cost: the session in kernel mode, nothing but the run in script mode.
func (k *Kernel) restartNotice(r Restart, timedOut bool, timeout time.Duration) string {
	lost := filesKept
	if r.SessionLost {
		lost = LostSession("Python was restarted")
	}
	switch r.Reason {
	case RestartKilled:
		if k.opt.Fresh {
			outcome := OutcomeInterrupted
			if timedOut {
				outcome = OutcomeTimedOut
			}
			return k.stoppedNotice(outcome, timeout)
		}
		return fmt.Sprintf("The run %s and was killed, because it did not stop within %s of an interrupt. ",
			stopped(timedOut, timeout), k.opt.Grace) + lost
	case RestartProtocol:
		return "The Python process corrupted terp's output channel (" + r.Detail + "), so the run's " +
			"output may be incomplete and its end could not be read; the process was killed. " + lost
	case RestartStopped:
		return r.Detail + ". " + lost
	}
	if k.opt.Fresh {
		return "The run's Python process ended abnormally: " + describeExit(r.ExitCode) + ". " + lost
	}
	return "The Python process crashed during the run: " + describeExit(r.ExitCode) + ". " + lost
}

// stopped says what stopped a run: its timeout, or its context's end.
func stopped(timedOut bool, timeout time.Duration) string {
	if timedOut {
		return fmt.Sprintf("timed out after %s", timeout)
	}
	return "was cancelled"
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
