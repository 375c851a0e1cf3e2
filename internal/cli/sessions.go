package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/charmbracelet/x/ansi"
	"github.com/spf13/cobra"

	"github.com/terpdev/terp/internal/agent"
	"github.com/terpdev/terp/internal/config"
	"github.com/terpdev/terp/internal/llm"
	"github.com/terpdev/terp/internal/sandbox"
	"github.com/terpdev/terp/internal/sanitize"
	"github.com/terpdev/terp/internal/store"
)

func newCmdSessions(f *Factory) *cobra.Command {
	cmd := &cobra.Command{
		Use:     "sessions <command>",
		Aliases: []string{"session"},
		Short:   "List, show, export and remove stored conversations",
		Long: `Sessions manages stored conversations (the command keeps its old name).
Every conversation, from ask, chat or batch, is stored under
$XDG_DATA_HOME/terp/conversations with its messages, settings and the files it
uploaded, and its sandbox is paused between questions. Go on with one with
"terp ask --continue" (the latest) or "terp ask --resume ID". An ID can be
abbreviated to any unique prefix.`,
		Example: `  terp sessions ls
  terp sessions show 3f9c
  terp sessions export 3f9c -o report.html
  terp ask --resume 3f9c "And per quarter?"
  terp sessions rm 3f9c
  terp sessions prune --older-than 720h`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) > 0 {
				return usagef("unknown command %q for terp sessions; use ls, show, export, rm or prune", args[0])
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	cmd.AddCommand(newCmdSessionsLs(f), newCmdSessionsShow(f), newCmdSessionsExport(f), newCmdSessionsRm(f), newCmdSessionsPrune(f))
	return cmd
}

// sessionRow is one conversation in `sessions ls --json`.
type sessionRow struct {
	ID           string    `json:"id"`
	Title        string    `json:"title"`
	Model        string    `json:"model"`
	Origin       string    `json:"origin"`
	Turns        int       `json:"turns"`
	Steps        int       `json:"steps"`
	LastActivity time.Time `json:"last_activity"`
	Error        string    `json:"error,omitempty"`
}

func newCmdSessionsLs(f *Factory) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:     "ls",
		Aliases: []string{"list"},
		Short:   "List stored conversations, the most recent first",
		Example: `  terp sessions ls
  terp sessions ls --json | jq -r '.[0].id'`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			st, err := f.Store()
			if err != nil {
				return err
			}
			rows, err := sessionRows(st)
			if err != nil {
				return err
			}
			if asJSON {
				return writeJSON(f.IO.Out, rows)
			}
			return printSessions(f.IO.Out, rows, time.Now(), listWidth)
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the conversations as a JSON array")
	return cmd
}

// sessionRows lists the stored conversations, the most recent first.
func sessionRows(st store.Store) ([]sessionRow, error) {
	entries, err := st.List()
	if err != nil {
		return nil, err
	}
	rows := make([]sessionRow, 0, len(entries))
	for _, e := range entries {
		r := sessionRow{ID: e.ID}
		if e.Err != nil {
			r.Error = e.Err.Error()
		} else {
			c := e.Conversation
			r.Title, r.Model, r.Origin = c.Title, c.Settings.Model, c.Origin
			r.Turns, r.Steps, r.LastActivity = c.Turns, c.Steps, c.Updated
		}
		rows = append(rows, r)
	}
	return rows, nil
}

// listWidth is the width `terp sessions ls` fits its table in: the 80
// columns a terminal opens with, where a wrapped row would break the
// columns. --json has the whole titles.
const listWidth = 80

// columnGap is the space between two columns of the listing.
const columnGap = 2

// printSessions lists the conversations in a table at most width columns
// wide, measured in terminal cells (a CJK title takes two per character).
// Ids are kept whole, since they are what the user types next; titles, and
// then long model names, are cut with an ellipsis to make room.
func printSessions(w io.Writer, rows []sessionRow, now time.Time, width int) error {
	if len(rows) == 0 {
		_, err := fmt.Fprintln(w, `No conversations yet. Start one with: terp ask "..."`)
		return err
	}
	table := [][]string{{"ID", "TITLE", "MODEL", "STEPS", "LAST ACTIVITY"}}
	for _, r := range rows {
		if r.Error != "" {
			table = append(table, []string{r.ID, fmt.Sprintf("(damaged: run terp sessions show %s)", r.ID)})
			continue
		}
		title := strings.Join(strings.Fields(sanitize.Terminal(r.Title)), " ")
		if title == "" {
			title = "(no question yet)"
		}
		table = append(table, []string{r.ID, title, sanitize.Terminal(r.Model), strconv.Itoa(r.Steps), ago(now.Sub(r.LastActivity))})
	}
	cols := columnWidths(table, width)
	var b strings.Builder
	for _, row := range table {
		line := ""
		if len(row) == 2 { // a damaged record: its note spans the row
			line = padRight(row[0], cols[0]) + strings.Repeat(" ", columnGap) + ansi.Truncate(row[1], max(width-cols[0]-columnGap, 1), "…")
		} else {
			cells := make([]string, len(row))
			for i, c := range row {
				cells[i] = padRight(ansi.Truncate(c, cols[i], "…"), cols[i])
			}
			line = strings.Join(cells, strings.Repeat(" ", columnGap))
		}
		b.WriteString(strings.TrimRight(line, " ") + "\n")
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// columnWidths sizes the listing's columns to their widest cells, then
// takes what does not fit in width from the title, and from a long model
// name once the title is down to what the model name leaves it.
func columnWidths(table [][]string, width int) []int {
	cols := make([]int, len(table[0]))
	for _, row := range table {
		if len(row) != len(cols) {
			continue
		}
		for i, c := range row {
			cols[i] = max(cols[i], ansi.StringWidth(c))
		}
	}
	const title, model, minimum = 1, 2, 5
	room := width - (len(cols)-1)*columnGap
	for i, c := range cols {
		if i != title && i != model {
			room -= c
		}
	}
	if cols[title]+cols[model] > room {
		cols[model] = min(cols[model], max(room-cols[title], room/3, minimum))
		cols[title] = max(room-cols[model], minimum)
	}
	return cols
}

// padRight fills s with spaces to width terminal cells.
func padRight(s string, width int) string {
	return s + strings.Repeat(" ", max(width-ansi.StringWidth(s), 0))
}

// ago says how long ago something was, as a person would.
func ago(d time.Duration) string {
	switch {
	case d < time.Minute:
		return "just now"
	case d < time.Hour:
		return fmt.Sprintf("%dm ago", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh ago", int(d.Hours()))
	}
	return fmt.Sprintf("%dd ago", int(d.Hours()/24))
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// loadConversation finds a conversation by id or prefix.
func loadConversation(f *Factory, ref string) (store.Store, *store.Conversation, error) {
	st, err := f.Store()
	if err != nil {
		return nil, nil, err
	}
	id, err := st.Resolve(ref)
	if err != nil {
		return nil, nil, usageError{err}
	}
	c, err := st.Load(id)
	return st, c, err
}

func newCmdSessionsShow(f *Factory) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "show ID",
		Short: "Print a conversation's transcript",
		Example: `  terp sessions show 3f9c
  terp sessions show 3f9c --json | jq '.messages | length'`,
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: completeConversations(f, 1),
		RunE: func(cmd *cobra.Command, args []string) error {
			_, c, err := loadConversation(f, args[0])
			if err != nil {
				return err
			}
			if asJSON {
				return writeJSON(f.IO.Out, c)
			}
			return printTranscript(f.IO.Out, c)
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the whole stored record as JSON")
	return cmd
}

// printTranscript shows a conversation as it happened: the questions, the
// code, what it printed and the answers. The system prompt is left out.
func printTranscript(w io.Writer, c *store.Conversation) error {
	fmt.Fprintf(w, "conversation %s · %s · %d turns · %d steps · %d tokens · %s\n",
		c.ID, sanitize.Terminal(c.Settings.Model), c.Turns, c.Steps, c.Usage.TotalTokens, c.Updated.Local().Format("2006-01-02 15:04"))
	for _, in := range c.Inputs {
		fmt.Fprintf(w, "uploaded /work/%s from %s\n", sanitize.Terminal(in.Name), sanitize.Terminal(in.Path))
	}
	for _, m := range c.Messages {
		switch m.Role {
		case llm.RoleUser:
			fmt.Fprintf(w, "\n── you\n%s\n", sanitize.Terminal(m.Content))
		case llm.RoleAssistant:
			if strings.TrimSpace(m.Content) != "" {
				fmt.Fprintf(w, "\n── %s\n%s\n", sanitize.Terminal(c.Settings.Model), sanitize.Terminal(strings.TrimSpace(m.Content)))
			}
			for _, call := range m.ToolCalls {
				code := agent.CallCode(call)
				fmt.Fprintf(w, "\n── %s\n%s\n", sanitize.Terminal(call.Name), indent(sanitize.Terminal(strings.TrimRight(code, "\n")), "  "))
			}
		case llm.RoleTool:
			fmt.Fprintf(w, "── result\n%s\n", indent(sanitize.Terminal(toolSummary(m.Content)), "  │ "))
		}
	}
	for _, d := range c.Downloads {
		fmt.Fprintf(w, "\nsaved /work/%s → %s\n", sanitize.Terminal(d.Name), sanitize.Terminal(d.Path))
	}
	return nil
}

// toolSummary turns a stored tool message back into readable text.
func toolSummary(content string) string {
	r, ok := agent.ReadToolMessage(content)
	if !ok {
		return content
	}
	if r.Error != "" {
		return "error: " + r.Error
	}
	parts := []string{fmt.Sprintf("exit %d", r.ExitCode)}
	for _, s := range []string{r.Stdout, r.Stderr, r.Note} {
		if s = strings.TrimRight(s, "\n"); s != "" {
			parts = append(parts, s)
		}
	}
	if len(r.Files) > 0 {
		parts = append(parts, "files: "+strings.Join(r.Files, ", "))
	}
	return strings.Join(parts, "\n")
}

func newCmdSessionsRm(f *Factory) *cobra.Command {
	return &cobra.Command{
		Use:     "rm ID...",
		Aliases: []string{"remove"},
		Short:   "Remove conversations, their sandboxes and work directories",
		Long: `Remove deletes each conversation's record, the copies of its uploads and
its sandbox with everything in /work. Files already downloaded are kept.`,
		Example: `  terp sessions rm 3f9c
  terp sessions rm $(terp sessions ls --json | jq -r '.[].id')`,
		Args:              cobra.MinimumNArgs(1),
		ValidArgsFunction: completeConversations(f, 0),
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg, err := f.Config(nil)
			if err != nil {
				return err
			}
			var errs []error
			for _, ref := range args {
				if err := removeRef(cmd.Context(), f, cfg, ref); err != nil {
					errs = append(errs, err)
					continue
				}
			}
			return errors.Join(errs...)
		},
	}
}

// removeRef removes one conversation named by id or prefix. A damaged
// record is removed too: it can be neither resumed nor repaired.
func removeRef(ctx context.Context, f *Factory, cfg *config.Config, ref string) error {
	st, c, err := loadConversation(f, ref)
	var damaged *store.DamagedError
	switch {
	case errors.As(err, &damaged):
		if err := st.Remove(damaged.ID); err != nil {
			return err
		}
		fmt.Fprintf(f.IO.Out, "removed %s (damaged)\n", damaged.ID)
		return nil
	case err != nil:
		return err
	}
	svc, err := f.Conversations()
	if err != nil {
		return err
	}
	if err := svc.Remove(ctx, cfg, c); err != nil {
		return err
	}
	fmt.Fprintf(f.IO.Out, "removed %s %s\n", c.ID, sanitize.Terminal(c.Title))
	return nil
}

func newCmdSessionsPrune(f *Factory) *cobra.Command {
	var olderThan time.Duration
	cmd := &cobra.Command{
		Use:   "prune --older-than DUR",
		Short: "Remove conversations inactive for longer than DUR, and expired sandboxes",
		Long: `Prune removes every conversation whose last activity is older than DUR,
with its sandbox, and every sandbox a killed terp left running past its
lifetime. Conversations open in another terp process are skipped.`,
		Example: `  terp sessions prune --older-than 168h   # a week`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if olderThan <= 0 {
				return usagef("--older-than is required, e.g. --older-than 720h for 30 days")
			}
			cfg, err := f.Config(nil)
			if err != nil {
				return err
			}
			return prune(cmd.Context(), f, cfg, time.Now().Add(-olderThan))
		},
	}
	cmd.Flags().DurationVar(&olderThan, "older-than", 0, "remove conversations last active longer ago than `DUR` (e.g. 24h, 720h)")
	return cmd
}

func prune(ctx context.Context, f *Factory, cfg *config.Config, before time.Time) error {
	st, err := f.Store()
	if err != nil {
		return err
	}
	entries, err := st.List()
	if err != nil {
		return err
	}
	var errs []error
	removed := 0
	for _, e := range entries {
		if e.Err != nil || !e.Conversation.Updated.Before(before) {
			continue
		}
		if err := removeRef(ctx, f, cfg, e.ID); err != nil {
			if !errors.Is(err, store.ErrBusy) {
				errs = append(errs, err)
			}
			continue
		}
		removed++
	}
	backend, err := f.NewBackend(cfg)
	if err != nil {
		return errors.Join(append(errs, err)...)
	}
	if p, ok := backend.(sandbox.Pruner); ok {
		ids, err := p.Prune(ctx)
		if err != nil {
			errs = append(errs, err)
		}
		for _, id := range ids {
			fmt.Fprintf(f.IO.Out, "removed expired sandbox %s\n", id)
		}
	}
	fmt.Fprintf(f.IO.Out, "%d conversations removed\n", removed)
	return errors.Join(errs...)
}
