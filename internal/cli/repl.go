package cli

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/terpdev/terp/internal/config"
	"github.com/terpdev/terp/internal/conversation"
	"github.com/terpdev/terp/internal/sanitize"
	"github.com/terpdev/terp/internal/tui"
)

// repl is `terp chat` without a terminal: one question per line on stdin,
// each answer on stdout as `ask` prints it, progress on stderr when that is
// a terminal. The conversation goes on from line to line, like the chat UI.
type repl struct {
	f    *Factory
	svc  *conversation.Service
	cfg  *config.Config
	conv *conversation.Conversation
	// pickedModel and pickedSteps are the user's /model and /steps ("" and
	// 0 until then): they hold for a /new conversation, where a resumed
	// conversation's own never do.
	pickedModel string
	pickedSteps int
	// worst is the exit code of the most serious thing that happened, for
	// the REPL's own: a failed question (1) over a wrong command (2) over
	// a question that reached the step cap (3).
	worst int
}

// errQuit ends the REPL from a /quit.
var errQuit = errors.New("quit")

func runREPL(ctx context.Context, opts *chatOptions, cfg *config.Config) error {
	svc, err := opts.f.Conversations()
	if err != nil {
		return err
	}
	r := &repl{f: opts.f, svc: svc, cfg: cfg}
	if opts.cont || opts.resume != "" {
		r.conv, err = svc.Resume(ctx, cfg, opts.resume)
	} else {
		r.conv, err = svc.Open(ctx, cfg, conversation.Options{Origin: "chat"})
	}
	if err != nil {
		return err
	}
	defer func() {
		printWarnings(r.f.IO.ErrOut, r.conv.Close(ctx))
		resumeHint(r.f.IO.ErrOut, r.conv)
	}()
	r.warnings()
	for _, p := range opts.files {
		_, err := r.conv.Upload(ctx, p)
		r.warnings()
		if err != nil {
			return err
		}
	}

	in := bufio.NewScanner(r.f.IO.In)
	in.Buffer(make([]byte, 64<<10), 1<<20)
	for r.prompt(); in.Scan(); r.prompt() {
		line := strings.TrimSpace(in.Text())
		if line == "" {
			continue
		}
		var err error
		if strings.HasPrefix(line, "/") {
			err = r.command(ctx, line)
			r.warnings()
		} else {
			err = r.ask(ctx, line)
		}
		switch {
		case errors.Is(err, errQuit):
			return r.outcome()
		case ctx.Err() != nil:
			return ctx.Err()
		case err != nil:
			fmt.Fprintln(r.f.IO.ErrOut, "terp: "+sanitize.Terminal(err.Error()))
			if isUsage(err) {
				r.note(exitUsage)
			}
		}
	}
	if err := in.Err(); err != nil {
		return fmt.Errorf("read stdin: %w", err)
	}
	return r.outcome()
}

// warnings prints what the conversation warned of outside a turn.
func (r *repl) warnings() { printWarnings(r.f.IO.ErrOut, r.conv.Warnings()) }

// outcome is the exit status of the whole REPL, so that a script feeding
// questions can tell: the code of the most serious thing that happened.
func (r *repl) outcome() error {
	if r.worst != 0 {
		return silentError{code: r.worst}
	}
	return nil
}

// note records an exit code; a failed question outranks a wrong command,
// which outranks the step cap.
func (r *repl) note(code int) {
	rank := map[int]int{exitError: 3, exitUsage: 2, exitMaxSteps: 1}
	if rank[code] > rank[r.worst] {
		r.worst = code
	}
}

// prompt invites a person typing on a terminal; piped input gets none.
func (r *repl) prompt() {
	if r.f.IO.StdinTTY {
		fmt.Fprint(r.f.IO.ErrOut, "terp> ")
	}
}

// switchTo makes conv the REPL's conversation and closes the one before.
func (r *repl) switchTo(ctx context.Context, conv *conversation.Conversation) {
	old := r.conv
	r.conv = conv
	printWarnings(r.f.IO.ErrOut, old.Close(ctx))
}

// ask runs one question and prints its answer and files on stdout.
func (r *repl) ask(ctx context.Context, question string) error {
	show := r.f.IO.StderrTTY
	run := askRun{id: r.conv.ID}
	var err error
	run.turn, err = runTurn(ctx, r.f, r.conv, question, show)
	if !show {
		run.warnings = run.turn.Warnings
	}
	err = printAnswer(r.f.IO, run, err)
	var silent silentError
	switch {
	case errors.As(err, &silent):
		// The step cap or a budget: the answer says so; the REPL goes on.
		r.note(silent.code)
		return nil
	case err != nil && !errors.Is(err, context.Canceled):
		r.note(exitError)
	}
	return err
}

// command runs a slash command; results go to stdout, messages to stderr.
func (r *repl) command(ctx context.Context, line string) error {
	cmd, arg, err := tui.ParseCommand(line)
	if err != nil {
		return usageError{err}
	}
	out, msg := r.f.IO.Out, r.f.IO.ErrOut
	switch cmd.Name {
	case "/quit":
		return errQuit
	case "/help":
		fmt.Fprint(msg, replHelp+tui.CommandsHelp())
	case "/upload":
		dest, err := r.conv.Upload(ctx, arg)
		if err != nil {
			return err
		}
		fmt.Fprintf(msg, "uploaded %s to %s\n", arg, dest)
	case "/files":
		files, err := r.conv.Files(ctx)
		for _, fi := range files {
			fmt.Fprintf(out, "%s\t%s\n", sanitize.Terminal(fi.Path), config.SizeText(fi.Size))
		}
		if err != nil {
			return err
		}
	case "/export":
		text, err := chatExport(ctx, r.svc.Store(), r.conv, arg)
		if err != nil {
			return err
		}
		fmt.Fprintln(msg, sanitize.Terminal(text))
	case "/download":
		file, err := r.conv.Download(ctx, arg)
		if err != nil {
			return err
		}
		fmt.Fprintln(out, sanitize.Terminal(file.Path))
	case "/new":
		conv, err := r.svc.Open(ctx, r.cfg, conversation.Options{Origin: "chat"})
		if err != nil {
			return err
		}
		// A conversation just opened runs nothing, so these take its
		// turn lock at once.
		if r.pickedModel != "" {
			err = conv.SetModel(ctx, r.pickedModel)
		}
		if err == nil {
			err = conv.SetMaxSteps(ctx, r.pickedSteps)
		}
		if err != nil {
			printWarnings(msg, conv.Close(ctx))
			return err
		}
		r.switchTo(ctx, conv)
		fmt.Fprintf(msg, "new conversation %s\n", conv.ID)
	case "/resume":
		if arg == "" {
			rows, err := sessionRows(r.svc.Store())
			if err != nil {
				return err
			}
			return printSessions(msg, rows, time.Now(), listWidth)
		}
		if strings.HasPrefix(r.conv.ID, strings.ToLower(arg)) {
			fmt.Fprintf(msg, "this is conversation %s already\n", r.conv.ID)
			return nil
		}
		conv, err := r.svc.Resume(ctx, r.cfg, arg)
		if err != nil {
			return err
		}
		r.switchTo(ctx, conv)
		fmt.Fprintf(msg, "resumed conversation %s after %d questions\n", conv.ID, conv.Info().Earlier)
	case "/model":
		if arg == "" {
			fmt.Fprintln(msg, "model: "+r.conv.Info().Model)
			return nil
		}
		// The line-mode chat does one thing at a time: no turn runs now.
		if err := r.conv.SetModel(ctx, arg); err != nil {
			return err
		}
		r.pickedModel = arg
		fmt.Fprintln(msg, "model: "+arg)
	case "/steps":
		n, err := tui.StepsArg(arg)
		if err != nil {
			return usageError{err}
		}
		if err := r.conv.SetMaxSteps(ctx, n); err != nil {
			return err
		}
		r.pickedSteps = n
		fmt.Fprintf(msg, "at most %d steps per question\n", n)
	}
	return nil
}

// replHelp comes before the commands' table in the line-mode chat's /help.
const replHelp = "Type a question and press Enter; the answer is printed when it is complete.\n"
