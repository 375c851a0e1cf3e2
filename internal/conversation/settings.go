package conversation

import (
	"context"
	"fmt"
	"slices"

	"github.com/terpdev/terp/internal/agent"
	"github.com/terpdev/terp/internal/config"
	"github.com/terpdev/terp/internal/kernel"
	"github.com/terpdev/terp/internal/llm"
	"github.com/terpdev/terp/internal/sandbox"
	"github.com/terpdev/terp/internal/store"
)

// keepStored applies a stored conversation's settings to cfg, the
// conversation's own copy, one rule for each: its model, endpoint and exec
// mode hold unless the user chose others for this command through the
// environment or a flag (a config file or the defaults, which may have
// changed since, never switch a conversation), and the record then keeps the
// new choice; its network policy, which its sandbox was made with, always
// holds: a different one asked for now is refused with the warning returned.
func keepStored(cfg *config.Config, stored store.Settings) (warning string) {
	explicit := func(key string) bool {
		k := cfg.Source(key).Kind
		return k == config.KindEnv || k == config.KindFlag
	}
	for _, kept := range []struct {
		key    string
		stored string
		value  *string
	}{
		{"model", stored.Model, &cfg.Model},
		{"base_url", stored.BaseURL, &cfg.BaseURL},
		{"exec_mode", stored.ExecMode, &cfg.ExecMode},
	} {
		if kept.stored != "" && !explicit(kept.key) {
			*kept.value = kept.stored
		}
	}
	was := sandbox.Network{Mode: sandbox.NetworkMode(stored.Network), Allow: stored.NetworkAllow}
	if was.Off() {
		// Also a conversation stored before network modes existed: it had none.
		was = sandbox.Network{Mode: sandbox.NetworkNone}
	}
	asked := cfg.NetworkPolicy()
	changed := asked.Mode != was.Mode || !slices.Equal(asked.Allow, was.Allow)
	if changed && (explicit("network") || explicit("network_allow")) {
		warning = fmt.Sprintf("this conversation's sandbox keeps network %s; start a new conversation for another", was)
	}
	cfg.Network, cfg.NetworkAllow = string(was.Mode), slices.Clone(was.Allow)
	return warning
}

// AgentConfig is the loop's configuration for a conversation with cfg:
// its model, steps, timeout and sandbox, what depends on the model (its
// profile: tool dialect, prompt, context window, reasoning) and the turn's
// budgets. A conversation adds its checkpoint; `terp doctor` and `terp config
// show` use it to ask and show what a conversation would.
func AgentConfig(cfg *config.Config) agent.Config {
	m := cfg.ForModel(cfg.Model)
	return agent.Config{
		Model:         cfg.Model,
		MaxSteps:      cfg.MaxSteps,
		Timeout:       cfg.Timeout,
		ExecMode:      kernel.Mode(cfg.ExecMode),
		Network:       cfg.NetworkPolicy(),
		Dialect:       llm.Dialect(m.ToolDialect),
		Prompt:        agent.Prompt(m.Prompt),
		ContextWindow: m.ContextWindow,
		ProfileWindow: m.ProfileWindow,
		SendReasoning: m.SendReasoning,
		MaxTokens:     cfg.MaxTokens,
		MaxTime:       cfg.MaxTime,
	}
}

// newRunner starts what runs the model's code in sbx, as exec_mode says;
// valueApart keeps a cell's trailing value out of its output.
func newRunner(ctx context.Context, sbx sandbox.Sandbox, cfg *config.Config, valueApart bool) (kernel.Runner, error) {
	// The kernel lives as long as the conversation, not as the caller's
	// context: cancelling stops the step that is running (Run's context),
	// and Close stops the kernel.
	k, err := kernel.Start(context.WithoutCancel(ctx), sbx, kernelOptions(cfg, valueApart))
	if err != nil {
		return nil, fmt.Errorf("start the Python kernel: %w", err)
	}
	return k, nil
}

// kernelOptions are what a conversation with cfg starts its Python with.
func kernelOptions(cfg *config.Config, valueApart bool) kernel.Options {
	return kernel.Options{Prewarm: cfg.Prewarm, MaxStdout: cfg.MaxStdout, MaxStderr: cfg.MaxStderr, ValueApart: valueApart,
		Grace: cfg.InterruptGrace, Fresh: kernel.Mode(cfg.ExecMode) == kernel.ModeScript}
}
