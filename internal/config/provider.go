package config

import (
	"fmt"
	"strconv"
	"strings"
)

// Preset is what a provider name fills in: the usual base URL of that kind
// of server and the variable its API key is usually kept in (none for local
// servers, so a key meant for a cloud service is never sent to them).
type Preset struct {
	Name      string
	BaseURL   string
	APIKeyEnv string
	// Port is the local port the server listens on by default; 0 for a
	// remote service. terp doctor probes these when nothing is configured.
	Port int
}

// presets are the known providers.
var presets = []Preset{
	{Name: "gpuos", BaseURL: "https://gpuos.si/v1", APIKeyEnv: "GPUOS_API_KEY"},
	{Name: "ollama", BaseURL: "http://localhost:11434/v1", Port: 11434},
	{Name: "vllm", BaseURL: "http://localhost:8000/v1", Port: 8000},
	{Name: "llamacpp", BaseURL: "http://localhost:8080/v1", Port: 8080},
	{Name: "lmstudio", BaseURL: "http://localhost:1234/v1", Port: 1234},
	{Name: "sglang", BaseURL: "http://localhost:30000/v1", Port: 30000},
	{Name: "openai", BaseURL: "https://api.openai.com/v1", APIKeyEnv: "OPENAI_API_KEY"},
}

// Presets returns the known providers.
func Presets() []Preset { return append([]Preset(nil), presets...) }

// LookupPreset returns the preset called name.
func LookupPreset(name string) (Preset, bool) {
	for _, p := range presets {
		if p.Name == name {
			return p, true
		}
	}
	return Preset{}, false
}

func presetNames() []string {
	names := make([]string, len(presets))
	for i, p := range presets {
		names[i] = p.Name
	}
	return names
}

// providerValue holds a provider name, or "" for none.
type providerValue struct{ p *string }

func (v providerValue) set(s string) error {
	s = strings.ToLower(strings.TrimSpace(s))
	switch s {
	case "", "none":
		*v.p = ""
		return nil
	case "llama.cpp", "llama-cpp", "llama_cpp":
		s = "llamacpp"
	case "lm-studio", "lm_studio":
		s = "lmstudio"
	}
	if _, ok := LookupPreset(s); ok {
		*v.p = s
		return nil
	}
	e := &invalid{want: "one of " + strings.Join(presetNames(), ", "), got: strconv.Quote(s)}
	if m := closest(s, presetNames()); m != "" {
		e.hint = fmt.Sprintf("did you mean %q?", m)
	}
	return e
}

func (v providerValue) choices() []string { return presetNames() }

func (v providerValue) decode(x any) error {
	s, ok := x.(string)
	if !ok {
		return &invalid{want: "a string, one of " + strings.Join(presetNames(), ", "), got: describeTOML(x)}
	}
	return v.set(s)
}

func (v providerValue) String() string  { return *v.p }
func (v providerValue) literal() string { return strconv.Quote(*v.p) }

// presetKeys are the settings a provider fills in.
var presetKeys = []string{"base_url", "api_key_env"}

// applyPreset fills in the provider's base_url and api_key_env when the
// provider was set at layer. A preset acts as if its values were written
// next to the provider, at the same layer: a value written at that layer or
// a higher one wins over it, a value from a lower layer loses to it. So
// "provider = ollama" in the file sets the file's base URL unless the file
// names one, TERP_BASE_URL still wins over it, and --provider ollama wins
// over TERP_BASE_URL unless --base-url is given too.
func (c *Config) applyPreset(layer SourceKind) {
	src := c.sources["provider"]
	if src.Kind != layer || c.Provider == "" {
		return
	}
	p, ok := LookupPreset(c.Provider)
	if !ok {
		return
	}
	values := map[string]string{"base_url": p.BaseURL, "api_key_env": p.APIKeyEnv}
	for _, key := range presetKeys {
		if c.sources[key].Kind >= layer {
			continue
		}
		f, _ := lookup(key)
		if err := f.bind(c).set(values[key]); err != nil {
			panic(fmt.Sprintf("config: bad preset %s for %s: %v", p.Name, key, err))
		}
		via := src
		via.Preset = p.Name
		c.sources[key] = via
	}
}

// LocalPorts returns the presets of servers that run on this machine, whose
// ports terp doctor probes when no server is configured.
func LocalPorts() []Preset {
	var out []Preset
	for _, p := range presets {
		if p.Port != 0 {
			out = append(out, p)
		}
	}
	return out
}
