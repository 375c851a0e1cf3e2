package agent_test

import (
	"context"
	"testing"
	"time"

	"github.com/terpdev/terp/internal/agent"
	"github.com/terpdev/terp/internal/llm"
)

// instantModel answers at once, without HTTP: one call of print(1), then an
// answer. It isolates what the loop itself costs per step.
type instantModel struct{ calls int }

func (m *instantModel) Complete(context.Context, llm.Request, func(llm.Delta)) (llm.Response, error) {
	m.calls++
	if m.calls%2 == 1 {
		return llm.Response{ToolCalls: []llm.ToolCall{{ID: "call_1", Name: agent.ToolName, Arguments: `{"code":"print(1)"}`}}}, nil
	}
	return llm.Response{Content: "1"}, nil
}

// BenchmarkStep measures one turn with one tool step (print(1) in the real
// sandbox) against a zero-latency model. Compare with
// BenchmarkBwrapByHand in internal/sandbox/local: the difference is what
// terp adds per step (docs/benchmarks.md).
func BenchmarkStep(b *testing.B) {
	sbx := newSandbox(b)
	a := agent.New(&instantModel{}, sbx, newScript(b, sbx), agent.Config{Model: "m", MaxSteps: 2, Timeout: time.Minute})
	ctx := context.Background()
	for b.Loop() {
		res, err := a.Ask(ctx, "print 1", nil)
		if err != nil || res.Answer != "1" {
			b.Fatalf("Ask = %+v, %v", res, err)
		}
	}
}
