package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/terpdev/terp/internal/llm"
)

// How the loop keeps a conversation inside the model's context window.
//
// terp cannot tokenize for every model, so it estimates: about four
// characters per token, corrected by what the server reports. Each reply's
// usage says how many tokens the request really took; the ratio to terp's
// estimate of the same request scales later estimates.
//
// The window comes from the user (context_window, or a model profile in the
// config file), else from the server (/v1/models, asked once the
// conversation is large enough to matter), else from a built-in profile.
// Servers that report nothing teach it in two other ways: a context-length
// error often names the window, and Ollama, which cuts an overlong prompt
// without an error, gives itself away by counting far fewer prompt tokens
// than were sent.
//
// When a request would not fit, the names of files old steps saved go
// first (a few stay, with the count of all: code can list them again);
// then old tool outputs are shortened, oldest first, in their middle, with
// a note saying how much was removed;
// then whole earlier questions with their steps are dropped; the newest
// outputs are cut last. A context-length error from the server is answered
// the same way, and the request is sent once more.

// charsPerToken is the first guess for text and code in the tokenizers of
// today's open models.
const charsPerToken = 4

// askAbove is the size, in estimated tokens, from which the server is asked
// for the window: below it, no model's window matters.
const askAbove = 2048

// window is what the loop knows of the model's context.
type window struct {
	tokens int    // the window; 0 when unknown
	from   string // where it was learned, for notices
	// asked is set once the server was asked; guess is the built-in
	// profile's window, used when the server does not say.
	asked bool
	guess int
	// ratio is tokens the server counts per token terp estimates; 0 means
	// not yet learned (1).
	ratio float64
}

func newWindow(cfg Config) window {
	w := window{guess: cfg.ProfileWindow}
	if cfg.ContextWindow > 0 {
		w.tokens, w.from, w.asked = cfg.ContextWindow, "configured", true
	}
	return w
}

// limit is how many tokens a request may take: the window less room for
// the reply.
func (w window) limit() int {
	reserve := min(max(w.tokens/8, 512), 4096)
	return max(w.tokens-reserve, w.tokens/2)
}

// scale turns an estimate into the server's tokens.
func (w window) scale(est int) int {
	if w.ratio == 0 {
		return est
	}
	return int(float64(est) * w.ratio)
}

// windowReporter is a model client that can say how large a model's
// context is (llm.Client, from GET /v1/models).
type windowReporter interface {
	ContextWindow(ctx context.Context, model string) (int, error)
}

// estimate is terp's guess, in tokens, of what req takes.
func estimate(req llm.Request) int {
	chars := 0
	for _, m := range req.Messages {
		chars += 16 // role and the template's markers
		if m.Written != "" {
			chars += len(m.Written)
		} else {
			chars += len(m.Content)
			for _, c := range m.ToolCalls {
				chars += len(c.Name) + len(c.Arguments) + 16
			}
		}
		chars += len(m.Reasoning)
	}
	if req.Dialect != llm.DialectText {
		for _, t := range req.Tools {
			chars += len(t.Name) + len(t.Description) + len(t.Parameters) + 32
		}
	}
	return chars / charsPerToken
}

// size is the current request's estimate, scaled to the server's tokens.
func (a *Agent) size() (est, tokens int) {
	est = estimate(a.request())
	return est, a.window.scale(est)
}

// complete asks the model for the next reply, and handles what happens at
// the edges of the context and of tool support: the conversation is
// shortened before it overflows, a context-length error is answered by
// shortening it and asking once more, a server that refuses tools gets the
// request again in text mode, and a silent truncation is reported.
func (a *Agent) complete(ctx context.Context, onDelta func(llm.Delta), send func(Event)) (llm.Response, error) {
	a.fit(ctx, send)
	retried := false
	for {
		req := a.request()
		est := estimate(req)
		a.sent = a.window.scale(est)
		reply, err := a.model.Complete(ctx, req, onDelta)
		if err == nil {
			a.learn(est, reply.Usage, send)
			a.followDialect(reply, send)
			return reply, nil
		}
		var e *llm.Error
		if !errors.As(err, &e) {
			return reply, err
		}
		switch {
		case e.Kind == llm.KindToolsUnsupported && a.refusedTools(e, send):
		case e.Kind == llm.KindContextLength && !retried && a.overflowed(e, est, send):
			retried = true
		case e.Kind == llm.KindContextLength:
			return reply, a.stillTooLong(e, est)
		default:
			return reply, err
		}
	}
}

// fit shortens the conversation when it nears the window, before it is sent.
func (a *Agent) fit(ctx context.Context, send func(Event)) {
	_, tokens := a.size()
	if a.window.tokens == 0 && !a.window.asked && tokens > askAbove {
		a.askWindow(ctx)
	}
	if a.window.tokens == 0 || tokens <= a.window.limit() {
		return
	}
	if removed := a.shrink(a.window.limit()); removed > 0 {
		a.notice(send, fmt.Sprintf("The conversation neared the model's context window (%s tokens, %s): "+
			"terp removed %s characters of older output from it.",
			commas(a.window.tokens), a.window.from, commas(removed)))
	}
}

// askWindow asks the server for the window once, and falls back to the
// built-in profile's.
func (a *Agent) askWindow(ctx context.Context) {
	a.window.asked = true
	if r, ok := a.model.(windowReporter); ok {
		ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		n, err := r.ContextWindow(ctx, a.cfg.Model)
		cancel()
		if err == nil && n > 0 {
			a.window.tokens, a.window.from = n, "reported by the server"
			return
		}
	}
	if a.window.guess > 0 {
		a.window.tokens, a.window.from = a.window.guess, "the model's profile"
	}
}

// learn compares a reply's usage with the estimate of the request: it
// corrects later estimates, or finds that the server cut the conversation.
func (a *Agent) learn(est int, u llm.Usage, send func(Event)) {
	p := u.PromptTokens
	if p <= 0 || est <= 0 {
		return
	}
	if truncated(est, p) {
		if a.window.tokens == 0 || a.window.tokens > p {
			a.window.tokens, a.window.from = p, "as much as the server kept"
		}
		a.notice(send, fmt.Sprintf("The server counted %s prompt tokens where terp sent about %s: it probably cut "+
			"the conversation to fit its context window, so the model did not see all of it (Ollama does this "+
			"silently when num_ctx is too small). terp shortens older output to fit from now on. To keep the whole "+
			"conversation, give the model a larger context (Ollama: OLLAMA_CONTEXT_LENGTH or num_ctx; then set "+
			"context_window).", commas(p), commas(est)))
		return
	}
	if p >= 256 {
		a.window.ratio = min(max(float64(p)/float64(est), 0.5), 2)
	}
}

// ollamaContexts are the num_ctx values Ollama uses by default: a prompt cut
// to fit one of them is counted as exactly that many tokens or a little less.
var ollamaContexts = []int{2048, 4096, 8192}

// truncated reports whether a server that counted p prompt tokens for a
// request terp estimated at est must have cut it. The estimate is rough, so
// only a large gap counts, or a count at a default context size that the
// request exceeds.
func truncated(est, p int) bool {
	if p < 1024 {
		return false
	}
	if float64(est) >= 1.8*float64(p) {
		return true
	}
	for _, n := range ollamaContexts {
		if p <= n && p >= n-64 && float64(est) > 1.2*float64(n) {
			return true
		}
	}
	return false
}

// overflowed answers a context-length error: it learns what the error says,
// shortens the conversation below it and reports whether the request is
// worth sending again.
func (a *Agent) overflowed(e *llm.Error, est int, send func(Event)) bool {
	if e.ContextWindow > 0 {
		a.window.tokens, a.window.from = e.ContextWindow, "as the server's error says"
	}
	if e.PromptTokens > 0 && est > 0 {
		a.window.ratio = min(max(float64(e.PromptTokens)/float64(est), 0.5), 2)
	}
	tokens := a.window.scale(est)
	limit := tokens * 2 / 3
	if a.window.tokens > 0 {
		limit = min(a.window.limit(), tokens*9/10)
	}
	removed := a.shrink(limit)
	if removed == 0 {
		return false
	}
	a.notice(send, fmt.Sprintf("The conversation was too long for the model's context window%s: terp removed %s "+
		"characters of older output and sent it again.", windowNote(e.ContextWindow), commas(removed)))
	return true
}

// stillTooLong is the error for a conversation that overflowed again, or
// could not be shortened.
func (a *Agent) stillTooLong(e *llm.Error, est int) error {
	return &llm.Error{
		Kind: llm.KindContextLength, Status: e.Status, Err: e.Err,
		ContextWindow: e.ContextWindow, PromptTokens: e.PromptTokens,
		Msg: fmt.Sprintf("The conversation does not fit the context window of %q%s even after terp shortened "+
			"older output (it is about %s tokens). Start a new conversation, or give the model a larger context "+
			"on the server (vLLM --max-model-len, llama.cpp -c, Ollama num_ctx).",
			a.cfg.Model, windowNote(e.ContextWindow), commas(a.window.scale(est))),
	}
}

func windowNote(n int) string {
	if n <= 0 {
		return ""
	}
	return " (" + commas(n) + " tokens)"
}

// Shortening.

// Old outputs are cut to these many characters, in turn, until the
// conversation fits.
var keepLevels = []int{2000, 500, 0}

// shrink shortens the history until it fits limit tokens, or nothing more
// can go. It returns how many characters it removed.
func (a *Agent) shrink(limit int) int {
	fits := func() bool { _, t := a.size(); return t <= limit }
	removed := 0
	newest := a.newestStep()
	for i := 0; i < newest; i++ {
		if a.history[i].Role == llm.RoleTool {
			removed += a.cutFiles(i)
			if fits() {
				return removed
			}
		}
	}
	for _, keep := range keepLevels {
		for i := 0; i < newest; i++ {
			if a.history[i].Role == llm.RoleTool {
				removed += a.cut(i, keep)
				if fits() {
					return removed
				}
			}
		}
	}
	for {
		n, ok := a.dropOldestTurn()
		removed += n
		if !ok || fits() {
			break
		}
	}
	if fits() {
		return removed
	}
	newest = a.newestStep()
	for i := newest; i < len(a.history); i++ {
		if a.history[i].Role == llm.RoleTool {
			removed += a.cutFiles(i)
			if fits() {
				return removed
			}
		}
	}
	for _, keep := range keepLevels[:2] {
		for i := newest; i < len(a.history); i++ {
			if a.history[i].Role == llm.RoleTool {
				removed += a.cut(i, keep)
				if fits() {
					return removed
				}
			}
		}
	}
	return removed
}

// newestStep is the index of the last assistant message that called a tool:
// the outputs after it are the ones the model is about to read, cut last.
func (a *Agent) newestStep() int {
	for i := len(a.history) - 1; i >= 0; i-- {
		if m := a.history[i]; m.Role == llm.RoleAssistant && len(m.ToolCalls) > 0 {
			return i
		}
	}
	return len(a.history)
}

// cut shortens the tool output at i to keep characters and returns how many
// it removed.
func (a *Agent) cut(i, keep int) int {
	content, removed := shortenOutput(a.history[i].Content, keep)
	a.history[i].Content = content
	return removed
}

// keepFiles is how many file names a tool output keeps once the context
// fills.
const keepFiles = 5

// cutFiles shortens the list of files in the tool output at i to keepFiles
// names, and returns how many characters it removed.
func (a *Agent) cutFiles(i int) int {
	content := a.history[i].Content
	res, ok := decodeResult(content)
	if !ok || len(res.Files) <= keepFiles {
		return 0
	}
	all := max(res.FilesSaved, len(res.Files))
	res.Files = res.Files[:keepFiles]
	res.FilesSaved = all
	res.FilesNote = filesNote(all, keepFiles) + " The other names were removed to fit the context window."
	short := mustJSON(res)
	if len(short) >= len(content) {
		return 0
	}
	a.history[i].Content = short
	return len(content) - len(short)
}

// decodeResult reads a tool message as a toolResult: a message that is one
// starts with its exit code, which a toolError never has.
func decodeResult(content string) (toolResult, bool) {
	var res toolResult
	if !strings.HasPrefix(content, `{"exit_code":`) || json.Unmarshal([]byte(content), &res) != nil {
		return res, false
	}
	return res, true
}

// dropOldestTurn removes the earliest question with all its steps, never
// the current one, and returns the characters removed.
func (a *Agent) dropOldestTurn() (int, bool) {
	start := 1
	if len(a.history) == 0 || a.history[0].Role != llm.RoleSystem {
		start = 0
	}
	end := -1
	for i := start + 1; i <= a.turnStart && i < len(a.history); i++ {
		prev := a.history[i-1]
		if i == a.turnStart || (a.history[i].Role == llm.RoleUser && prev.Role == llm.RoleAssistant && len(prev.ToolCalls) == 0) {
			end = i
			break
		}
	}
	if end < 0 || start >= end {
		return 0, false
	}
	n := 0
	for _, m := range a.history[start:end] {
		n += len(m.Content) + len(m.Written)
		for _, c := range m.ToolCalls {
			n += len(c.Arguments)
		}
	}
	a.history = append(a.history[:start], a.history[end:]...)
	a.turnStart -= end - start
	if first := &a.history[start]; !strings.HasPrefix(first.Content, droppedNote) {
		first.Content = droppedNote + "\n\n" + first.Content
	}
	return n, true
}

// droppedNote starts the first question left after earlier ones were
// removed.
const droppedNote = "[terp: earlier questions and answers of this conversation were removed to fit the context window]"

// elision is the note left where output was cut.
var elision = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`\n?\[terp: ([0-9,]+) characters of this output were removed to fit the context window\]\n?`)
})

// shortenOutput cuts a tool message to about keep characters of output.
// The result JSON keeps its shape, its stdout and stderr cut in the middle;
// anything else is cut as text.
func shortenOutput(content string, keep int) (string, int) {
	if res, ok := decodeResult(content); ok {
		outKeep, errKeep := keep, keep
		if res.Stdout != "" && res.Stderr != "" {
			outKeep, errKeep = keep*3/4, keep/4
		}
		var r1, r2 int
		res.Stdout, r1 = elide(res.Stdout, outKeep)
		res.Stderr, r2 = elide(res.Stderr, errKeep)
		if r1+r2 == 0 {
			return content, 0
		}
		return mustJSON(res), r1 + r2
	}
	var e toolError
	if json.Unmarshal([]byte(content), &e) == nil && e.Error != "" {
		return content, 0 // short, and the model needs it whole
	}
	return elide(content, keep)
}

// elide keeps keep characters of s, half from its start and half from its
// end, with a note in between that says how many were removed in all. Text
// cut before is cut further, its note updated.
func elide(s string, keep int) (string, int) {
	orig, before := s, 0
	if m := elision().FindStringSubmatchIndex(s); m != nil {
		before, _ = strconv.Atoi(strings.ReplaceAll(s[m[2]:m[3]], ",", ""))
		s = s[:m[0]] + s[m[1]:]
	}
	r := []rune(s)
	if len(r) <= keep {
		return orig, 0
	}
	cut := len(r) - keep
	head := keep / 2
	return string(r[:head]) + note(before+cut) + string(r[len(r)-(keep-head):]), cut
}

func note(n int) string {
	return "\n[terp: " + commas(n) + " characters of this output were removed to fit the context window]\n"
}

// commas writes n with thousands separators, as people read counts.
func commas(n int) string {
	s := strconv.Itoa(n)
	if n < 0 {
		return "-" + commas(-n)
	}
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}
