package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/lipgloss"
	"github.com/muesli/termenv"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/terpdev/terp/internal/agent"
	"github.com/terpdev/terp/internal/config"
	"github.com/terpdev/terp/internal/llm"
	"github.com/terpdev/terp/internal/sandbox"
	"github.com/terpdev/terp/internal/sanitize"
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
answer is drawn as Markdown. The sandbox and the Python session last until you
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
	// Warnings from the session (a file too large to download) would
	// break the screen on stderr: they are collected and shown in the
	// transcript, and whatever is left is printed once the UI is gone.
	warnings := &lineBuffer{}
	quiet := *f
	quiet.IO.ErrOut = warnings
	defer func() {
		for _, w := range warnings.drain() {
			fmt.Fprintln(f.IO.ErrOut, w)
		}
	}()

	life, cancel := context.WithCancel(ctx)
	defer cancel()
	convs := &chatConversations{f: &quiet, cfg: cfg, life: life, warnings: warnings,
		resuming: opts.cont || opts.resume != "", ref: opts.resume}
	defer convs.close()
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
		Conversations: func(_ context.Context, width int) (string, error) { return convs.list(width) },
		Renderer:      out,
		Protocol:      tui.DetectProtocol(cfg.ImageProtocol, f.Getenv),
		Uploaded:      uploaded,
	})
	_, err = tea.NewProgram(model,
		tea.WithContext(life),
		tea.WithInput(f.IO.In),
		tea.WithOutput(f.IO.Out),
		tea.WithAltScreen(),
	).Run()
	cancel()
	id := convs.currentID()
	convs.close()
	resumeHint(f, id)
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

// chatConversations opens the conversations of one chat, one at a time:
// /new closes the current one and opens the next. Each lives until it is
// replaced or the chat ends, not just for the command that opened it, since
// its Python kernel keeps the variables between questions.
type chatConversations struct {
	f        *Factory
	cfg      *config.Config
	life     context.Context
	warnings *lineBuffer
	// resuming is set until the first conversation is opened, when that
	// one is a stored conversation (ref, or the latest for "").
	resuming bool
	ref      string

	mu      sync.Mutex
	current *chatConversation
}

func (c *chatConversations) open() (*chatConversation, error) {
	if c.resuming {
		c.resuming = false
		return c.switchTo(resumeSession(c.life, c.f, c.cfg, c.ref))
	}
	return c.switchTo(openSession(c.life, c.f, c.cfg, "chat"))
}

// resume goes on with the stored conversation ref, for /resume.
func (c *chatConversations) resume(ref string) (*chatConversation, error) {
	return c.switchTo(resumeSession(c.life, c.f, c.cfg, ref))
}

// list formats the stored conversations as `terp sessions ls` does, to fit
// width columns.
func (c *chatConversations) list(width int) (string, error) {
	st, err := c.f.Store()
	if err != nil {
		return "", err
	}
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

// switchTo makes s the chat's conversation and closes the one before.
func (c *chatConversations) switchTo(s *session, err error) (*chatConversation, error) {
	if err != nil {
		return nil, err
	}
	id := s.ID
	conv := &chatConversation{s: s, cfg: c.cfg, warnings: c.warnings, info: tui.Info{
		ID: id, Model: c.cfg.Model, Sandbox: c.cfg.Sandbox, MaxSteps: c.cfg.MaxSteps, Earlier: s.Conv.Turns,
		Past: pastExchanges(s.Conv.Messages, maxPast),
	}}
	c.mu.Lock()
	old := c.current
	c.current = conv
	c.mu.Unlock()
	if old != nil {
		old.close()
	}
	return conv, nil
}

// maxPast is how many earlier exchanges a resumed chat shows.
const maxPast = 10

// pastExchanges are the last n questions of a stored conversation with the
// answer each got: a user message (without the notes terp put before it)
// and the last assistant text before the next question.
func pastExchanges(msgs []llm.Message, n int) []tui.Exchange {
	var out []tui.Exchange
	for _, m := range msgs {
		switch {
		case m.Role == llm.RoleUser && m.Content == agent.EmptyReplyNudge:
			// terp's, not the user's
		case m.Role == llm.RoleUser:
			if q := firstQuestion([]llm.Message{m}); q != "" {
				out = append(out, tui.Exchange{Question: q})
			}
		case m.Role == llm.RoleAssistant && len(m.ToolCalls) == 0 && m.Content != "" && len(out) > 0:
			out[len(out)-1].Answer = m.Content
		}
	}
	if len(out) > n {
		out = out[len(out)-n:]
	}
	return out
}

// currentID is the id of the chat's conversation, "" before the first.
func (c *chatConversations) currentID() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.current == nil {
		return ""
	}
	return c.current.s.ID
}

// resumeHint tells the user leaving a chat how to come back to its
// conversation, when it was kept (an empty one is not).
func resumeHint(f *Factory, id string) {
	if id == "" {
		return
	}
	st, err := f.Store()
	if err != nil {
		return
	}
	if _, err := st.Load(id); err == nil {
		fmt.Fprintf(f.IO.ErrOut, "conversation %s is kept: terp chat --resume %s goes on with it\n", id, id)
	}
}

func (c *chatConversations) close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.current != nil {
		c.current.close()
		c.current = nil
	}
}

// chatConversation is a session as the chat UI sees it.
type chatConversation struct {
	s        *session
	cfg      *config.Config
	warnings *lineBuffer
	info     tui.Info
	// running counts the turns in flight, so the sandbox is removed only
	// after a cancelled turn has let go of it.
	running sync.WaitGroup
}

var _ tui.Conversation = (*chatConversation)(nil)

func (c *chatConversation) Info() tui.Info { return c.info }

func (c *chatConversation) SetModel(name string) {
	c.s.Agent.SetModel(name)
	c.info.Model = name
}

func (c *chatConversation) SetMaxSteps(n int) {
	c.s.Agent.SetMaxSteps(n)
	c.info.MaxSteps = n
}

// Ask runs a turn and downloads what the code saved, as ask does.
func (c *chatConversation) Ask(ctx context.Context, question string, send func(agent.Event)) (tui.Turn, error) {
	c.running.Add(1)
	defer c.running.Done()
	res, err := c.s.Ask(ctx, question, send)
	turn := tui.Turn{Result: res}
	files, dlErr := c.s.Download(ctx, res.Files)
	for _, fl := range files {
		turn.Files = append(turn.Files, tui.File{
			Name: strings.TrimPrefix(fl.SandboxPath, sandbox.WorkDir+"/"), Path: fl.Path, Bytes: fl.Bytes,
		})
	}
	if dlErr != nil {
		turn.Warnings = append(turn.Warnings, dlErr.Error())
	}
	turn.Warnings = append(turn.Warnings, res.Notices...)
	turn.Warnings = append(turn.Warnings, c.warnings.drain()...)
	return turn, err
}

func (c *chatConversation) Upload(ctx context.Context, p string) (string, error) {
	if err := checkUploads([]string{p}); err != nil {
		return "", err
	}
	if err := c.s.Upload(ctx, p); err != nil {
		return "", err
	}
	return path.Join(sandbox.WorkDir, filepath.Base(p)), nil
}

func (c *chatConversation) Download(ctx context.Context, name string) (tui.File, error) {
	files, err := c.s.Download(ctx, []sandbox.FileInfo{{Path: name}})
	if len(files) == 0 {
		return tui.File{}, err
	}
	return tui.File{Name: name, Path: files[0].Path, Bytes: files[0].Bytes}, nil
}

// Files lists /work without terp's own files.
func (c *chatConversation) Files(ctx context.Context) ([]sandbox.FileInfo, error) {
	return c.s.Files(ctx)
}

// close waits a little for a cancelled turn to finish, then removes the
// sandbox.
func (c *chatConversation) close() {
	done := make(chan struct{})
	go func() { c.running.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(15 * time.Second):
	}
	c.s.Close(context.Background())
}

// lineBuffer collects what would have been written to stderr, line by
// line, while the chat UI owns the terminal.
type lineBuffer struct {
	mu    sync.Mutex
	lines []string
	part  string
}

func (b *lineBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	s := b.part + string(p)
	parts := strings.Split(s, "\n")
	b.part = parts[len(parts)-1]
	for _, l := range parts[:len(parts)-1] {
		b.lines = append(b.lines, sanitize.Terminal(l))
	}
	return len(p), nil
}

// drain returns the complete lines written so far and forgets them.
func (b *lineBuffer) drain() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := b.lines
	b.lines = nil
	return out
}
