package batch

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode"

	"github.com/terpdev/terp/internal/llm"
)

// Run is one execution of a case: with one model, one of its repeats.
type Run struct {
	Case *Case
	// Model is the model this run asks.
	Model string
	// N counts the repeats of the same case and model, from 1.
	N int
	// Seq is the run's place in the plan; results are reported in this order.
	Seq int
	// Dir is where the run's files go under --artifacts: the case id, then
	// the model when several are compared, then run-N when cases repeat.
	Dir string
}

// Plan lists the runs of a suite: every case with every model (models empty
// means each case's own model, or def), repeat times. A model named in models
// replaces a case's own: a comparison asks every model the same questions.
// Runs go round by round, so that an interrupted comparison has covered
// every model about equally.
func Plan(cases []Case, models []string, def string, repeat int) []Run {
	repeat = max(repeat, 1)
	var runs []Run
	for n := 1; n <= repeat; n++ {
		for i := range cases {
			c := &cases[i]
			ms := models
			if len(ms) == 0 {
				m := c.Model
				if m == "" {
					m = def
				}
				ms = []string{m}
			}
			for _, m := range ms {
				dir := c.ID
				if len(models) > 1 {
					dir += "/" + pathSafe(m)
				}
				if repeat > 1 {
					dir += "/run-" + strconv.Itoa(n)
				}
				runs = append(runs, Run{Case: c, Model: m, N: n, Seq: len(runs), Dir: dir})
			}
		}
	}
	return runs
}

// pathSafe turns a model name such as "Qwen/Qwen3-32B" into one directory
// name.
func pathSafe(s string) string {
	s = strings.Map(func(r rune) rune {
		if r == '/' || r == '\\' || r == ':' || unicode.IsControl(r) || unicode.IsSpace(r) {
			return '_'
		}
		return r
	}, s)
	if s == "." || s == ".." || s == "" {
		s = "_" + s
	}
	return s
}

// Outcome is what running a case produced, before it is judged.
type Outcome struct {
	ConversationID string
	Answer         string
	// StopReason is the agent's: answered, max_steps, error or cancelled.
	StopReason string
	Steps      int
	Usage      llm.Usage
	Files      []File
	// ToolCalls counts the code the model ran.
	ToolCalls int
	// FollowUps are the outcomes of the case's follow-ups that were asked,
	// in order; Steps and Usage above count every turn.
	FollowUps []Outcome
	// Err is set when the run could not finish: the model server failed,
	// the sandbox did, or the run was cancelled.
	Err error
}

// File is a file the run's code saved, as `ask --json` lists it; Path is
// empty unless it was downloaded (--artifacts).
type File struct {
	Path        string `json:"path,omitempty"`
	SandboxPath string `json:"sandbox_path"`
	Bytes       int64  `json:"bytes"`
	// Data is what the file holds, for the expectations that read it back
	// (Case.WantsData); nil when not read.
	Data []byte `json:"-"`
}

// Status is a run's verdict.
type Status string

// The verdicts. A failed run answered but missed an expectation (or reached
// the step cap); an errored one could not finish.
const (
	Passed  Status = "passed"
	Failed  Status = "failed"
	Errored Status = "errored"
)

// Result is one finished run, as written to the results file: one JSON
// object per line.
type Result struct {
	ID             string    `json:"id"`
	Model          string    `json:"model"`
	Run            int       `json:"run"`
	Status         Status    `json:"status"`
	Answer         string    `json:"answer"`
	Reasons        []string  `json:"reasons"`
	StopReason     string    `json:"stop_reason"`
	Steps          int       `json:"steps"`
	Usage          llm.Usage `json:"usage"`
	DurationMS     int64     `json:"duration_ms"`
	Files          []File    `json:"files"`
	ConversationID string    `json:"conversation_id"`
	Line           int       `json:"line"`
	Skill          string    `json:"skill,omitempty"`
	Level          string    `json:"level,omitempty"`
	// FollowUps are the answers to the case's follow-ups, in order.
	FollowUps []string `json:"followup_answers,omitempty"`

	seq int
}

// Duration is the run's wall time.
func (r Result) Duration() time.Duration { return time.Duration(r.DurationMS) * time.Millisecond }

// Judge turns a finished run's outcome into its result.
func Judge(run Run, o Outcome, took time.Duration) Result {
	r := Result{
		ID: run.Case.ID, Model: run.Model, Run: run.N, Answer: o.Answer, StopReason: o.StopReason,
		Steps: o.Steps, Usage: o.Usage, DurationMS: took.Milliseconds(), Files: o.Files,
		ConversationID: o.ConversationID, Line: run.Case.Line, Skill: run.Case.Skill, Level: run.Case.Level, seq: run.Seq,
		Reasons: []string{},
	}
	if r.Files == nil {
		r.Files = []File{}
	}
	switch {
	case o.Err != nil:
		r.Status, r.Reasons = Errored, []string{o.Err.Error()}
		if r.StopReason == "" || r.StopReason == "answered" {
			r.StopReason = "error"
		}
	case o.StopReason != "answered" && o.StopReason != "":
		r.Status, r.Reasons = Failed, []string{noAnswer(o)}
	case strings.TrimSpace(o.Answer) == "":
		r.Status, r.Reasons = Failed, []string{"the answer is empty"}
	default:
		reasons := run.Case.Expect.Check(run.Case.Question, o)
		for i, f := range run.Case.FollowUps {
			reasons = append(reasons, judgeFollowUp(i, f, o.FollowUps)...)
		}
		for _, f := range o.FollowUps {
			r.FollowUps = append(r.FollowUps, f.Answer)
			r.Files = append(r.Files, f.Files...)
		}
		if len(reasons) > 0 {
			r.Status, r.Reasons = Failed, reasons
		} else {
			r.Status = Passed
		}
	}
	return r
}

// judgeFollowUp says why the i-th follow-up's turn, of those asked, does
// not meet its expectations; the reasons name the turn.
func judgeFollowUp(i int, f FollowUp, asked []Outcome) []string {
	prefix := fmt.Sprintf("follow-up %d: ", i+1)
	if i >= len(asked) {
		return []string{prefix + "not asked: an earlier turn did not answer"}
	}
	o := asked[i]
	var reasons []string
	switch {
	case o.StopReason != "answered" && o.StopReason != "":
		reasons = []string{noAnswer(o)}
	case strings.TrimSpace(o.Answer) == "":
		reasons = []string{"the answer is empty"}
	default:
		reasons = f.Expect.Check(f.Question, o)
	}
	for j := range reasons {
		reasons[j] = prefix + reasons[j]
	}
	return reasons
}

// noAnswer says why a turn ended without an answer.
func noAnswer(o Outcome) string {
	switch o.StopReason {
	case "max_steps":
		return fmt.Sprintf("no answer within %d steps: the step cap was reached", o.Steps)
	case "token_budget":
		return fmt.Sprintf("no answer after %d steps: the token budget (max_tokens) was spent", o.Steps)
	case "time_budget":
		return fmt.Sprintf("no answer after %d steps: the time budget (max_time) ran out", o.Steps)
	}
	return fmt.Sprintf("no answer after %d steps (stop reason %s)", o.Steps, o.StopReason)
}

// Runner runs a plan's runs concurrently.
type Runner struct {
	// Jobs is how many runs go at once; at least 1.
	Jobs int
	// Exec runs one case and says what happened. It must return soon after
	// ctx is done. It is called from several goroutines at once.
	Exec func(ctx context.Context, run Run) Outcome
	// Started and Done, when set, are told when a run starts and when it has
	// finished and been judged. Calls to them never overlap, so they need no
	// locking of their own.
	Started func(Run)
	Done    func(Result)
}

// Run runs every run until all have finished or ctx is done, and returns the
// results of those that finished, in plan order. A run that fails, even by
// panicking, is an errored result; the others go on. A run cut short by ctx
// has no result.
func (r *Runner) Run(ctx context.Context, runs []Run) []Result {
	jobs := make(chan Run)
	var (
		mu      sync.Mutex // serializes Started, Done and results
		results []Result
		wg      sync.WaitGroup
	)
	for range min(max(r.Jobs, 1), len(runs)) {
		wg.Go(func() {
			for run := range jobs {
				mu.Lock()
				if r.Started != nil {
					r.Started(run)
				}
				mu.Unlock()
				start := time.Now()
				o := r.exec(ctx, run)
				took := time.Since(start)
				if o.Err != nil && ctx.Err() != nil {
					continue // cut short: not a verdict on the case
				}
				res := Judge(run, o, took)
				mu.Lock()
				results = append(results, res)
				if r.Done != nil {
					r.Done(res)
				}
				mu.Unlock()
			}
		})
	}
feed:
	for _, run := range runs {
		select {
		case jobs <- run:
		case <-ctx.Done():
			break feed
		}
	}
	close(jobs)
	wg.Wait()
	Sort(results)
	return results
}

// exec runs one case, turning a panic into an error: one broken case must
// not end the others.
func (r *Runner) exec(ctx context.Context, run Run) (o Outcome) {
	defer func() {
		if p := recover(); p != nil {
			o = Outcome{Err: fmt.Errorf("terp crashed on this case: %v", p)}
		}
	}()
	if err := ctx.Err(); err != nil {
		return Outcome{Err: err}
	}
	return r.Exec(ctx, run)
}

// Sort puts results in plan order.
func Sort(results []Result) {
	slices.SortStableFunc(results, func(a, b Result) int { return a.seq - b.seq })
}
