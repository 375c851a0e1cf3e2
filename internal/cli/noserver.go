package cli

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/terpdev/terp/internal/config"
)

// A newcomer who runs `terp ask` (or `make example`) before configuring
// anything gets terp's default server, gpuOS, with no key: every request
// would come back 401, after the sandbox was made and the question stored.
// So before the first model call terp looks for a server on this machine,
// as doctor does, and uses it if it serves the model; otherwise it says that
// no server is configured and how to choose one.

// defaultLocalServers are the usual addresses of servers on this machine.
func defaultLocalServers() []localServer {
	var out []localServer
	for _, p := range config.LocalPorts() {
		out = append(out, localServer{Provider: p.Name, BaseURL: fmt.Sprintf("http://127.0.0.1:%d/v1", p.Port)})
	}
	return out
}

// noServerConfigured reports whether cfg points at terp's default server
// with no key for it: base_url and provider left at their defaults.
func noServerConfigured(cfg *config.Config) bool {
	key, _ := cfg.APIKey()
	return key == "" && cfg.Source("base_url").Kind == config.KindDefault &&
		cfg.Source("provider").Kind == config.KindDefault
}

// pickServer runs before a new conversation's first model call. With no
// server configured it switches cfg to a local server that serves the
// model, saying so, or fails with a usage error that names what to set.
func pickServer(ctx context.Context, f *Factory, cfg *config.Config) error {
	if !noServerConfigured(cfg) {
		return nil
	}
	found := findLocalServers(ctx, http.DefaultClient, f.localServers())
	for _, s := range found {
		if slices.Contains(s.Models, cfg.Model) {
			cfg.BaseURL = s.BaseURL
			fmt.Fprintf(f.IO.ErrOut, "terp: no model server is configured; using %s at %s, which serves %s "+
				"(set TERP_BASE_URL or --provider to choose)\n", s.Provider, s.BaseURL, cfg.Model)
			return nil
		}
	}
	msg := fmt.Sprintf("no model server is configured: terp's default, gpuOS (%s), needs an API key in %s or TERP_API_KEY, and none is set",
		cfg.BaseURL, cfg.APIKeyEnv)
	var hints []string
	for _, s := range found {
		if len(s.Models) > 0 {
			hints = append(hints, fmt.Sprintf("--provider %s --model %s (%s at %s serves %s)",
				s.Provider, s.Models[0], s.Provider, s.BaseURL, strings.Join(s.Models, ", ")))
		}
	}
	if len(hints) > 0 {
		msg += "; on this machine, try " + strings.Join(hints, ", or ")
	}
	return usagef("%s. Otherwise point terp at a server with TERP_BASE_URL or --provider "+
		"(ollama, vllm, llamacpp, lmstudio, sglang, openai); `terp doctor` checks the setup", msg)
}

// localServers are where pickServer and doctor look; tests replace them.
func (f *Factory) localServers() []localServer {
	if f.LocalServers != nil {
		return f.LocalServers
	}
	return defaultLocalServers()
}
