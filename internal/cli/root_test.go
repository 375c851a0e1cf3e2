package cli

import (
	"bytes"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

// TestSubcommandNames keeps the table newCmdRoot picks a command from by
// its name in step with the commands: each entry's names are the name and
// aliases of the command it builds, and the whole tree has no other.
func TestSubcommandNames(t *testing.T) {
	root := newCmdRoot(NewFactory(), nil)
	if got, want := len(root.Commands()), len(subcommands); got != want {
		t.Fatalf("the tree has %d commands, the table %d", got, want)
	}
	for _, sub := range subcommands {
		cmd := sub.build(NewFactory())
		if want := append([]string{cmd.Name()}, cmd.Aliases...); !slices.Equal(sub.names, want) {
			t.Errorf("the table runs %q by %q; its name and aliases are %q", cmd.Name(), sub.names, want)
		}
	}
}

// TestOnlyTheCommandRunIsBuilt checks that a command line naming a
// command builds that command alone, and that it is the same command as
// in the whole tree: its help, and that of each of its subcommands, is the
// same, word for word. Help, completion and a typo get the whole tree.
func TestOnlyTheCommandRunIsBuilt(t *testing.T) {
	help := func(root *cobra.Command, args ...string) string {
		var out bytes.Buffer
		root.SetOut(&out)
		root.SetErr(&out)
		root.SetArgs(append(args, "--help"))
		if err := root.Execute(); err != nil {
			t.Fatalf("terp %s --help: %v", strings.Join(args, " "), err)
		}
		return out.String()
	}
	for _, cmd := range newCmdRoot(NewFactory(), nil).Commands() {
		for _, name := range append([]string{cmd.Name()}, cmd.Aliases...) {
			lazy := newCmdRoot(NewFactory(), []string{name, "--help"})
			if got := len(lazy.Commands()); got != 1 {
				t.Errorf("terp %s built %d commands, want 1", name, got)
			}
			paths := [][]string{{name}}
			for _, sub := range cmd.Commands() {
				paths = append(paths, []string{name, sub.Name()})
			}
			for _, path := range paths {
				full := help(newCmdRoot(NewFactory(), nil), path...)
				if got := help(newCmdRoot(NewFactory(), path), path...); got != full {
					t.Errorf("terp %s --help differs when only %s is built:\n%s\nwhole tree:\n%s", strings.Join(path, " "), name, got, full)
				}
			}
		}
	}
	for _, args := range [][]string{nil, {"help"}, {"--config", "x", "ask"}, {"__complete", "as"}, {"completion", "bash"}, {"aks"}} {
		if got := len(newCmdRoot(NewFactory(), args).Commands()); got != len(subcommands) {
			t.Errorf("terp %q built %d commands, want them all (%d)", args, got, len(subcommands))
		}
	}
}
