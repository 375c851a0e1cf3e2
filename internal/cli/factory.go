package cli

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"golang.org/x/term"

	"github.com/terpdev/terp/internal/agent"
	"github.com/terpdev/terp/internal/config"
	"github.com/terpdev/terp/internal/conversation"
	"github.com/terpdev/terp/internal/egress"
	"github.com/terpdev/terp/internal/llm"
	"github.com/terpdev/terp/internal/sandbox"
	"github.com/terpdev/terp/internal/sandbox/cpuos"
	"github.com/terpdev/terp/internal/sandbox/docker"
	"github.com/terpdev/terp/internal/sandbox/kubernetes"
	"github.com/terpdev/terp/internal/sandbox/local"
	"github.com/terpdev/terp/internal/store"
)

// IOStreams are the process's standard streams and what is known of them.
type IOStreams struct {
	In     io.Reader
	Out    io.Writer
	ErrOut io.Writer
	// StdinTTY and StderrTTY tell whether a person is at the other end:
	// progress is shown only then, and a question is never awaited from
	// an interactive stdin without a prompt. The chat UI needs both stdin
	// and stdout to be terminals (StdoutTTY); otherwise it is a plain REPL.
	StdinTTY  bool
	StdoutTTY bool
	StderrTTY bool
}

// Factory builds terp's dependencies once, lazily, in one place. Commands
// ask it for what they need; tests replace its fields.
type Factory struct {
	IO     IOStreams
	Getenv func(string) string
	// ConfigPath is the global --config flag.
	ConfigPath string

	// NewModel builds the model client from the configuration.
	NewModel func(*config.Config) agent.Completer
	// NewBackend builds the sandbox backend the configuration names.
	NewBackend func(*config.Config) (sandbox.Backend, error)
	// LocalServers, when set, replaces the usual local addresses where
	// terp looks for a model server when none is configured.
	LocalServers []localServer

	store store.Store
}

// NewFactory returns the factory for a real process.
func NewFactory() *Factory {
	f := &Factory{
		IO: IOStreams{
			In: os.Stdin, Out: os.Stdout, ErrOut: os.Stderr,
			StdinTTY:  term.IsTerminal(int(os.Stdin.Fd())),
			StdoutTTY: term.IsTerminal(int(os.Stdout.Fd())),
			StderrTTY: term.IsTerminal(int(os.Stderr.Fd())),
		},
		Getenv:   os.Getenv,
		NewModel: newModel,
	}
	f.NewBackend = func(cfg *config.Config) (sandbox.Backend, error) { return newBackend(cfg, f.Getenv, f.DataDir()) }
	return f
}

// Config loads the configuration in its documented order, applying the
// flags of the running command that the user set.
func (f *Factory) Config(flags *pflag.FlagSet) (*config.Config, error) {
	return config.Load(config.LoadOptions{Path: f.ConfigPath, Getenv: f.Getenv, Flags: flags})
}

// DataDir is where terp keeps conversations and sandboxes' work directories.
func (f *Factory) DataDir() string { return config.DataDir(f.Getenv) }

// Store opens the conversation store under DataDir, once.
func (f *Factory) Store() (store.Store, error) {
	if f.store == nil {
		if err := prepareDataDir(f.Getenv, f.DataDir()); err != nil {
			return nil, err
		}
		st, err := store.Open(f.DataDir())
		if err != nil {
			return nil, err
		}
		f.store = st
	}
	return f.store, nil
}

// Conversations is the conversation service on the store, with the
// factory's model client and sandbox backends.
func (f *Factory) Conversations() (*conversation.Service, error) {
	st, err := f.Store()
	if err != nil {
		return nil, err
	}
	return conversation.New(conversation.Deps{Store: st, NewBackend: f.NewBackend, NewModel: f.NewModel}), nil
}

func newModel(cfg *config.Config) agent.Completer { return newModelVia(cfg, nil) }

// newModelVia is the model client, whose requests go through hc (nil: the
// default), as terp serve's do, to be timed into its metrics.
func newModelVia(cfg *config.Config, hc *http.Client) agent.Completer {
	key, from := cfg.APIKey()
	return llm.New(llm.Config{
		BaseURL:      cfg.BaseURL,
		APIKey:       key,
		APIKeySource: from,
		APIKeyEnv:    cfg.APIKeyEnv,
		Stream:       cfg.Stream,
		HTTPClient:   hc,
	})
}

func newBackend(cfg *config.Config, getenv func(string) string, dataDir string) (sandbox.Backend, error) {
	switch cfg.Sandbox {
	case "local":
		root, err := sandboxDir(getenv, dataDir, "sandboxes")
		if err != nil {
			return nil, err
		}
		return local.New(local.Config{Root: root, HostUIDs: cfg.SandboxUIDs, EgressOptions: egressOptions(cfg)})
	case "cpuos":
		return cpuos.New(cpuos.Config{BaseURL: cfg.CpuosURL, APIKey: cfg.CpuosAPIKey(), APIKeyEnv: cfg.CpuosAPIKeyEnv, Template: cfg.CpuosTemplate})
	case "kubernetes":
		return kubernetes.New(kubernetes.Config{
			Namespace: cfg.KubernetesNamespace, WarmPool: cfg.KubernetesWarmPool,
			RouterURL: cfg.KubernetesRouterURL, Kubeconfig: cfg.KubernetesKubeconfig,
			APIKey: cfg.CpuosAPIKey(), APIKeyEnv: cfg.CpuosAPIKeyEnv,
		})
	case "docker":
		return docker.New(docker.Config{Image: cfg.DockerImage, EgressDir: filepath.Join(dataDir, "egress"), EgressOptions: egressOptions(cfg)})
	default:
		return nil, usagef("unknown sandbox %q; use local, docker, cpuos or kubernetes", cfg.Sandbox)
	}
}

// egressOptions configure the allowlist proxy of a backend on this machine.
func egressOptions(cfg *config.Config) []egress.Option {
	if r := cfg.TrustedRanges(); len(r) > 0 {
		return []egress.Option{egress.WithTrustedRanges(r)}
	}
	return nil
}

// sandboxDir is where the local backend keeps the sandboxes of one kind
// (name): in terp's data directory, except for root with no XDG_DATA_HOME,
// whose home the sandboxes' own uids cannot pass through.
func sandboxDir(getenv func(string) string, dataDir, name string) (string, error) {
	if os.Geteuid() == 0 && getenv("XDG_DATA_HOME") == "" {
		return filepath.Join(local.SystemDir, name), nil
	}
	return filepath.Join(dataDir, name), prepareDataDir(getenv, dataDir)
}

// prepareDataDir lets root's sandboxes reach their work directories below
// an XDG_DATA_HOME: terp creates the directories it needs searchable, not
// listable, and makes its own data directory so (what is private in it, the
// conversations, stays 0700). Other users' sandboxes run as themselves and
// need nothing.
func prepareDataDir(getenv func(string) string, dataDir string) error {
	if os.Geteuid() != 0 || getenv("XDG_DATA_HOME") == "" {
		return nil
	}
	if err := local.MkdirSearchable(dataDir); err != nil {
		return err
	}
	return os.Chmod(dataDir, 0o711)
}

// shorthands are the one-letter forms of configuration flags.
var shorthands = map[string]string{"out": "o"}

// textValue is a flag that keeps the text it was given. Configuration flags
// are all text here: package config parses them exactly as it parses the
// same value from a file or the environment, and names the flag when the
// value is bad.
type textValue struct{ s, typ string }

func (v *textValue) String() string     { return v.s }
func (v *textValue) Set(s string) error { v.s = s; return nil }
func (v *textValue) Type() string       { return v.typ }

// kindOf names the kind of value a default is, for the flag's help.
func kindOf(def string) string {
	if _, err := strconv.Atoi(def); err == nil {
		return "int"
	}
	if _, err := time.ParseDuration(def); err == nil {
		return "duration"
	}
	switch {
	case def == "true" || def == "false":
		return "bool"
	case strings.HasSuffix(def, "iB"):
		return "size"
	}
	return "string"
}

// addConfigFlags registers the flags that set configuration keys on cmd, so
// their names, help and shell completion come from the one table in package
// config: a new setting with a fixed set of values completes with no more
// code here.
func addConfigFlags(cmd *cobra.Command, names ...string) {
	fs := cmd.Flags()
	flags := configFlags()
	for _, name := range names {
		f, ok := flags[name]
		if !ok {
			panic(fmt.Sprintf("cli: no configuration key has the flag --%s", name))
		}
		fl := fs.VarPF(&textValue{typ: f.kind}, name, shorthands[name], f.usage)
		fl.DefValue = f.Default
		if f.Default == "true" || f.Default == "false" {
			fl.NoOptDefVal = "true"
		}
		if f.choices != nil {
			if err := cmd.RegisterFlagCompletionFunc(name, completeChoices(f.choices)); err != nil {
				panic(fmt.Sprintf("cli: completion for --%s: %v", name, err))
			}
		}
	}
}

// configFlag is what a configuration key's flag shows: its help, the kind
// of its value and the values it accepts.
type configFlag struct {
	config.Key
	usage, kind string
	choices     []string
}

// configFlags are the configuration keys that have a flag, by flag name.
// Every terp command registers its flags when it starts, most commands many
// of the same: each key's help and choices are worked out once per process.
var configFlags = sync.OnceValue(func() map[string]configFlag {
	flags := map[string]configFlag{}
	for _, k := range config.Keys() {
		if k.Flag == "" {
			continue
		}
		usage := k.Description
		if k.Env != "" {
			usage += " (env " + k.Env + ")"
		}
		flags[k.Flag] = configFlag{Key: k, usage: usage, kind: kindOf(k.Default), choices: k.Choices()}
	}
	return flags
})
