package cli

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/terpdev/terp/internal/config"
	"github.com/terpdev/terp/internal/conversation"
	"github.com/terpdev/terp/internal/sanitize"
)

// Exit codes, part of the CLI contract (DESIGN.md).
const (
	exitOK          = 0
	exitError       = 1 // runtime: model API, sandbox
	exitUsage       = 2 // usage or configuration
	exitMaxSteps    = 3 // the step cap or a budget was reached without an answer
	exitInterrupted = 130
)

// usageError marks a mistake in how terp was called.
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

func usagef(format string, a ...any) error { return usageError{fmt.Errorf(format, a...)} }

// silentError carries an exit code for an outcome that has already been
// reported to the user (the step cap, an interrupt after the partial result
// was printed), so nothing more is printed.
type silentError struct{ code int }

func (e silentError) Error() string { return fmt.Sprintf("exit %d", e.code) }

// exitCode prints err for the user, when there is something to print, and
// maps it to the process exit code. It is the one place where errors become
// exit codes.
func exitCode(err error, stderr io.Writer) int {
	if err == nil {
		return exitOK
	}
	var silent silentError
	if errors.As(err, &silent) {
		return silent.code
	}
	if errors.Is(err, context.Canceled) {
		fmt.Fprintln(stderr, "interrupted")
		return exitInterrupted
	}
	fmt.Fprintln(stderr, "terp: "+sanitize.Terminal(err.Error()))
	if isUsage(err) {
		return exitUsage
	}
	return exitError
}

// isUsage reports whether err is the user's mistake in calling terp: a bad
// flag or configuration, or what the conversation service refused as input.
func isUsage(err error) bool {
	var cfgErr *config.Error
	var usage usageError
	var input *conversation.InputError
	return errors.As(err, &cfgErr) || errors.As(err, &usage) || errors.As(err, &input)
}
