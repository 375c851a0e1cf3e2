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
	// A ctx made by WithOutput gets the output as it is printed.
	Run(ctx context.Context, code string, timeout time.Duration) (Result, error)
	// Close stops whatever the runner keeps running.
	Close() error
}

// Result is what one run left behind, as the model will be told.
type Result struct {
	ExitCode int
	// Stdout and Stderr are cut to their bounds, keeping head and tail.
	Stdout, Stderr string
	// Value is what the code's last expression showed (kernel mode): its
	// repr, or what display() shows of it (the source of a Markdown object,
	// the file a Figure was saved as), which Stdout ends with; "" when it
	// had none.
	Value    string
	TimedOut bool
	// Notice, when set, tells the model something about the run it must
	// know to go on: that it timed out, that the interpreter crashed, that
	// variables were lost and files kept.
	Notice   string
	Duration time.Duration
}
