// Package cli wires terp's commands: it parses flags with cobra, loads the
// configuration, builds the model client and the sandbox, runs the agent loop
// and turns its events into output. Each subcommand follows one pattern: an
// options struct, a constructor for the cobra command and a run function that
// holds the logic and can be tested without cobra.
package cli

import (
	"context"
	"os"
	"os/signal"
	"slices"
	"syscall"

	"github.com/spf13/cobra"
)

// Main runs terp with the process's arguments and returns its exit code.
func Main() int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	// The first Ctrl+C cancels the work and lets terp clean up and report;
	// restoring the default handler makes a second one end terp at once.
	go func() { <-ctx.Done(); stop() }()
	return Run(ctx, NewFactory(), os.Args[1:])
}

// Run executes one command line with the dependencies in f.
func Run(ctx context.Context, f *Factory, args []string) int {
	root := newCmdRoot(f, args)
	root.SetArgs(args)
	root.SetIn(f.IO.In)
	root.SetOut(f.IO.Out)
	root.SetErr(f.IO.ErrOut)
	err := root.ExecuteContext(ctx)
	return exitCode(err, f.IO.ErrOut)
}

// A subcommand is one of terp's commands: the names it is run by (its
// Use's first word and its aliases; TestSubcommandNames keeps them so) and
// its constructor.
type subcommand struct {
	names []string
	build func(*Factory) *cobra.Command
}

var subcommands = []subcommand{
	{[]string{"ask"}, func(f *Factory) *cobra.Command { return newCmdAsk(f, nil) }},
	{[]string{"chat"}, newCmdChat},
	{[]string{"sessions", "session"}, newCmdSessions},
	{[]string{"config"}, newCmdConfig},
	{[]string{"doctor"}, newCmdDoctor},
	{[]string{"batch"}, func(f *Factory) *cobra.Command { return newCmdBatch(f, nil) }},
	{[]string{"version"}, newCmdVersion},
	{[]string{"sandbox"}, newCmdSandbox},
	{[]string{"serve"}, func(f *Factory) *cobra.Command { return newCmdServe(f, nil) }},
	{[]string{"mcp"}, func(f *Factory) *cobra.Command { return newCmdMCP(f, nil) }},
}

// newCmdRoot builds terp's command tree for the command line args. When
// its first argument names a command, only that command is built: every
// command's flags cost time and memory to register (a quarter of a
// millisecond for all of them, docs/benchmarks.md "Start-up"), and a
// command line runs one. Anything else (no command, a flag first, help,
// completion, a typo) gets the whole tree, which lists and suggests the
// commands.
func newCmdRoot(f *Factory, args []string) *cobra.Command {
	root := &cobra.Command{
		Use:   "terp <command>",
		Short: "A code interpreter for open models",
		Long: `terp gives a model served through any OpenAI-compatible API (vLLM, Ollama,
llama.cpp, SGLang, gpuOS) one tool, run_python. The code runs in a sandbox on
this machine; its output goes back to the model until it answers. Your data
stays on infrastructure you control.`,
		Example: `  terp ask -f sales.csv "Which month grew the most? Plot revenue to chart.png."
  TERP_BASE_URL=http://localhost:11434/v1 TERP_MODEL=qwen3:8b terp ask "What is 2**100?"
  terp config init`,
		SilenceErrors: true,
		SilenceUsage:  true,
		// An unknown subcommand is a usage error (exit 2), not a failure.
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) > 0 {
				return usagef("unknown command %q for terp; run 'terp --help' to see the commands", args[0])
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
		// --version prints what `terp version` prints, as people try the
		// flag first.
		Version: versionString(),
	}
	root.SetVersionTemplate("{{.Version}}\n")
	root.Flags().BoolP("version", "v", false, "print terp's version, as terp version does")
	root.SetFlagErrorFunc(func(cmd *cobra.Command, err error) error {
		return usagef("%v; run '%s --help' for usage", err, cmd.CommandPath())
	})
	root.PersistentFlags().StringVar(&f.ConfigPath, "config", "", "configuration file (default $XDG_CONFIG_HOME/terp/config.toml)")
	if i := named(args); i >= 0 {
		root.AddCommand(subcommands[i].build(f))
	} else {
		for _, sub := range subcommands {
			root.AddCommand(sub.build(f))
		}
	}
	argsAreUsage(root)
	return root
}

// named returns the index in subcommands of the command that args run
// when their first argument is its name, or -1.
func named(args []string) int {
	if len(args) == 0 {
		return -1
	}
	return slices.IndexFunc(subcommands, func(sub subcommand) bool { return slices.Contains(sub.names, args[0]) })
}

// argsAreUsage makes a wrong number of arguments a usage error (exit 2),
// with a pointer to the command's help, for every command: cobra's own
// validators (cobra.ExactArgs and the like) return plain errors.
func argsAreUsage(cmd *cobra.Command) {
	if check := cmd.Args; check != nil {
		cmd.Args = func(c *cobra.Command, args []string) error {
			err := check(c, args)
			if err == nil || isUsage(err) {
				return err
			}
			return usagef("%v; run '%s --help' for usage", err, c.CommandPath())
		}
	}
	for _, sub := range cmd.Commands() {
		argsAreUsage(sub)
	}
}
