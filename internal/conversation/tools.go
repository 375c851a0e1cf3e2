package conversation

import (
	"context"

	"github.com/terpdev/terp/internal/agent"
	"github.com/terpdev/terp/internal/llm"
)

// SetClientTools sets the function tools the caller runs itself (an API
// client's, through terp serve) for the following turns; see
// agent.Config.ClientTools. They are not stored with the conversation: they
// belong to the caller's requests, so a front-end that resumes it sets them
// again. A set the agent refuses (a tool named run_python) leaves the tools
// as they were. It waits for a running turn to end.
func (c *Conversation) SetClientTools(tools []llm.Tool) error {
	c.turn.Lock()
	defer c.turn.Unlock()
	return c.agent.SetClientTools(tools)
}

// PendingCalls returns the client tool calls that wait for Continue, also
// those of a resumed conversation that was stored waiting. It waits for a
// running turn to end.
func (c *Conversation) PendingCalls() []llm.ToolCall {
	c.turn.Lock()
	defer c.turn.Unlock()
	return c.agent.PendingCalls()
}

// Continue goes on with a turn that ended on client tool calls
// (agent.ClientToolCalls): it hands the caller's outputs, and question when
// it is not empty, to the agent (see agent.Agent.Continue), then downloads
// the files the code saved, exactly as Ask does. Outputs that do not match
// the pending calls are refused with an error wrapping
// agent.ErrUnmatchedOutputs, and the calls stay pending.
func (c *Conversation) Continue(ctx context.Context, outputs []agent.ClientOutput, question string, send func(agent.Event)) (Turn, error) {
	return c.runTurn(ctx, send, func(ctx context.Context, send func(agent.Event)) (agent.Result, error) {
		return c.agent.Continue(ctx, outputs, question, send)
	})
}

// runTurn is Ask's body with the agent's call given, so that every way a
// turn runs has one lifecycle: one turn at a time, what happened since the
// last turn heard first, the sandbox readied and let go, the files
// downloaded, the warnings gathered. Ask keeps its own copy (turn.go is
// being changed elsewhere) until it can become
//
//	return c.runTurn(ctx, send, func(ctx context.Context, send func(agent.Event)) (agent.Result, error) {
//		return c.agent.Ask(ctx, question, send)
//	})
//
// and ask goes; until then a change to one is a change to both.
func (c *Conversation) runTurn(ctx context.Context, send func(agent.Event), call func(context.Context, func(agent.Event)) (agent.Result, error)) (Turn, error) {
	if !c.turn.TryLock() {
		return Turn{Result: agent.Result{StopReason: agent.Errored}}, ErrBusy
	}
	defer c.turn.Unlock()
	if send == nil {
		send = func(agent.Event) {}
	}
	c.warnMu.Lock()
	c.send = send
	before := c.pending
	c.warnMu.Unlock()
	for _, w := range before {
		send(agent.Notice{Text: w})
	}
	defer func() {
		c.warnMu.Lock()
		c.send = nil
		c.warnMu.Unlock()
	}()

	turn, err := c.runAgent(ctx, send, call)
	turn.Warnings = append(append([]string(nil), turn.Result.Notices...), c.Warnings()...)
	return turn, err
}

// runAgent is ask with the agent's call given (see runTurn).
func (c *Conversation) runAgent(ctx context.Context, send func(agent.Event), call func(context.Context, func(agent.Event)) (agent.Result, error)) (Turn, error) {
	if err := c.begin(ctx); err != nil {
		return Turn{Result: agent.Result{StopReason: agent.Errored}}, err
	}
	res, err := call(ctx, send)
	c.end()
	turn := Turn{Result: res}
	if c.keepFiles {
		return turn, err
	}
	files, dlErr := c.download(ctx, res.Files)
	turn.Files = files
	if err == nil {
		err = dlErr
	} else if dlErr != nil {
		c.warn(dlErr.Error())
	}
	return turn, err
}
