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
// as they were. It waits for a running turn to end, or returns ctx's error
// first.
func (c *Conversation) SetClientTools(ctx context.Context, tools []llm.Tool) error {
	unlock, err := c.lockTurn(ctx, wait)
	if err != nil {
		return err
	}
	defer unlock()
	return c.agent.SetClientTools(tools)
}

// PendingCalls returns the client tool calls that wait for Continue, also
// those of a resumed conversation that was stored waiting. It waits for a
// running turn to end, or returns ctx's error first.
func (c *Conversation) PendingCalls(ctx context.Context) ([]llm.ToolCall, error) {
	unlock, err := c.lockTurn(ctx, wait)
	if err != nil {
		return nil, err
	}
	defer unlock()
	return c.agent.PendingCalls(), nil
}

// Continue goes on with a turn that ended on client tool calls
// (agent.ClientToolCalls): it hands the caller's outputs, and question when
// it is not empty, to the agent, then downloads the files the code saved,
// exactly as Ask does: Turn with outputs (see TurnRequest.Outputs). With no
// outputs it is Ask.
func (c *Conversation) Continue(ctx context.Context, outputs []agent.ClientOutput, question string, send func(agent.Event)) (Turn, error) {
	return c.Turn(ctx, TurnRequest{Question: question, Outputs: outputs, Send: send})
}
