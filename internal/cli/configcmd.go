package cli

import (
	"encoding/json"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/terpdev/terp/internal/config"
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
full.`,
		Example: `  terp config show
  terp config show --json | jq '.keys[] | select(.key=="model")'`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := f.Config(nil)
			if err != nil {
				return err
			}
			if asJSON {
				enc := json.NewEncoder(f.IO.Out)
				enc.SetIndent("", "  ")
				return enc.Encode(cfg.Report())
			}
			return cfg.Show(f.IO.Out)
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
