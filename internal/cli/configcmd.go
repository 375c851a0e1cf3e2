package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/terpdev/terp/internal/agent"
	"github.com/terpdev/terp/internal/config"
	"github.com/terpdev/terp/internal/conversation"
)

func newCmdConfig(f *Factory) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "config <command>",
		Short: "Create and inspect terp's configuration file",
		Long: `terp reads its settings in this order, each layer overriding the one before:
built-in defaults, the config file ($XDG_CONFIG_HOME/terp/config.toml, or
--config), TERP_* environment variables, then command-line flags.`,
		Example: `  terp config init
  terp config show
  TERP_MODEL=llama3.1:8b terp config show --json`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) > 0 {
				return usagef("unknown command %q for terp config; use init, show or path", args[0])
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	cmd.AddCommand(newCmdConfigInit(f), newCmdConfigShow(f), newCmdConfigPath(f))
	return cmd
}

// configPath is the file the commands act on: --config, or the default.
func (f *Factory) configPath() string {
	if f.ConfigPath != "" {
		return f.ConfigPath
	}
	return config.DefaultPath(f.Getenv)
}

func newCmdConfigInit(f *Factory) *cobra.Command {
	var force bool
	cmd := &cobra.Command{
		Use:   "init",
		Short: "Write a commented config file with every setting and its default",
		Example: `  terp config init
  terp config init --force --config ./terp.toml`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			path := f.configPath()
			if err := config.InitFile(path, force); err != nil {
				return err
			}
			fmt.Fprintf(f.IO.Out, "wrote %s\n", path)
			return nil
		},
	}
	cmd.Flags().BoolVar(&force, "force", false, "overwrite an existing file")
	return cmd
}

func newCmdConfigShow(f *Factory) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "show",
		Short: "Print every setting, its value and where it came from",
		Long: `Show prints every setting with its value and its source: default, the file
and line, an environment variable, or a flag. The API key is never printed in
full. Then it prints what a new conversation sends the model before the first
question: the system prompt and the description of run_python, in the wording
of the model's family (the prompt setting, or the model's profile).`,
		Example: `  terp config show
  terp config show --json | jq '.keys[] | select(.key=="model")'`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := f.Config(nil)
			if err != nil {
				return err
			}
			prompt := promptOf(cfg)
			if asJSON {
				enc := json.NewEncoder(f.IO.Out)
				enc.SetIndent("", "  ")
				return enc.Encode(struct {
					config.Report
					Prompt promptReport `json:"prompt"`
				}{cfg.Report(), prompt})
			}
			if err := cfg.Show(f.IO.Out); err != nil {
				return err
			}
			return prompt.write(f.IO.Out, cfg.Model)
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the settings as JSON")
	return cmd
}

func newCmdConfigPath(f *Factory) *cobra.Command {
	return &cobra.Command{
		Use:     "path",
		Short:   "Print the path of the config file terp reads",
		Example: "  $EDITOR \"$(terp config path)\"",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			_, err := fmt.Fprintln(f.IO.Out, f.configPath())
			return err
		},
	}
}

// promptReport is what a new conversation tells the model before the first
// question, as config show prints it.
type promptReport struct {
	// Wording names the family whose words the prompt uses.
	Wording string `json:"wording"`
	System  string `json:"system"`
	Tool    string `json:"tool"`
}

func promptOf(cfg *config.Config) promptReport {
	ac := conversation.AgentConfig(cfg)
	system, tool := agent.PromptText(ac, nil)
	return promptReport{Wording: string(ac.Prompt), System: system, Tool: tool}
}

// write prints the prompt with each text indented under its name.
func (p promptReport) write(w io.Writer, model string) error {
	indent := func(s string) string { return "    " + strings.ReplaceAll(s, "\n", "\n    ") }
	_, err := fmt.Fprintf(w, "\nprompt for %s (wording %s):\n  system prompt:\n%s\n  %s tool:\n%s\n",
		model, p.Wording, indent(p.System), agent.ToolName, indent(p.Tool))
	return err
}
