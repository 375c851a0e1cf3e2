package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/terpdev/terp/internal/agent"
	"github.com/terpdev/terp/internal/config"
	"github.com/terpdev/terp/internal/conversation"
	"github.com/terpdev/terp/internal/llm"
	"github.com/terpdev/terp/internal/pubsub"
	"github.com/terpdev/terp/internal/sanitize"
)

// askOptions holds everything `terp ask` needs, parsed from its flags.
type askOptions struct {
	f        *Factory
	flags    *pflag.FlagSet
	question []string
	files    []string
	json     bool
	// resume names a stored conversation to go on with; cont is --continue,
	// the latest one.
	resume string
	cont   bool
}

// runFlags are the configuration flags shared by the commands that run the
// loop.
var runFlags = []string{
	"out", "base-url", "model", "sandbox", "exec-mode", "prewarm", "max-steps", "timeout", "interrupt-grace", "sandbox-timeout",
	"stream", "max-stdout", "max-stderr", "memory-limit", "process-limit",
	"file-size-limit", "max-download-size", "max-download-total",
	"provider", "tool-dialect", "context-window", "max-tokens", "max-time",
	"cpuos-url", "cpuos-template", "docker-image", "kubernetes-namespace", "kubernetes-warm-pool", "kubernetes-router-url", "kubernetes-kubeconfig",
	"network", "network-allow", "network-trusted-ranges",
}

func newCmdAsk(f *Factory, runF func(context.Context, *askOptions) error) *cobra.Command {
	opts := &askOptions{f: f}
	cmd := &cobra.Command{
		Use:   "ask [flags] [QUESTION...]",
		Short: "Ask one question and get the answer, computed in a sandbox",
		Long: `Ask sends the question to the model, runs the Python it writes in a sandbox
until it answers, prints the answer on stdout and downloads the files the code
saved. With no QUESTION, or "-", the question is read from stdin.

Progress (each step's code and output) goes to stderr when it is a terminal.

Exit codes: 0 answered, 1 runtime error (model API, sandbox), 2 usage or
configuration error, 3 step cap or budget (--max-tokens, --max-time) reached
without an answer, 130 interrupted.`,
		Example: `  terp ask -f examples/sales.csv "Plot revenue per month to chart.png and tell me which month grew the most."
  terp ask --json -f data.csv "How many rows have a missing price?" | jq .answer
  echo "What is the 100th prime?" | terp ask
  terp ask --base-url http://localhost:11434/v1 --model qwen3:8b "Fit a line to y=2x+1 noise"
  terp ask --continue "Now plot it per quarter."`,
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.question = args
			opts.flags = cmd.Flags()
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return runAsk(cmd.Context(), opts)
		},
	}
	fl := cmd.Flags()
	fl.StringArrayVarP(&opts.files, "file", "f", nil, "upload `PATH` to /work/<basename> before the first step (repeatable)")
	fl.BoolVar(&opts.json, "json", false, "print one JSON object on stdout and nothing else")
	fl.StringVar(&opts.resume, "resume", "", "go on with the stored conversation `ID` (any unique prefix; see terp sessions ls)")
	fl.BoolVarP(&opts.cont, "continue", "c", false, "go on with the latest conversation")
	_ = cmd.RegisterFlagCompletionFunc("resume", completeConversations(f, 0))
	addConfigFlags(cmd, runFlags...)
	return cmd
}

// readQuestion joins the arguments, or reads stdin for none or "-".
func readQuestion(opts *askOptions) (string, error) {
	q := strings.Join(opts.question, " ")
	if len(opts.question) == 0 || q == "-" {
		if len(opts.question) == 0 && opts.f.IO.StdinTTY {
			return "", usagef("no question: give it as arguments (terp ask \"...\") or on stdin (terp ask - < question.txt)")
		}
		b, err := io.ReadAll(io.LimitReader(opts.f.IO.In, 1<<20))
		if err != nil {
			return "", fmt.Errorf("read the question from stdin: %w", err)
		}
		q = string(b)
	}
	if strings.TrimSpace(q) == "" {
		return "", usagef("the question is empty")
	}
	return strings.TrimSpace(q), nil
}

// checkRun does what every command that runs the loop checks before it
// starts anything: the uploads, the conversation flags, the configuration's
// warnings.
func checkRun(ctx context.Context, f *Factory, cfg *config.Config, files []string, cont bool, resume string) error {
	if err := conversation.CheckUploads(files); err != nil {
		return err
	}
	if err := conversation.CheckOutDir(cfg.OutDir); err != nil {
		return err
	}
	if cont && resume != "" {
		return usagef("--continue and --resume both name a conversation; give one")
	}
	for _, w := range cfg.Warnings() {
		fmt.Fprintln(f.IO.ErrOut, "warning: "+w)
	}
	if cont || resume != "" {
		return nil // the stored conversation names its server
	}
	return pickServer(ctx, f, cfg)
}

func runAsk(ctx context.Context, opts *askOptions) error {
	f := opts.f
	cfg, err := f.Config(opts.flags)
	if err != nil {
		return err
	}
	question, err := readQuestion(opts)
	if err != nil {
		return err
	}
	if err := checkRun(ctx, f, cfg, opts.files, opts.cont, opts.resume); err != nil {
		return err
	}
	run, err := answer(ctx, opts, cfg, question)
	if opts.json {
		return printJSON(f.IO.Out, run, err)
	}
	return printAnswer(f.IO, run, err)
}

// askRun is what one `terp ask` did, for printing.
type askRun struct {
	id   string
	turn conversation.Turn
	// warnings are what the user has not been shown yet, in order.
	warnings []string
}

// answer runs one question in a new or resumed conversation: upload, the
// turn (which downloads what the code saved, whatever the outcome, even
// after Ctrl+C), close.
func answer(ctx context.Context, opts *askOptions, cfg *config.Config, question string) (run askRun, err error) {
	f := opts.f
	svc, err := f.Conversations()
	if err != nil {
		return run, err
	}
	var conv *conversation.Conversation
	if opts.cont || opts.resume != "" {
		conv, err = svc.Resume(ctx, cfg, opts.resume)
	} else {
		conv, err = svc.Open(ctx, cfg, conversation.Options{Origin: "ask"})
	}
	if err != nil {
		return run, err
	}
	run.id = conv.ID
	defer func() { run.warnings = append(run.warnings, conv.Close(ctx)...) }()
	run.warnings = append(run.warnings, conv.Warnings()...)
	for _, p := range opts.files {
		_, err := conv.Upload(ctx, p)
		run.warnings = append(run.warnings, conv.Warnings()...)
		if err != nil {
			return run, err
		}
	}
	show := !opts.json && f.IO.StderrTTY
	run.turn, err = runTurn(ctx, f, conv, question, show)
	if !show {
		// Progress showed them as they happened.
		run.warnings = append(run.warnings, run.turn.Warnings...)
	}
	return run, err
}

// asker runs a turn.
type asker interface {
	Ask(ctx context.Context, question string, send func(agent.Event)) (conversation.Turn, error)
}

// runTurn runs a turn, showing progress on stderr when show is set. Events
// are consumed on their own goroutine, so a slow terminal never holds up the
// loop (text deltas are dropped first). The consumer reads until the broker
// closes, whatever happens to ctx, so delivery waits on a context that is
// not cancelled: a turn interrupted mid-step still shows what it did.
func runTurn(ctx context.Context, f *Factory, a asker, question string, show bool) (conversation.Turn, error) {
	events := pubsub.New[agent.Event](256)
	stay := context.WithoutCancel(ctx)
	sub := events.Subscribe(stay)
	done := make(chan struct{})
	p := newProgress(f.IO.ErrOut)
	go func() {
		defer close(done)
		defer p.close()
		for e := range sub {
			if show {
				p.handle(e)
			}
		}
	}()
	turn, err := a.Ask(ctx, question, agent.Sender(stay, events))
	events.Close()
	<-done
	return turn, err
}

// savedFile is one downloaded file, as `ask --json` reports it.
type savedFile struct {
	Path        string `json:"path"`
	SandboxPath string `json:"sandbox_path"`
	Bytes       int64  `json:"bytes"`
}

// askJSON is the object `ask --json` prints, part of the CLI contract.
type askJSON struct {
	ConversationID string      `json:"conversation_id"`
	Answer         string      `json:"answer"`
	StopReason     string      `json:"stop_reason"`
	Steps          int         `json:"steps"`
	Files          []savedFile `json:"files"`
	Usage          llm.Usage   `json:"usage"`
	Error          string      `json:"error,omitempty"`
	// Warnings are what the user should know that did not end the turn,
	// such as a fallback to tool calls written as text or a file that was
	// not downloaded.
	Warnings []string `json:"warnings,omitempty"`
}

func printJSON(w io.Writer, run askRun, runErr error) error {
	res := run.turn.Result
	out := askJSON{
		ConversationID: run.id,
		Answer:         res.Answer,
		StopReason:     string(res.StopReason),
		Steps:          res.Steps,
		Files:          []savedFile{},
		Usage:          res.Usage,
		Warnings:       run.warnings,
	}
	for _, fl := range run.turn.Files {
		out.Files = append(out.Files, savedFile{Path: fl.Path, SandboxPath: fl.SandboxPath(), Bytes: fl.Bytes})
	}
	switch {
	case runErr == nil:
	case errors.Is(runErr, context.Canceled):
		out.StopReason = string(agent.Cancelled)
	default:
		out.Error = runErr.Error()
		out.StopReason = string(agent.Errored)
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	if err := enc.Encode(out); err != nil {
		return err
	}
	return outcome(res, runErr)
}

// maxFilesShown bounds the list of downloaded files after the answer: a
// step may save tens of thousands.
const maxFilesShown = 50

// printAnswer prints the answer and the files on stdout, and on stderr what
// the user has not been shown: warnings, and why there is no answer.
func printAnswer(streams IOStreams, run askRun, runErr error) error {
	w := streams.Out
	res := run.turn.Result
	printWarnings(streams.ErrOut, run.warnings)
	switch {
	case res.Answer != "" && res.StopReason != agent.Answered:
		// Why there is no answer: stdout holds only answers, for scripts.
		fmt.Fprintln(streams.ErrOut, "terp: "+sanitize.Terminal(res.Answer))
	case res.Answer != "":
		fmt.Fprintln(w, sanitize.Terminal(res.Answer))
	case res.StopReason == agent.Answered:
		fmt.Fprintln(streams.ErrOut, "terp: the model's answer was empty")
	}
	if files := run.turn.Files; len(files) > 0 {
		fmt.Fprintln(w, "\nFiles:")
		for _, fl := range files[:min(len(files), maxFilesShown)] {
			fmt.Fprintf(w, "  %s (%s)\n", sanitize.Terminal(fl.Path), config.SizeText(fl.Bytes))
		}
		if more := len(files) - maxFilesShown; more > 0 {
			fmt.Fprintf(w, "  and %d more in the same directory (--json lists them all)\n", more)
		}
	}
	return outcome(res, runErr)
}

// printWarnings prints what the conversation service warned of, one line
// each.
func printWarnings(w io.Writer, warnings []string) {
	for _, text := range warnings {
		fmt.Fprintln(w, "warning: "+sanitize.Terminal(text))
	}
}

// outcome is the error that sets the exit code once the result is printed.
func outcome(res agent.Result, runErr error) error {
	switch {
	case runErr != nil:
		return runErr
	case res.StopReason == agent.MaxSteps, res.StopReason == agent.TokenBudget, res.StopReason == agent.TimeBudget:
		return silentError{code: exitMaxSteps}
	}
	return nil
}
