package llm

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
	"unicode/utf8"
)

// Config says which server to talk to and how patiently.
type Config struct {
	// BaseURL is the API root, e.g. http://127.0.0.1:11434/v1.
	BaseURL string
	// APIKey may be empty: local servers need none.
	APIKey string
	// APIKeyEnv names the environment variable a key is expected in
	// besides TERP_API_KEY (e.g. "GPUOS_API_KEY"); it is used only to tell
	// the user what to set.
	APIKeyEnv string
	// APIKeySource says where APIKey came from ("TERP_API_KEY", a config
	// file), so that the message for a rejected key sends the user to the
	// right place; when empty, it names the places a key may come from.
	APIKeySource string
	// Stream asks for the reply as a stream, so text reaches onDelta as it
	// is generated.
	Stream bool
	// MaxRetries bounds the retries of one Complete call, of transient
	// failures and of replies that broke off together: 0 means 4, a
	// negative value means none.
	MaxRetries int
	// MaxBackoff caps the delay between retries, including one a server
	// asks for with Retry-After: 0 means 30s.
	MaxBackoff time.Duration
	// HTTPClient is optional. Its Transport is wrapped to add retries, not
	// replaced; the client itself is copied, not modified.
	HTTPClient *http.Client
}

// Client sends chat completion requests to one OpenAI-compatible server. It
// is safe for concurrent use.
type Client struct {
	cfg      Config
	base     string
	endpoint string
	http     *http.Client
	retry    *retryTransport
}

// New returns a Client for cfg. It does not contact the server.
func New(cfg Config) *Client {
	hc := new(http.Client)
	if cfg.HTTPClient != nil {
		*hc = *cfg.HTTPClient
	}
	rt := newRetryTransport(hc.Transport, cfg.MaxRetries, cfg.MaxBackoff)
	hc.Transport = rt
	base := strings.TrimRight(cfg.BaseURL, "/")
	return &Client{
		cfg:      cfg,
		base:     base,
		endpoint: base + "/chat/completions",
		http:     hc,
		retry:    rt,
	}
}

// Complete sends req and returns the whole normalized reply. onDelta (may be
// nil) receives content and reasoning text as it streams, and the pieces of
// the tool calls' arguments (DeltaArguments); with Stream unset, or when the
// server ignores it, onDelta gets each non-empty text once at the end,
// reasoning first, and no arguments. onDelta runs on the caller's goroutine
// and slows the read while it runs.
//
// Content never contains <think> blocks; Reasoning gathers
// reasoning_content, reasoning and <think> text. One case cannot be undone in
// the deltas: a stream that begins inside a think block whose <think> was
// part of the prompt (Qwen3 thinking models) shows its reasoning as content
// until the </think> arrives; the Response has it right.
//
// A reply that breaks off before the model finished is asked for again, and
// onDelta then receives only the text the broken reply did not already show
// (see shownText).
//
// Errors are *Error values, except when ctx ends, which returns ctx.Err(),
// and when a tool's Parameters are not valid JSON, a bug in the caller.
func (c *Client) Complete(ctx context.Context, req Request, onDelta func(Delta)) (Response, error) {
	body, err := json.Marshal(c.wireRequest(req))
	if err == nil && sendsReasoning(req.Messages) {
		body, err = withReasoning(body)
	}
	if err == nil {
		body, err = withSampling(body, req.Sampling)
	}
	if err != nil {
		return Response{}, fmt.Errorf("encode chat request: %w", err)
	}
	b := new(budget)
	ctx = context.WithValue(ctx, budgetKey{}, b)
	shown := &shownText{onDelta: onDelta}
	for {
		r, err := c.attempt(ctx, req, body, shown.filter())
		if err == nil {
			shown.keepCallIDs(&r)
			return r, nil
		}
		if ctx.Err() != nil {
			return Response{}, ctx.Err()
		}
		var broken *brokenError
		if !errors.As(err, &broken) || b.spent >= c.retry.maxRetries {
			return Response{}, c.finalError(req.Model, err, b.spent)
		}
		// A reply that broke off before the model finished is asked for
		// again, like a 502: no tool ran on its account, and the text it
		// already showed is not shown twice (see shownText).
		d := c.retry.backoff(b.spent)
		b.spent++
		if err := c.retry.wait(ctx, d); err != nil {
			return Response{}, err
		}
	}
}

// attempt sends the request once (the transport may retry it before a
// reply starts) and reads the reply. Its errors are the raw causes; Complete
// turns them into Errors.
func (c *Client) attempt(ctx context.Context, req Request, body []byte, onDelta func(Delta)) (Response, error) {
	hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, c.endpoint, bytes.NewReader(body))
	if err != nil {
		return Response{}, c.unreachable(err)
	}
	hreq.Header.Set("Content-Type", "application/json")
	hreq.Header.Set("User-Agent", "terp")
	if c.cfg.Stream {
		hreq.Header.Set("Accept", "text/event-stream")
	} else {
		hreq.Header.Set("Accept", "application/json")
	}
	if c.cfg.APIKey != "" {
		hreq.Header.Set("Authorization", "Bearer "+c.cfg.APIKey)
	}

	resp, err := c.http.Do(hreq)
	if err != nil {
		if ctx.Err() != nil {
			return Response{}, ctx.Err()
		}
		return Response{}, c.unreachable(err)
	}
	defer resp.Body.Close()

	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		raw, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		msg, _ := errorMessage(raw)
		if msg == "" {
			msg = resp.Status
		}
		return Response{}, &serverError{status: resp.StatusCode, message: msg, body: string(raw)}
	}
	return readReply(resp.Body, onDelta, req)
}

// budget counts the retries one Complete call has spent, both the
// transport's (a failed request sent again) and Complete's (a reply that
// broke off asked for again), so that together they stay within MaxRetries
// and back off as one sequence.
type budget struct{ spent int }

// budgetKey carries a *budget in a request's context to the transport,
// which sees nothing else of the call it serves.
type budgetKey struct{}

// shownText remembers the text a call has passed to onDelta, so that when a
// broken reply is asked for again the new reply's deltas skip what the
// caller has already shown. The agent and the TUI append deltas to what
// they show and have no way to take text back. A server sends the same text
// again for the same request at temperature 0 or with a seed; when the new
// reply differs, its deltas go on from where it first differs, and the
// Response (and the agent's Answer event) carries the new reply whole, as it
// does when a slow consumer dropped deltas.
type shownText struct {
	onDelta func(Delta)
	// shown is what was shown of each kind, indexed by DeltaKind.
	shown [2]strings.Builder
	// calls are the calls whose arguments were shown, by their index in
	// the reply: a new attempt's call at the same index, of the same name,
	// is shown as the same call (its id, what was shown of its arguments
	// not again), so that a caller that streams a call's code shows it
	// once.
	calls map[int]*shownCall
}

// shownCall is a call as deltas showed it.
type shownCall struct {
	id, name string
	args     strings.Builder
}

// keepCallIDs gives r's calls the ids their arguments were shown under,
// when an earlier attempt began them: the caller knows them by those.
func (s *shownText) keepCallIDs(r *Response) {
	for i := range r.ToolCalls {
		if c := s.calls[i]; c != nil && c.name == r.ToolCalls[i].Name {
			r.ToolCalls[i].ID = c.id
		}
	}
}

// filter returns the onDelta for one attempt: nil when the caller gave none,
// else one that records what it shows and drops the part of each kind of
// text that an earlier attempt showed already.
func (s *shownText) filter() func(Delta) {
	if s.onDelta == nil {
		return nil
	}
	// at is how far into the text shown of each kind this attempt has
	// come while it repeats it; -1 once it differs. callAt is the same for
	// each call's arguments, by index.
	var at [2]int
	callAt := map[int]int{}
	return func(d Delta) {
		if d.Kind == DeltaArguments {
			s.showArguments(d, callAt)
			return
		}
		k := min(int(d.Kind), 1)
		shown, text := &s.shown[k], d.Text
		if at[k] >= 0 && at[k] < shown.Len() {
			old := shown.String()[at[k]:]
			n := 0
			for n < len(text) && n < len(old) && text[n] == old[n] {
				n++
			}
			switch {
			case n == len(text):
				at[k] += n
				return
			case n == len(old):
				at[k] += n
			default:
				for n > 0 && !utf8.RuneStart(text[n]) {
					n--
				}
				at[k] = -1
			}
			text = text[n:]
		}
		if at[k] >= 0 {
			at[k] += len(text)
		}
		shown.WriteString(text)
		s.onDelta(Delta{Kind: d.Kind, Text: text})
	}
}

// showArguments shows a piece of a call's arguments, as the call an earlier
// attempt began at its index when it has the same name: under that call's
// id, without what was shown of it already. A call whose arguments differ
// from what was shown goes on from where they differ; the Response's call
// is the whole of it.
func (s *shownText) showArguments(d Delta, callAt map[int]int) {
	if s.calls == nil {
		s.calls = map[int]*shownCall{}
	}
	c := s.calls[d.Index]
	if c == nil || (c.name != d.Name && d.Name != "") {
		c = &shownCall{id: d.ID, name: d.Name}
		s.calls[d.Index] = c
		callAt[d.Index] = -1
	}
	if c.name == "" {
		c.name = d.Name // a name that came after the first piece
	}
	d.ID, d.Name = c.id, c.name
	text := d.Text
	if at, ok := callAt[d.Index]; !ok || at >= 0 {
		old := c.args.String()[min(at, c.args.Len()):]
		n := 0
		for n < len(text) && n < len(old) && text[n] == old[n] {
			n++
		}
		switch {
		case n == len(text):
			callAt[d.Index] = at + n
			return
		case n == len(old):
			callAt[d.Index] = at + n
		default:
			callAt[d.Index] = -1
		}
		text = text[n:]
	}
	c.args.WriteString(text)
	d.Text = text
	s.onDelta(d)
}

// readReply reads a successful reply to req, streamed or whole, normalizes
// its calls against the tools req offers, and recovers the calls written in
// its text when req's dialect wants them.
func readReply(body io.Reader, onDelta func(Delta), req Request) (Response, error) {
	br := bufio.NewReaderSize(body, 64<<10)
	rec := newRecovery(req)
	a := assembler{offer: newOffer(req), used: callIDs(req.Messages)}
	if isWhole(br) {
		if err := readWhole(br, &a); err != nil {
			return Response{}, err
		}
		r := a.response()
		rec.apply(&r)
		if onDelta != nil {
			if r.Reasoning != "" {
				onDelta(Delta{Kind: DeltaReasoning, Text: r.Reasoning})
			}
			if r.Content != "" {
				onDelta(Delta{Kind: DeltaContent, Text: r.Content})
			}
		}
		return r, nil
	}
	a.onDelta = onDelta
	if rec != nil && onDelta != nil {
		a.guard = newCallGuard(rec)
	}
	if err := readStream(br, &a); err != nil {
		return Response{}, err
	}
	r := a.response()
	rec.apply(&r)
	if a.guard != nil && r.CallFormat == "" {
		if held := a.guard.release(); held != "" {
			onDelta(Delta{Kind: DeltaContent, Text: held})
		}
	}
	return r, nil
}

// finalError turns the cause of a failed call into an Error, saying how
// many retries were spent on it.
func (c *Client) finalError(model string, err error, retries int) error {
	var e *Error
	if errors.As(err, &e) {
		return err
	}
	var se *serverError
	if errors.As(err, &se) {
		se.retries = retries
		return c.classify(model, se)
	}
	var broken *brokenError
	if errors.As(err, &broken) {
		broken.retries = retries
	}
	return c.badResponse(err)
}
