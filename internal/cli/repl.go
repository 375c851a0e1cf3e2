package cli

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/terpdev/terp/internal/config"
	"github.com/terpdev/terp/internal/sandbox"
	"github.com/terpdev/terp/internal/sanitize"
	"github.com/terpdev/terp/internal/tui"
)

// repl is `terp chat` without a terminal: one question per line on stdin,
// each answer on stdout as `ask` prints it, progress on stderr when that is
// a terminal. The conversation goes on from line to line, like the chat UI.
type repl struct {
	f    *Factory
	cfg  *config.Config
	sess *session
	// model is the model the questions go to, after any /model.
	model string
	steps int
	// worst is the exit code of the most serious thing that happened, for
	// the REPL's own: a failed question (1) over a wrong command (2) over
	// a question that reached the step cap (3).
	worst int
}

// errQuit ends the REPL from a /quit.
var errQuit = errors.New("quit")

func runREPL(ctx context.Context, opts *chatOptions, cfg *config.Config) error {
	r := &repl{f: opts.f, cfg: cfg}
	var err error
	if opts.cont || opts.resume != "" {
		r.sess, err = resumeSession(ctx, r.f, cfg, opts.resume)
	} else {
		r.sess, err = openSession(ctx, r.f, cfg, "chat")
	}
	if err != nil {
		return err
	}
	// Resuming may bring back the conversation's model.
	r.model, r.steps = cfg.Model, cfg.MaxSteps
	defer func() {
		r.sess.Close(ctx)
		resumeHint(r.f, r.sess.ID)
	}()
	for _, p := range opts.files {
		if err := r.sess.Upload(ctx, p); err != nil {
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
			if errors.As(err, new(usageError)) {
				r.note(exitUsage)
			}
		}
	}
	if err := in.Err(); err != nil {
		return fmt.Errorf("read stdin: %w", err)
	}
	return r.outcome()
}

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

// renew replaces the conversation with a new one, for /new.
func (r *repl) renew(ctx context.Context) error {
	s, err := openSession(ctx, r.f, r.cfg, "chat")
	if err != nil {
		return err
	}
	r.sess.Close(ctx)
	// The user's /model and /steps hold for the new conversation.
	s.Agent.SetModel(r.model)
	s.Agent.SetMaxSteps(r.steps)
	r.sess = s
	return nil
}

// ask runs one question and prints its answer and files on stdout.
func (r *repl) ask(ctx context.Context, question string) error {
	res, err := runTurn(ctx, r.f, r.sess, question, r.f.IO.StderrTTY)
	files, dlErr := r.sess.Download(ctx, res.Files)
	if err == nil {
		err = dlErr
	}
	err = printAnswer(r.f.IO, res, files, err)
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
		if err := checkUploads([]string{arg}); err != nil {
			return err
		}
		if err := r.sess.Upload(ctx, arg); err != nil {
			return err
		}
		fmt.Fprintf(msg, "uploaded %s\n", arg)
	case "/files":
		files, err := r.sess.Files(ctx)
		for _, fi := range files {
			fmt.Fprintf(out, "%s\t%s\n", sanitize.Terminal(fi.Path), tui.SizeText(fi.Size))
		}
		if err != nil {
			return err
		}
	case "/download":
		name := strings.TrimPrefix(arg, "/work/")
		files, err := r.sess.Download(ctx, []sandbox.FileInfo{{Path: name}})
		if len(files) == 0 {
			return err
		}
		fmt.Fprintln(out, files[0].Path)
	case "/new":
		if err := r.renew(ctx); err != nil {
			return err
		}
		fmt.Fprintf(msg, "new conversation %s\n", r.sess.ID)
	case "/resume":
		if arg == "" {
			st, err := r.f.Store()
			if err != nil {
				return err
			}
			rows, err := sessionRows(st)
			if err != nil {
				return err
			}
			return printSessions(msg, rows, time.Now(), listWidth)
		}
		if strings.HasPrefix(r.sess.ID, strings.ToLower(arg)) {
			fmt.Fprintf(msg, "this is conversation %s already\n", r.sess.ID)
			return nil
		}
		s, err := resumeSession(ctx, r.f, r.cfg, arg)
		if err != nil {
			return err
		}
		r.sess.Close(ctx)
		r.sess, r.model = s, r.cfg.Model
		fmt.Fprintf(msg, "resumed conversation %s after %d questions\n", s.ID, s.Conv.Turns)
	case "/model":
		if arg == "" {
			fmt.Fprintln(msg, "model: "+r.model)
			return nil
		}
		r.model = arg
		r.sess.Agent.SetModel(arg)
		fmt.Fprintln(msg, "model: "+arg)
	case "/steps":
		n, err := tui.StepsArg(arg)
		if err != nil {
			return usageError{err}
		}
		r.steps = n
		r.sess.Agent.SetMaxSteps(n)
		fmt.Fprintf(msg, "at most %d steps per question\n", n)
	}
	return nil
}

// replHelp comes before the commands' table in the line-mode chat's /help.
const replHelp = "Type a question and press Enter; the answer is printed when it is complete.\n"
