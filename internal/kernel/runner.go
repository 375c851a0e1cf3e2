// Package kernel runs the model's Python code in a sandbox, in one of two
// modes, both served by a Python worker (worker.py) in the sandbox. Script
// mode is the seed's: each run is a new Python program (Options.Fresh; the
// worker forks it from a clean interpreter), so only files survive between
// runs. Kernel mode runs the code in the worker itself, like the Jupyter
// kernels behind other code interpreters: variables, imports and DataFrames
// survive, the heavy imports are paid once, and matplotlib figures are saved
// as PNG files. Both run code written in a Jupyter notebook's habits, as the
// models were trained to write it: IPython's `!cmd`, `%magic` and `%%magic`
// syntax, display() and get_ipython() (notebook.py), at no cost to plain
// code. Both sit on the sandbox interface alone, so every backend can host them.
package kernel

import (
	"context"
	"time"
)

// Mode names how code runs. The values are configuration values.
type Mode string

// The execution modes.
const (
	ModeKernel Mode = "kernel"
	ModeScript Mode = "script"
)

// Runner runs one piece of Python code to completion.
type Runner interface {
	// Run runs code with a time limit. A failure of the code (an exception,
	// a timeout, a crash of the interpreter) is reported in Result; the
	// error is for the sandbox failing or ctx ending. When ctx ends while
	// the code runs, the run is stopped, the error wraps ctx's, and Result
	// still holds what the code printed until then and how long it ran.
	// A ctx made by WithOutput or WithAllOutput gets the output as it is
	// printed.
	Run(ctx context.Context, code string, timeout time.Duration) (Result, error)
	// Close stops whatever the runner keeps running.
	Close() error
}

// Result is what one run left behind: what the model is told (the output,
// ExitCode, TimedOut and Notice, which is worded from the rest) and the
// facts beneath it, typed, for a protocol that forwards them in its own
// messages (Jupyter's execute_result, display_data and error).
type Result struct {
	ExitCode int
	// Stdout and Stderr are cut to their bounds, keeping head and tail.
	Stdout, Stderr string
	// Value is what the code's last expression showed (kernel mode): its
	// repr, or what display() shows of it (the source of a Markdown object,
	// the file a Figure was saved as), which Stdout ends with; "" when it
	// had none.
	Value string
	// Cell is the run's execution count, as a notebook numbers its cells.
	// In kernel mode it is the worker's cell number, which its tracebacks
	// name (<cell 3>) and which starts again at 1 in a new session, as
	// Jupyter's does after a restart; in script mode, where every run is a
	// program of its own, it is the run's number in the Kernel's life. 0
	// when the code never reached Python (Run's error says why).
	Cell int
	// Figures are the image files the run saved, relative to /work, in the
	// order saved: its matplotlib figures (kernel mode: by plt.show() or
	// left open at its end) and the images display() showed.
	Figures []string
	// Outcome is how the run ended; "" when it never began.
	Outcome Outcome
	// Exception is the exception that ended the code, if one did: with
	// OutcomeError, and with OutcomeInterrupted or OutcomeTimedOut when the
	// interrupt raised KeyboardInterrupt in the code (in kernel mode it
	// always does; in script mode the run's process is killed, unless the
	// interrupt reached it first).
	Exception *Exception
	// Restart says how the session ended during the run, with
	// OutcomeRestarted.
	Restart *Restart
	// Died says the session had ended since the last run, so that this
	// run began in a new one (kernel mode): whatever the run's Outcome,
	// what earlier runs left in memory is gone.
	Died     *Restart
	TimedOut bool
	// Notice, when set, tells the model something about the run it must
	// know to go on: that it timed out, that the interpreter crashed, that
	// variables were lost and files kept. It is worded from the facts
	// above, in one place (notice.go).
	Notice   string
	Duration time.Duration
}

// Outcome is how a run ended.
type Outcome string

// The outcomes.
const (
	// OutcomeOK: the code ran to its end (or exited with status 0).
	OutcomeOK Outcome = "ok"
	// OutcomeError: an exception ended the code (Result.Exception), or it
	// exited with a nonzero status without one (os._exit in script mode).
	OutcomeError Outcome = "error"
	// OutcomeInterrupted: ctx ended while the code ran, and an interrupt
	// (SIGINT) stopped it; the session survived.
	OutcomeInterrupted Outcome = "interrupted"
	// OutcomeTimedOut: the run's timeout passed, and an interrupt stopped
	// the code: in kernel mode a KeyboardInterrupt, keeping the session; in
	// script mode by killing the run's processes.
	OutcomeTimedOut Outcome = "timed_out"
	// OutcomeRestarted: the session ended during the run (Result.Restart
	// says how), and the next run gets a new one.
	OutcomeRestarted Outcome = "restarted"
)

// Exception is a Python exception that ended a run, as Jupyter's error
// message carries one.
type Exception struct {
	// Name is its type's name: "ZeroDivisionError".
	Name string `json:"name"`
	// Value is str() of it: "division by zero".
	Value string `json:"value"`
	// Traceback is what the run's stderr shows of it, one line an element,
	// without the newlines: the traceback without terp's frames, down to
	// the "ZeroDivisionError: division by zero" line, chained exceptions
	// first; for a SyntaxError just the formatted error lines. It is empty
	// for the notebook layer's UsageError (a magic misused), which prints no
	// traceback, and for a SystemExit with a nonzero status.
	Traceback []string `json:"traceback"`
}

// Restart is the end of a Python session: why it ended, and what that cost.
type Restart struct {
	Reason RestartReason
	// ExitCode is the process's exit status as the sandbox reported it:
	// 128+Signal for a signal, as a shell gives it.
	ExitCode int
	// Signal is the signal that ended the process, 0 if it exited. SIGKILL
	// is most likely the out-of-memory killer's.
	Signal int
	// Detail is the broken channel's error (RestartProtocol), or the
	// sandbox's account of the limit the process broke (RestartStopped).
	Detail string
	// SessionLost says the session's variables and imports were lost, as
	// in kernel mode; in script mode only the run was, since nothing
	// survives a run there anyway.
	SessionLost bool
}

// RestartReason is why a Python session ended.
type RestartReason string

// The reasons.
const (
	// RestartKilled: the run's timeout passed or its ctx ended, and an
	// interrupt did not stop the code within Options.Grace, so the worker
	// was killed.
	RestartKilled RestartReason = "killed"
	// RestartCrashed: the process ended by itself: killed by a signal (a
	// segmentation fault, the out-of-memory killer's SIGKILL) or exiting
	// (the code's os._exit). In script mode that is the run's own process,
	// whose Signal and ExitCode these are.
	RestartCrashed RestartReason = "crashed"
	// RestartProtocol: the process broke terp's channel to the worker (see
	// protocol.go), so it was killed.
	RestartProtocol RestartReason = "protocol"
	// RestartStopped: the sandbox stopped it for breaking one of its
	// limits (a /work grown past max_work_size).
	RestartStopped RestartReason = "stopped"
)
