package cli

import (
	"github.com/terpdev/terp/internal/agent"
	"github.com/terpdev/terp/internal/config"
	"github.com/terpdev/terp/internal/llm"
)

// withModelSettings adds to an agent's configuration what depends on the
// model (its profile: tool dialect, context window, reasoning) and the
// turn's budgets.
func withModelSettings(cfg *config.Config, c agent.Config) agent.Config {
	m := cfg.ForModel(c.Model)
	c.Dialect = llm.Dialect(m.ToolDialect)
	c.ContextWindow = m.ContextWindow
	c.ProfileWindow = m.ProfileWindow
	c.SendReasoning = m.SendReasoning
	c.MaxTokens = cfg.MaxTokens
	c.MaxTime = cfg.MaxTime
	return c
}
