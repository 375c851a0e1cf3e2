package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/lipgloss"
	"github.com/muesli/termenv"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/terpdev/terp/internal/config"
	"github.com/terpdev/terp/internal/conversation"
	"github.com/terpdev/terp/internal/store"
	"github.com/terpdev/terp/internal/tui"
)

// chatOptions holds everything `terp chat` needs, parsed from its flags.
type chatOptions struct {
	f     *Factory
	flags *pflag.FlagSet
	files []string
	// resume names a stored conversation to begin with; cont is
	// --continue, the latest one.
	resume string
	cont   bool
}

func newCmdChat(f *Factory) *cobra.Command {
	opts := &chatOptions{f: f}
	cmd := &cobra.Command{
		Use:   "chat [flags]",
		Short: "Talk with the model about your data in an interactive terminal UI",
		Long: `Chat opens a conversation with the model in a terminal UI: each question's
steps show the code the model runs, its output and the charts it saves, and the
answer is drawn as Markdown. The sandbox and Python's variables last until you
quit or type /new, so later questions can build on earlier ones.

When stdin or stdout is not a terminal, chat reads one question per line from
stdin instead, prints each answer on stdout and progress on stderr; the slash
commands work there too.

Type /help in the chat for its commands and keys.`,
		Example: `  terp chat -f examples/sales.csv
  terp chat --model qwen3:8b --base-url http://localhost:11434/v1
  terp chat --continue
  printf 'What is 2**100?\nAnd its square root?\n' | terp chat`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) > 0 {
				return usagef("terp chat takes no question on the command line (ask it in the chat, or use terp ask)")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, _ []string) error {
			opts.flags = cmd.Flags()
			return runChat(cmd.Context(), opts)
		},
	}
	fl := cmd.Flags()
	fl.StringArrayVarP(&opts.files, "file", "f", nil, "upload `PATH` to /work/<basename> before the first question (repeatable)")
	fl.StringVar(&opts.resume, "resume", "", "go on with the stored conversation `ID` (any unique prefix; see terp sessions ls)")
	fl.BoolVarP(&opts.cont, "continue", "c", false, "go on with the latest conversation")
	_ = cmd.RegisterFlagCompletionFunc("resume", completeConversations(f, 0))
	addConfigFlags(cmd, slices.Concat(runFlags, []string{"image-protocol", "idle-pause"})...)
	return cmd
}

func runChat(ctx context.Context, opts *chatOptions) error {
	f := opts.f
	cfg, err := f.Config(opts.flags)
	if err != nil {
		return err
	}
	if err := checkRun(ctx, f, cfg, opts.files, opts.cont, opts.resume); err != nil {
		return err
	}
	if !f.IO.StdinTTY || !f.IO.StdoutTTY {
		return runREPL(ctx, opts, cfg)
	}
	return runTUI(ctx, opts, cfg)
}

// runTUI runs the chat's terminal UI until the user quits.
func runTUI(ctx context.Context, opts *chatOptions, cfg *config.Config) error {
	f := opts.f
	svc, err := f.Conversations()
	if err != nil {
		return err
	}
	life, cancel := context.WithCancel(ctx)
	defer cancel()
	convs := &chatConversations{svc: svc, cfg: cfg, life: life,
		resuming: opts.cont || opts.resume != "", ref: opts.resume}
	// What the conversations warn of between turns reaches the transcript
	// with the next turn (see conversation.Turn.Warnings); what is left when
	// the UI is gone, closing's problems included, is printed after it.
	defer func() { printWarnings(f.IO.ErrOut, convs.close()) }()
	conv, err := convs.open()
	if err != nil {
		return err
	}
	var uploaded []string
	for _, p := range opts.files {
		dest, err := conv.Upload(life, p)
		if err != nil {
			return err
		}
		uploaded = append(uploaded, dest)
	}

	out := lipgloss.NewRenderer(f.IO.Out, termenv.WithEnvironment(environ{f.Getenv}))
	model := tui.New(tui.Options{
		Context:      life,
		Conversation: conv,
		New:          func(context.Context) (tui.Conversation, error) { return convs.open() },
		Resume: func(_ context.Context, ref string) (tui.Conversation, error) {
			return convs.resume(ref)
		},
		Conversations: func(_ context.Context, width int) (string, error) { return listConversations(svc.Store(), width) },
		Export: func(ctx context.Context, arg string) (string, error) {
			return chatExport(ctx, svc.Store(), convs.now(), arg)
		},
		Renderer: out,
		Protocol: tui.DetectProtocol(cfg.ImageProtocol, f.Getenv),
		Uploaded: uploaded,
	})
	_, err = tea.NewProgram(model,
		tea.WithContext(life),
		tea.WithInput(f.IO.In),
		tea.WithOutput(f.IO.Out),
		tea.WithAltScreen(),
	).Run()
	cancel()
	last := convs.currentConversation()
	printWarnings(f.IO.ErrOut, convs.close())
	resumeHint(f.IO.ErrOut, last)
	switch {
	case errors.Is(err, tea.ErrInterrupted), ctx.Err() != nil:
		return context.Canceled
	case err != nil:
		return fmt.Errorf("the chat UI failed: %w", err)
	}
	return nil
}

// environ hands the factory's environment to termenv, so that NO_COLOR
// and TERM are read where every other setting is.
type environ struct{ getenv func(string) string }

func (e environ) Getenv(k string) string { return e.getenv(k) }
func (e environ) Environ() []string      { return os.Environ() }

// chatConversations holds the conversation of one chat, one at a time: /new
// and /resume close the current one and open the next. Each lives until it
// is replaced or the chat ends, not just for the command that opened it,
// since its Python kernel keeps the variables between questions. Each runs
// with its own copy of the chat's settings, so a resumed conversation's
// never reach the next one.
type chatConversations struct {
	svc  *conversation.Service
	cfg  *config.Config
	life context.Context
	// resuming is set until the first conversation is opened, when that
	// one is a stored conversation (ref, or the latest for "").
	resuming bool
	ref      string

	mu      sync.Mutex
	current *conversation.Conversation
	// late are warnings of conversations closed while the UI ran.
	late []string
}

func (c *chatConversations) open() (*conversation.Conversation, error) {
	if c.resuming {
		c.resuming = false
		return c.switchTo(c.svc.Resume(c.life, c.cfg, c.ref))
	}
	return c.switchTo(c.svc.Open(c.life, c.cfg, conversation.Options{Origin: "chat"}))
}

// now is the chat's conversation.
func (c *chatConversations) now() *conversation.Conversation {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.current
}

// resume goes on with the stored conversation ref, for /resume.
func (c *chatConversations) resume(ref string) (*conversation.Conversation, error) {
	return c.switchTo(c.svc.Resume(c.life, c.cfg, ref))
}

// switchTo makes conv the chat's conversation and closes the one before.
func (c *chatConversations) switchTo(conv *conversation.Conversation, err error) (*conversation.Conversation, error) {
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	old := c.current
	c.current = conv
	c.mu.Unlock()
	if old != nil {
		late := old.Close(context.Background())
		c.mu.Lock()
		c.late = append(c.late, late...)
		c.mu.Unlock()
	}
	return conv, nil
}

// currentConversation is the chat's conversation, nil before the first.
func (c *chatConversations) currentConversation() *conversation.Conversation {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.current
}

// close closes the current conversation and returns every warning not yet
// shown.
func (c *chatConversations) close() []string {
	c.mu.Lock()
	cur := c.current
	c.current = nil
	late := c.late
	c.late = nil
	c.mu.Unlock()
	if cur != nil {
		late = append(late, cur.Close(context.Background())...)
	}
	return late
}

// listConversations formats the stored conversations as `terp sessions ls`
// does, to fit width columns, for /resume.
func listConversations(st store.Store, width int) (string, error) {
	rows, err := sessionRows(st)
	if err != nil {
		return "", err
	}
	var b strings.Builder
	if err := printSessions(&b, rows, time.Now(), width); err != nil {
		return "", err
	}
	return strings.TrimRight(b.String(), "\n"), nil
}

// resumeHint tells the user leaving a chat how to come back to its
// conversation, once closed, when it was kept (an empty one is not).
func resumeHint(w io.Writer, conv *conversation.Conversation) {
	if conv != nil && conv.Kept() {
		fmt.Fprintf(w, "conversation %s is kept: terp chat --resume %s goes on with it\n", conv.ID, conv.ID)
	}
}
