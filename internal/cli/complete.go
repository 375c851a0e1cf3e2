package cli

import (
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/terpdev/terp/internal/sanitize"
)

// completeChoices offers a configuration flag's fixed set of values, so
// `--network <TAB>` lists none, allowlist and full from the same table that
// parses them.
func completeChoices(choices []string) cobra.CompletionFunc {
	return func(_ *cobra.Command, _ []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
		var out []cobra.Completion
		for _, c := range choices {
			if strings.HasPrefix(c, toComplete) {
				out = append(out, c)
			}
		}
		return out, cobra.ShellCompDirectiveNoFileComp
	}
}

// completeConversations offers the stored conversations' ids, each with its
// title as the description shells show beside it, for --resume and the
// sessions commands that take an ID. The ids already on the command line
// are left out, since naming one twice does nothing; most bounds how many
// ids the command takes (0: any number). A store that cannot be read
// offers nothing rather than an error: completion is no place to report it.
func completeConversations(f *Factory, most int) cobra.CompletionFunc {
	return func(_ *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
		if most > 0 && len(args) >= most {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		st, err := f.Store()
		if err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		rows, err := sessionRows(st)
		if err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		var out []cobra.Completion
		for _, r := range rows {
			if !strings.HasPrefix(r.ID, strings.ToLower(toComplete)) || slices.Contains(args, r.ID) {
				continue
			}
			// A tab would end the description early in the shells' format.
			title := strings.Join(strings.Fields(sanitize.Terminal(r.Title)), " ")
			switch {
			case r.Error != "":
				title = "(damaged)"
			case title == "":
				title = "(no question yet)"
			}
			out = append(out, cobra.CompletionWithDesc(r.ID, title))
		}
		return out, cobra.ShellCompDirectiveNoFileComp
	}
}
