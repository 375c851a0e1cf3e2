package agent

import (
	"context"
	"errors"

	"github.com/terpdev/terp/internal/llm"
)

// ProbeQuestion is what Probe asks: a product no model knows by heart, so a
// model that can call the tool does.
const ProbeQuestion = "What is 1234 * 5678? Compute it with the run_python tool."

// ProbeResult is what a model did when asked to compute with the tool.
type ProbeResult struct {
	// Format is how the call came: "native" for the server's own tool
	// calls, else the text format terp recovered it from (llm.FormatHermes,
	// llm.FormatPython, ...); "" when no call came.
	Format string
	// Dialect is the dialect the call came in: text when the server
	// refused tools, or tool_dialect says so.
	Dialect llm.Dialect
	// Code is the code the model asked to run.
	Code string
	// Answer is what the model replied when it did not call the tool.
	Answer string
	// Refused is the server's refusal of tools, when it refused them.
	Refused *llm.Error
	// TextFormat is set when the model called no tool as asked but did
	// write a call once told how to in text mode: tool_dialect = "text"
	// would work.
	TextFormat string
}

// Probe asks the model one question that needs the tool, the way the loop
// would with cfg (its model, dialect, exec mode and prompt), and reports
// whether and how a call came back. The code is not run. Errors other than a
// refusal of tools are returned.
func Probe(ctx context.Context, model Completer, cfg Config) (ProbeResult, error) {
	dialect := cfg.Dialect
	if dialect == "" {
		dialect = llm.DialectAuto
	}
	ask := func(d llm.Dialect) (llm.Response, error) {
		a := &Agent{cfg: cfg, dialect: d}
		a.history = []llm.Message{
			{Role: llm.RoleSystem, Content: wordingOf(cfg.Prompt).systemPrompt(nil)},
			{Role: llm.RoleUser, Content: ProbeQuestion},
		}
		return model.Complete(ctx, a.request(), nil)
	}
	res := ProbeResult{Dialect: dialect}
	reply, err := ask(dialect)
	var e *llm.Error
	if errors.As(err, &e) && e.Kind == llm.KindToolsUnsupported {
		res.Refused = e
		if dialect != llm.DialectAuto {
			return res, nil
		}
		res.Dialect = llm.DialectText
		reply, err = ask(llm.DialectText)
	}
	if err != nil {
		return res, err
	}
	if len(reply.ToolCalls) == 0 {
		res.Answer = reply.Content
		if res.Dialect != llm.DialectText {
			if text, err := ask(llm.DialectText); err == nil && len(text.ToolCalls) > 0 {
				res.TextFormat = text.CallFormat
			}
		}
		return res, nil
	}
	call := reply.ToolCalls[0]
	res.Format = reply.CallFormat
	if res.Format == "" {
		res.Format = "native"
	}
	res.Code, _ = parseCall(call)
	return res, nil
}
