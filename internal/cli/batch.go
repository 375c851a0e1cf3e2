package cli

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/terpdev/terp/internal/batch"
	"github.com/terpdev/terp/internal/config"
	"github.com/terpdev/terp/internal/conversation"
	"github.com/terpdev/terp/internal/sandbox"
	"github.com/terpdev/terp/internal/sanitize"
)

// batchOptions holds everything `terp batch` needs, parsed from its flags.
type batchOptions struct {
	f     *Factory
	flags *pflag.FlagSet
	// cases is the suite file, or "-" for stdin.
	cases     string
	jobs      int
	repeat    int
	models    []string
	out       string
	junit     string
	markdown  string
	html      string
	artifacts string
	json      bool
}

// batchConfigFlags are the run flags of ask, less --out: for batch, --out
// names the results file, and --artifacts says where files go.
var batchConfigFlags = slices.DeleteFunc(slices.Clone(runFlags), func(s string) bool { return s == "out" })

func newCmdBatch(f *Factory, runF func(context.Context, *batchOptions) error) *cobra.Command {
	opts := &batchOptions{f: f}
	cmd := &cobra.Command{
		Use:   "batch [flags] CASES.jsonl",
		Short: "Run a suite of questions and check the answers, for CI and for comparing models",
		Long: `Batch asks every case of a suite, each in its own sandbox and stored
conversation, checks each answer against the case's expectations and reports
passed, failed or errored. Cases run concurrently (-j); one that fails or
crashes never stops the others.

CASES.jsonl holds one JSON object per line (blank lines and lines starting
with # are skipped); only "question" is required:

  {"id": "growth", "question": "Which month grew the most?",
   "files": ["../sales.csv"], "max_steps": 8, "model": "qwen3-32b",
   "expect": {"contains": ["December"], "regex": "(?i)dec(ember)?",
              "number": {"value": 26450, "tolerance": 0.5}, "files": ["chart.png"]}}

  id         names the case in reports and artifacts; default: the line number
  files      uploaded to /work/<basename>; paths are relative to CASES.jsonl
  max_steps  and model override the configuration for this case
  skill      what the case tests, and level (easy, medium or hard): the
             Markdown report gives the pass rate of each
  expect     every expectation given must hold:
    contains  texts the answer contains, ignoring case
    regex     Go RE2 syntax (github.com/google/re2/wiki/Syntax), case-sensitive
              unless it starts with (?i)
    number    some number in the answer is within tolerance (default 0) of
              value; "26,450", "-3", "1.5e-3" and "14%" (as 14 and as 0.14)
              are read as numbers
    files     saved (created or changed) in /work by the run; * ? [ are globs

A case with no expectations passes when the model answers. No answer (the
step cap, or a --max-tokens or --max-time budget, was reached) or an empty
one fails; an error of the model server or the sandbox (after the client's
retries) makes the case errored. A malformed line, an
unknown field or a missing file is reported with its line number before
anything runs (exit 2).

Reports: --out writes one JSON object per run (id, model, run, status,
answer, reasons, stop_reason, steps, usage, duration_ms, files,
conversation_id, line, skill, level), appended as runs finish and rewritten
in suite order at the end; --junit writes JUnit XML; --markdown a Markdown
report (pass rates per model, per level and per skill, medians of steps,
tokens and time, what did not pass); --html one web page that needs nothing
else (a chart of pass@1 per model, each case's verdict per model, what did
not pass against its expectations, links to the artifacts relative to the
page); --artifacts DIR downloads each case's files to DIR/<id>/
(DIR/<id>/<model>/run-<n>/ when comparing or repeating).
On a terminal a progress bar is shown; in a pipe, or with CI set, one line per
finished run. A summary table ends the output.

--models a,b runs every case with each model (replacing the cases' own
model) and compares them; --repeat K runs each case K times and reports
pass@1 (the share of runs that passed), pass@K (the share of cases that
passed at least once in K runs) and pass^K (that passed all K).

Exit codes: 0 every run passed, 1 a run failed or errored, 2 usage error (bad
flag or suite), 130 interrupted (the finished runs are still reported).`,
		Example: `  terp batch examples/batch/cases.jsonl
  terp batch -j 8 --out results.jsonl --junit report.xml --artifacts artifacts cases.jsonl
  terp batch --models qwen3-32b,glm-4-32b --repeat 3 cases.jsonl
  terp batch --json cases.jsonl | jq -c 'select(.status != "passed") | {id, reasons}'`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) != 1 {
				return usagef("give one cases file: terp batch [flags] CASES.jsonl")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.cases = args[0]
			opts.flags = cmd.Flags()
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return runBatch(cmd.Context(), opts)
		},
	}
	fl := cmd.Flags()
	fl.IntVarP(&opts.jobs, "jobs", "j", 4, "run `N` cases at once, each in its own sandbox")
	fl.IntVar(&opts.repeat, "repeat", 1, "run each case `K` times and report pass@1 and pass@K")
	fl.StringSliceVar(&opts.models, "models", nil, "run every case with each of these `MODELS` (comma-separated) and compare them")
	fl.StringVar(&opts.out, "out", "", "write one JSON result per run to `FILE` (JSON Lines)")
	fl.StringVar(&opts.junit, "junit", "", "write a JUnit XML report to `FILE`")
	fl.StringVar(&opts.markdown, "markdown", "", "write a Markdown report to `FILE`: pass rates per model, level and skill, medians, what did not pass")
	fl.StringVar(&opts.html, "html", "", "write the report as one web page to `FILE`: a pass-rate chart, verdicts per case and model, links to the artifacts")
	fl.StringVar(&opts.artifacts, "artifacts", "", "download the files each case saved to `DIR`/<case id>/")
	fl.BoolVar(&opts.json, "json", false, "print one JSON result per finished run on stdout, and the summary on stderr")
	addConfigFlags(cmd, batchConfigFlags...)
	return cmd
}

func runBatch(ctx context.Context, opts *batchOptions) error {
	f := opts.f
	if opts.jobs < 1 {
		return usagef("-j must be at least 1")
	}
	if opts.repeat < 1 {
		return usagef("--repeat must be at least 1")
	}
	models, err := modelList(opts.models)
	if err != nil {
		return err
	}
	cfg, err := f.Config(onlyFlags(opts.flags, batchConfigFlags))
	if err != nil {
		return err
	}
	cases, err := batch.Load(opts.cases, f.IO.In)
	if err != nil {
		return usageError{err}
	}
	for _, w := range cfg.Warnings() {
		fmt.Fprintln(f.IO.ErrOut, "warning: "+w)
	}
	// One backend serves every case: it is safe for concurrent use, and
	// checks the machine once.
	backend, err := f.NewBackend(cfg)
	if err != nil {
		return err
	}
	st, err := f.Store()
	if err != nil {
		return err
	}
	out, err := openBatchOutputs(opts)
	if err != nil {
		return err
	}

	runs := batch.Plan(cases, models, cfg.Model, opts.repeat)
	display := newBatchDisplay(f, opts, len(runs), len(models) > 1, opts.repeat > 1)
	svc := conversation.New(conversation.Deps{
		Store:      st,
		NewBackend: func(*config.Config) (sandbox.Backend, error) { return backend, nil },
		NewModel:   f.NewModel,
	})
	x := &batchExec{svc: svc, cfg: cfg, artifacts: opts.artifacts, warn: display.warnings()}

	started := time.Now()
	runner := batch.Runner{
		Jobs:    opts.jobs,
		Exec:    x.run,
		Started: display.started,
		Done: func(r batch.Result) {
			out.append(r)
			display.done(r)
		},
	}
	results := runner.Run(ctx, runs)
	display.close()

	reportErr := out.finish(batch.Report{Name: suiteName(opts.cases), File: opts.cases, Started: started, Version: versionString()}, runs, results)
	summary := f.IO.Out
	if opts.json {
		summary = f.IO.ErrOut
	}
	if err := batch.WriteSummary(summary, batch.Summarize(runs, results), results); err != nil {
		return err
	}
	if reportErr != nil {
		return reportErr
	}
	if ctx.Err() != nil {
		fmt.Fprintf(f.IO.ErrOut, "interrupted: %d of %d runs finished%s\n", len(results), len(runs), out.where())
		return silentError{code: exitInterrupted}
	}
	for _, r := range results {
		if r.Status != batch.Passed {
			return silentError{code: exitError}
		}
	}
	return nil
}

// modelList checks --models.
func modelList(models []string) ([]string, error) {
	var out []string
	for _, m := range models {
		m = strings.TrimSpace(m)
		switch {
		case m == "":
			return nil, usagef("--models has an empty name; give names separated by commas, e.g. --models qwen3-32b,glm-4-32b")
		case slices.Contains(out, m):
			return nil, usagef("--models names %s twice", m)
		}
		out = append(out, m)
	}
	return out, nil
}

// onlyFlags is the set of flags among names that the user set, for
// config.Load: batch's own --out is not the out_dir key's.
func onlyFlags(all *pflag.FlagSet, names []string) *pflag.FlagSet {
	fs := pflag.NewFlagSet("config", pflag.ContinueOnError)
	all.Visit(func(fl *pflag.Flag) {
		if slices.Contains(names, fl.Name) {
			// A copy, since Set marks only an unchanged flag as set.
			c := *fl
			c.Changed = false
			fs.AddFlag(&c)
			_ = fs.Set(c.Name, c.Value.String())
		}
	})
	return fs
}

// suiteName is the cases file's name without directory and extension.
func suiteName(path string) string {
	if path == "-" {
		return "stdin"
	}
	base := filepath.Base(path)
	return strings.TrimSuffix(base, filepath.Ext(base))
}

// batchOutputs are the report files, opened before anything runs so that a
// bad path costs nothing.
type batchOutputs struct {
	results  *batch.ResultsFile
	junit    *os.File
	markdown *os.File
	html     *os.File
	// htmlDir is the HTML report's directory, which its links to the
	// artifacts are relative to.
	htmlDir string
	paths   []string

	mu        sync.Mutex
	appendErr error
}

func openBatchOutputs(opts *batchOptions) (*batchOutputs, error) {
	o := &batchOutputs{}
	if opts.artifacts != "" {
		if err := os.MkdirAll(opts.artifacts, 0o755); err != nil {
			return nil, usagef("cannot create the artifacts directory: %v", err)
		}
	}
	if opts.out != "" {
		r, err := batch.CreateResults(opts.out)
		if err != nil {
			return nil, usagef("cannot write the results: %v", err)
		}
		o.results = r
		o.paths = append(o.paths, opts.out)
	}
	if opts.junit != "" {
		j, err := os.Create(opts.junit)
		if err != nil {
			return nil, usagef("cannot write the JUnit report: %v", err)
		}
		o.junit = j
		o.paths = append(o.paths, opts.junit)
	}
	if opts.markdown != "" {
		m, err := os.Create(opts.markdown)
		if err != nil {
			return nil, usagef("cannot write the Markdown report: %v", err)
		}
		o.markdown = m
		o.paths = append(o.paths, opts.markdown)
	}
	if opts.html != "" {
		h, err := os.Create(opts.html)
		if err != nil {
			return nil, usagef("cannot write the HTML report: %v", err)
		}
		o.html, o.htmlDir = h, filepath.Dir(opts.html)
		o.paths = append(o.paths, opts.html)
	}
	return o, nil
}

// append writes a finished run to the results file at once, so a killed
// terp leaves it there.
func (o *batchOutputs) append(r batch.Result) {
	if o.results == nil {
		return
	}
	if err := o.results.Append(r); err != nil {
		o.mu.Lock()
		o.appendErr = cmp.Or(o.appendErr, err)
		o.mu.Unlock()
	}
}

// finish writes the results file in suite order and the reports.
func (o *batchOutputs) finish(rep batch.Report, runs []batch.Run, results []batch.Result) error {
	var errs []error
	if o.appendErr != nil {
		errs = append(errs, fmt.Errorf("write the results: %w", o.appendErr))
	}
	if o.results != nil {
		errs = append(errs, o.results.Finish(results))
	}
	if o.junit != nil {
		err := batch.WriteJUnit(o.junit, rep, runs, results)
		if cerr := o.junit.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("write the JUnit report: %w", err))
		}
	}
	if o.markdown != nil {
		err := batch.WriteMarkdown(o.markdown, rep, runs, results)
		if cerr := o.markdown.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("write the Markdown report: %w", err))
		}
	}
	if o.html != nil {
		page := rep
		page.Dir = o.htmlDir
		err := batch.WriteHTML(o.html, page, runs, results)
		if cerr := o.html.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("write the HTML report: %w", err))
		}
	}
	return errors.Join(errs...)
}

// where names the report files, for the interrupt message.
func (o *batchOutputs) where() string {
	if len(o.paths) == 0 {
		return ""
	}
	return "; reported in " + strings.Join(o.paths, " and ")
}

// batchExec runs one case as a stored conversation of its own: a new
// sandbox, the uploads, one question, the downloads; the sandbox is paused
// at the end like any conversation's, so the case can be followed up with
// `terp ask --resume`.
type batchExec struct {
	svc       *conversation.Service
	cfg       *config.Config
	artifacts string
	// warn is where the conversations' warnings go, named by their run.
	warn io.Writer
}

func (x *batchExec) run(ctx context.Context, run batch.Run) (out batch.Outcome) {
	cfg := *x.cfg
	cfg.Model = run.Model
	if run.Case.MaxSteps > 0 {
		cfg.MaxSteps = run.Case.MaxSteps
	}
	cfg.OutDir = ""
	if x.artifacts != "" {
		cfg.OutDir = filepath.Join(x.artifacts, filepath.FromSlash(run.Dir))
	}
	conv, err := x.svc.Open(ctx, &cfg, conversation.Options{Origin: "batch", KeepFiles: x.artifacts == ""})
	if err != nil {
		out.Err = err
		return out
	}
	out.ConversationID = conv.ID
	var warnings []string
	defer func() {
		warnings = append(warnings, conv.Close(ctx)...)
		for _, w := range warnings {
			fmt.Fprintf(x.warn, "warning: %s: %s\n", run.Dir, sanitize.Terminal(w))
		}
		// A conversation in which nothing was said (the server refused the
		// first request) is not kept; do not point to it.
		if !conv.Kept() {
			out.ConversationID = ""
		}
	}()
	for _, p := range run.Case.Files {
		_, err := conv.Upload(ctx, p)
		warnings = append(warnings, conv.Warnings()...)
		if err != nil {
			out.Err = err
			return out
		}
	}
	turn, err := conv.Ask(ctx, run.Case.Question, nil)
	warnings = append(warnings, turn.Warnings...)
	first := x.outcome(ctx, conv, run.Case.Expect, turn, 0)
	out.Answer, out.StopReason, out.Steps, out.Usage, out.Err = first.Answer, first.StopReason, first.Steps, first.Usage, err
	out.ToolCalls, out.Files = first.ToolCalls, first.Files
	seen := len(turn.History)
	for _, f := range run.Case.FollowUps {
		if out.Err != nil || !answered(out.StopReason) {
			break
		}
		if last := len(out.FollowUps); last > 0 && (out.FollowUps[last-1].Err != nil || !answered(out.FollowUps[last-1].StopReason)) {
			break
		}
		turn, err := conv.Ask(ctx, f.Question, nil)
		warnings = append(warnings, turn.Warnings...)
		o := x.outcome(ctx, conv, f.Expect, turn, seen)
		o.Err = err
		seen = max(seen, len(turn.History))
		out.Steps += o.Steps
		out.Usage = out.Usage.Add(o.Usage)
		out.FollowUps = append(out.FollowUps, o)
		if err != nil {
			out.Err = fmt.Errorf("follow-up %d: %w", len(out.FollowUps), err)
		}
	}
	return out
}

// answered reports whether a turn ended with an answer.
func answered(stop string) bool { return stop == "answered" || stop == "" }

// outcome is what one turn produced: its answer, the code it ran (the tool
// calls in the history after the first skip messages) and the files it
// saved, read back where the expectations look into them.
func (x *batchExec) outcome(ctx context.Context, conv *conversation.Conversation, e batch.Expect, turn conversation.Turn, skip int) batch.Outcome {
	res := turn.Result
	o := batch.Outcome{Answer: res.Answer, StopReason: string(res.StopReason), Steps: res.Steps, Usage: res.Usage}
	if skip <= len(turn.History) {
		for _, m := range turn.History[skip:] {
			o.ToolCalls += len(m.ToolCalls)
		}
	}
	for _, fi := range res.Files {
		f := batch.File{SandboxPath: sandbox.WorkDir + "/" + fi.Path, Bytes: fi.Size}
		for _, d := range turn.Files {
			if d.Name == fi.Path {
				f.Path, f.Bytes = d.Path, d.Bytes
			}
		}
		if e.WantsData(fi.Path) {
			f.Data = readBack(ctx, conv, fi.Path)
		}
		o.Files = append(o.Files, f)
	}
	return o
}

// readBack reads a saved file from the sandbox for the expectations that
// check what it holds; nil when it cannot be read, which they report.
func readBack(ctx context.Context, conv *conversation.Conversation, name string) []byte {
	rc, err := conv.ReadFile(ctx, name)
	if err != nil {
		return nil
	}
	defer rc.Close()
	b, err := io.ReadAll(io.LimitReader(rc, batch.MaxCheckedFile))
	if err != nil {
		return nil
	}
	return b
}
