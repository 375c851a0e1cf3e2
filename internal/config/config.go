// Package config loads terp's settings in one documented order and remembers where each
// value came from.
//
// Precedence, lowest first: built-in defaults, the config file (TOML, at
// $XDG_CONFIG_HOME/terp/config.toml or the path given with --config), TERP_* environment
// variables, command-line flags. Every setting is described once, in the table in
// keys.go, which drives parsing, "terp config show" and "terp config init" alike.
//
// The API key is resolved separately from the rest (see Config.APIKey): TERP_API_KEY,
// then api_key in the config file (accepted but discouraged), then the variable named by
// api_key_env (GPUOS_API_KEY by default). A key is optional; local servers need none.
package config

import (
	"errors"
	"fmt"
	"io/fs"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/terpdev/terp/internal/sandbox"
)

// Config is terp's resolved configuration. Its fields are plain values ready to use;
// the sizes are bytes and the limits on output are characters. A Config is not safe for
// concurrent Set calls.
type Config struct {
	BaseURL         string        // OpenAI-compatible endpoint, e.g. "https://gpuos.si/v1".
	Model           string        // Model name as the endpoint knows it.
	APIKeyEnv       string        // Name of the variable holding the key; may be empty.
	Sandbox         string        // "local", "docker", "cpuos" or "kubernetes".
	ExecMode        string        // "kernel" or "script"; see package kernel.
	Prewarm         []string      // Modules the worker imports at start, in both exec modes.
	MaxSteps        int           // Most model turns per question, at least 1.
	Timeout         time.Duration // Per run of code.
	InterruptGrace  time.Duration // How long interrupted code gets to stop before Python is restarted.
	SandboxTimeout  time.Duration // Per sandbox, across a conversation.
	IdlePause       time.Duration // Pause an idle chat's sandbox after this long.
	Stream          bool          // Stream the model's text as it arrives.
	MaxStdout       int           // Characters of stdout the model sees.
	MaxStderr       int           // Characters of stderr the model sees.
	MemoryLimit     int64         // Bytes.
	ProcessLimit    int           // Processes and threads at once.
	FileSizeLimit   int64         // Bytes, per file written in the sandbox.
	MaxWorkSize     int64         // Bytes /work may take on disk.
	MaxDownloadSize int64         // Bytes, per file downloaded from the sandbox.
	OutDir          string        // Empty: the caller picks a new directory per conversation.
	ImageProtocol   string        // How the chat draws images: "auto", "kitty", "iterm2", "sixel", "halfblock" or "none".
	Provider        string        // A preset for base_url and api_key_env ("ollama", "vllm", ...); "" for none.
	ToolDialect     string        // How tool calls travel: "auto", "native" or "text"; see ForModel.
	Prompt          string        // The wording of the prompt and the tool ("auto" or a family's); see ForModel.
	ContextWindow   int           // The model's context in tokens; 0 means detect it.
	MaxTokens       int           // Most tokens one question may use; 0 means no cap.
	MaxTime         time.Duration // Longest one question may take; 0 means no cap.

	// MaxDownloadTotal bounds the disk all downloads of one turn may take,
	// so that many files, or sparse ones, cannot fill the user's disk.
	MaxDownloadTotal int64

	Network      string   // What the code may reach: "none", "allowlist" or "full".
	NetworkAllow []string // Hosts the allowlist mode lets through.
	// NetworkTrustedRanges are address ranges (CIDR) the allowlist proxy may
	// reach although they are private or reserved.
	NetworkTrustedRanges []string

	CpuosURL, CpuosTemplate, CpuosAPIKeyEnv string // --sandbox cpuos: API root, template, variable holding the key.
	DockerImage                             string // --sandbox docker: the image every sandbox runs.
	// --sandbox kubernetes: where the claims go, the warm pool they take
	// from, the sandbox-router outside the cluster, the kubeconfig.
	KubernetesNamespace, KubernetesWarmPool, KubernetesRouterURL, KubernetesKubeconfig string
	SandboxUIDs                                                                        sandbox.UIDRange // --sandbox local as root: the host uids sandboxes run as, one each.

	apiKey     string    // api_key from the file, TERP_API_KEY or a flag; see APIKey
	profiles   []Profile // [models."PATTERN"] tables from the file
	path       string
	fileExists bool
	fileMode   fs.FileMode
	sources    map[string]Source
	getenv     func(string) string
}

// LoadOptions says where Load looks. The zero value loads the default file and the
// process environment.
type LoadOptions struct {
	// Path is the config file given with --config. Empty means the default path, where a
	// missing file is fine; a named file that is missing is an error.
	Path string
	// Getenv reads the environment; nil means os.Getenv. Tests pass a map's lookup.
	Getenv func(string) string
	// Flags, if set, are applied last: every changed flag whose name is a key's Flag.
	Flags *pflag.FlagSet
}

// Load builds the configuration from defaults, the config file, the environment and
// flags, in that order. It reports every problem it finds rather than only the first,
// each as an *Error, joined with errors.Join.
func Load(opts LoadOptions) (*Config, error) {
	c := newDefault(opts.Getenv)
	var errs []error

	explicit := opts.Path != ""
	c.path = opts.Path
	if explicit {
		c.path = expandHome(opts.Path, c.home())
	} else {
		c.path = DefaultPath(c.getenv)
	}
	if c.path != "" {
		errs = append(errs, c.loadFile(explicit)...)
	}
	c.applyPreset(KindFile)

	for _, f := range fields {
		if f.Env == "" {
			continue
		}
		if s := c.getenv(f.Env); s != "" {
			if err := c.Set(f.Name, s, FromEnv(f.Env)); err != nil {
				errs = append(errs, err)
			}
		}
	}
	c.applyPreset(KindEnv)

	if opts.Flags != nil {
		if err := c.ApplyFlags(opts.Flags); err != nil {
			errs = append(errs, err)
		}
	}

	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return c, nil
}

// Default returns the built-in defaults, reading the environment only to resolve the API
// key. It is meant for tests and for commands that must run without any configuration.
func Default() *Config {
	c := newDefault(nil)
	c.path = DefaultPath(nil)
	return c
}

func newDefault(getenv func(string) string) *Config {
	if getenv == nil {
		getenv = os.Getenv
	}
	c := &Config{sources: make(map[string]Source, len(fields)), getenv: getenv}
	for _, f := range fields {
		if err := f.bind(c).set(f.Default); err != nil {
			panic(fmt.Sprintf("config: bad default for %s: %v", f.Name, err))
		}
		c.sources[f.Name] = Source{Kind: KindDefault}
	}
	return c
}

// Set gives key the value written as text, the way environment variables and flags
// write it, and records src as its origin. It is how the CLI applies a flag it handles
// itself: c.Set("max_steps", "10", config.FromFlag("max-steps")). Errors are *Error.
func (c *Config) Set(key, text string, src Source) error {
	f, ok := lookup(key)
	if !ok {
		return unknownKey(src, key, false)
	}
	if err := f.bind(c).set(text); err != nil {
		return valueError(src, key, err)
	}
	c.sources[key] = src
	return nil
}

// ApplyFlags sets every key whose Flag names a flag the user changed in fs. Flags left at
// their defaults are skipped, so they never hide the file or the environment.
func (c *Config) ApplyFlags(fs *pflag.FlagSet) error {
	var errs []error
	fs.Visit(func(fl *pflag.Flag) {
		for _, f := range fields {
			if f.Flag != "" && f.Flag == fl.Name {
				if err := c.Set(f.Name, fl.Value.String(), FromFlag(fl.Name)); err != nil {
					errs = append(errs, err)
				}
			}
		}
	})
	c.applyPreset(KindFlag)
	return errors.Join(errs...)
}

// Source says where key's value came from; the zero Source (default) for an unknown key.
func (c *Config) Source(key string) Source { return c.sources[key] }

// Path is the config file Load read, or would have read had it existed.
func (c *Config) Path() string { return c.path }

// FileExists reports whether the config file at Path was found and read.
func (c *Config) FileExists() bool { return c.fileExists }

// CpuosAPIKey is the cpuos API key, read from the variable cpuos_api_key_env names.
func (c *Config) CpuosAPIKey() string {
	if c.getenv == nil || c.CpuosAPIKeyEnv == "" {
		return ""
	}
	return strings.TrimSpace(c.getenv(c.CpuosAPIKeyEnv))
}

// TrustedRanges returns network_trusted_ranges parsed (the values were
// checked when they were set).
func (c *Config) TrustedRanges() []netip.Prefix {
	var out []netip.Prefix
	for _, s := range c.NetworkTrustedRanges {
		if p, err := netip.ParsePrefix(s); err == nil {
			out = append(out, p.Masked())
		}
	}
	return out
}

// NetworkPolicy is the sandbox's egress policy the configuration asks for.
func (c *Config) NetworkPolicy() sandbox.Network {
	n := sandbox.Network{Mode: sandbox.NetworkMode(c.Network)}
	if n.Mode == sandbox.NetworkAllowlist {
		n.Allow = c.NetworkAllow
	}
	return n
}

// APIKey returns the key to send to the endpoint and where it came from, for messages:
// the variable's name ("TERP_API_KEY", "GPUOS_API_KEY"), or, for a key from the file or
// a flag, that Source's String. Both are empty when no key is set, which is fine for
// local servers.

func (c *Config) APIKey() (key, from string) {
	if k := strings.TrimSpace(c.apiKey); k != "" {
		src := c.sources["api_key"]
		if src.Kind == KindEnv {
			return k, src.Name
		}
		return k, src.String()
	}
	if c.APIKeyEnv != "" {
		if k := strings.TrimSpace(c.getenv(c.APIKeyEnv)); k != "" {
			return k, c.APIKeyEnv
		}
	}
	return "", ""
}

// APIKeyHint names the variables a user can set to give terp a key, for messages such
// as "the server wants an API key: set TERP_API_KEY or GPUOS_API_KEY".
func (c *Config) APIKeyHint() string {
	if c.APIKeyEnv == "" || c.APIKeyEnv == "TERP_API_KEY" {
		return "TERP_API_KEY"
	}
	return "TERP_API_KEY or " + c.APIKeyEnv
}

// Warnings lists settings that work but are unwise, for the CLI to print to stderr.
func (c *Config) Warnings() []string {
	var w []string
	if c.apiKey != "" && c.sources["api_key"].Kind == KindFile {
		msg := fmt.Sprintf("api_key is set in %s: keeping keys in files is discouraged; use %s instead",
			c.sources["api_key"].location(), c.APIKeyHint())
		if c.fileMode&0o077 != 0 {
			msg += fmt.Sprintf(" (the file is readable by other users: chmod 600 %s)", tildify(c.path))
		}
		w = append(w, msg)
	}
	return w
}

func (c *Config) home() string {
	if h := c.getenv("HOME"); h != "" {
		return h
	}
	h, _ := os.UserHomeDir()
	return h
}

// DefaultPath is where terp looks for its config file: $XDG_CONFIG_HOME/terp/config.toml,
// or ~/.config/terp/config.toml when XDG_CONFIG_HOME is unset (or, against the XDG spec,
// relative). It returns "" if no home directory can be found. A nil getenv means
// os.Getenv.
func DefaultPath(getenv func(string) string) string {
	return xdgPath(getenv, "XDG_CONFIG_HOME", ".config", "config.toml")
}

// DataDir is where terp keeps conversations and sandboxes' work directories:
// $XDG_DATA_HOME/terp, or ~/.local/share/terp. A nil getenv means os.Getenv.
func DataDir(getenv func(string) string) string {
	return xdgPath(getenv, "XDG_DATA_HOME", filepath.Join(".local", "share"), "")
}

func xdgPath(getenv func(string) string, variable, fallback, file string) string {
	if getenv == nil {
		getenv = os.Getenv
	}
	base := getenv(variable)
	if !filepath.IsAbs(base) {
		home := getenv("HOME")
		if home == "" {
			home, _ = os.UserHomeDir()
		}
		if home == "" {
			return ""
		}
		base = filepath.Join(home, fallback)
	}
	return filepath.Join(base, "terp", file)
}

func expandHome(path, home string) string {
	if home != "" && (path == "~" || strings.HasPrefix(path, "~/")) {
		return filepath.Join(home, path[1:])
	}
	return path
}
