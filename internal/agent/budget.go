package agent

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/terpdev/terp/internal/llm"
)

// Budgets cap one turn beside the step cap: the tokens it may use
// (Config.MaxTokens, as the server counts them, or as terp estimates them
// when the server reports no usage) and its wall time (Config.MaxTime). The
// token budget is checked before each model request, so a step that
// crosses it still runs its code; the time budget also interrupts the model
// request or the code that is running when it ends. Either way the turn
// ends like one at the step cap: with a stop reason and a message that
// says which budget ran out.

// errTimeBudget is the cause of a turn's context when its time ran out.
var errTimeBudget = errors.New("the time budget ran out")

type budget struct {
	parent, ctx context.Context
	cancel      context.CancelFunc
	maxTokens   int
	maxTime     time.Duration
	start       time.Time
	tokens      int
	// maxOutput bounds the tokens the model writes in the turn (the
	// client's TurnOptions.MaxOutputTokens), output counts them.
	maxOutput, output int
}

// startBudget starts the turn's budgets and returns the context the turn
// runs in: it ends when the time budget does.
func (a *Agent) startBudget(ctx context.Context) (context.Context, *budget) {
	b := &budget{parent: ctx, ctx: ctx, cancel: func() {}, maxTokens: a.cfg.MaxTokens, maxTime: a.cfg.MaxTime, start: time.Now(),
		maxOutput: a.turnOpts.MaxOutputTokens}
	if b.maxTime > 0 {
		b.ctx, b.cancel = context.WithTimeoutCause(ctx, b.maxTime, errTimeBudget)
	}
	return b.ctx, b
}

func (b *budget) stop() { b.cancel() }

// count adds a reply's tokens; sent is terp's estimate of the request, used
// when the server reports no usage.
func (b *budget) count(r llm.Response, sent int) {
	chars := len(r.Content) + len(r.Reasoning)
	for _, c := range r.ToolCalls {
		chars += len(c.Arguments)
	}
	n, out := r.Usage.TotalTokens, r.Usage.CompletionTokens
	if n == 0 {
		n = sent + chars/charsPerToken
	}
	if out == 0 {
		out = chars / charsPerToken
	}
	b.tokens += n
	b.output += out
}

// outputLeft is how many tokens the model may still write in the turn, 0
// when the turn has no output bound.
func (b *budget) outputLeft() int {
	if b == nil || b.maxOutput <= 0 {
		return 0
	}
	return max(b.maxOutput-b.output, 1)
}

// exceeded names the budget that has run out, or returns "".
func (b *budget) exceeded() StopReason {
	switch {
	case b.maxTime > 0 && (time.Since(b.start) >= b.maxTime || b.timeUp()):
		return TimeBudget
	case b.maxTokens > 0 && b.tokens >= b.maxTokens, b.maxOutput > 0 && b.output >= b.maxOutput:
		return TokenBudget
	}
	return ""
}

// timeUp reports whether the turn's context ended because its time ran out,
// rather than because the caller cancelled it.
func (b *budget) timeUp() bool {
	return b.parent.Err() == nil && errors.Is(context.Cause(b.ctx), errTimeBudget)
}

// stopOverBudget ends the turn at a budget.
func (a *Agent) stopOverBudget(res Result, reason StopReason, b *budget, send func(Event)) (Result, error) {
	res.StopReason = reason
	switch reason {
	case TokenBudget:
		if b.maxOutput > 0 && b.output >= b.maxOutput {
			res.Answer = fmt.Sprintf("Stopped after the model wrote %s tokens without a final answer: the request's output budget "+
				"(max_output_tokens %s) was reached. Raise it, or ask a narrower question.", commas(b.output), commas(b.maxOutput))
			break
		}
		res.Answer = fmt.Sprintf("Stopped after %s tokens without a final answer: the token budget (max_tokens %s) "+
			"was reached. Raise it with --max-tokens, or ask a narrower question.", commas(b.tokens), commas(b.maxTokens))
	default:
		res.Answer = fmt.Sprintf("Stopped after %s without a final answer: the time budget (max_time %s) ran out. "+
			"Raise it with --max-time, or ask a narrower question.", time.Since(b.start).Round(time.Second), b.maxTime)
	}
	send(Answer{Text: res.Answer})
	return res, a.checkpoint(true)
}
