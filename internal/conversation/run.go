package conversation

import (
	"context"
	"errors"

	"github.com/terpdev/terp/internal/agent"
)

// RunResult is the outcome of code a client ran itself (Run).
type RunResult struct {
	agent.CodeRun
	// Warnings are what the user should know that did not stop the run
	// (the sandbox renewed or replaced since the last run, a save that
	// failed), as Turn.Warnings are.
	Warnings []string
}

// Run runs code in the conversation's sandbox without the model, exactly
// as a model's run_python step runs (see agent.Agent.Exec): the front-end's
// client is the one writing the code, as an MCP client is. The files the
// code saved stay in the sandbox, named in the result, whatever
// Options.KeepFiles says: the client reads them with ReadFile. Runs and
// turns go one at a time (ErrBusy otherwise), and a paused sandbox is woken
// first; what the model would have been told of a wake (see Agent.Note)
// comes back in Warnings. The run is not added to the history the model
// reads, but the record notes that code ran, so the conversation is kept
// on Close.
func (c *Conversation) Run(ctx context.Context, code string) (RunResult, error) {
	unlock, err := c.lockTurn(ctx, refuse)
	if err != nil {
		return RunResult{}, err
	}
	defer unlock()
	if err := c.begin(ctx); err != nil {
		return RunResult{Warnings: c.Warnings()}, err
	}
	// What a wake told the model (Python restarted, the sandbox replaced)
	// is for the client that writes the code: no question will carry it.
	notes := c.agent.TakeNotes()
	res, err := c.agent.Exec(ctx, code, nil)
	c.end()
	return RunResult{CodeRun: res, Warnings: append(notes, c.Warnings()...)}, err
}

// Restart gives the conversation a fresh Python (a new kernel: variables
// and imports gone), keeping the sandbox and its files. It waits for a
// running turn or run to end, or returns ctx's error first.
func (c *Conversation) Restart(ctx context.Context) error {
	unlock, err := c.lockTurn(ctx, wait)
	if err != nil {
		return err
	}
	defer unlock()
	if err := c.begin(ctx); err != nil {
		return err
	}
	defer c.end()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.runner != nil {
		_ = c.runner.Close()
	}
	if err := c.startRunner(ctx); err != nil {
		return errors.Join(errors.New("restart Python"), err)
	}
	return c.agent.Rebind(ctx, c.sbx, c.runner)
}
