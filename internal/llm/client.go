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
)

// Config says which server to talk to and how patiently.
type Config struct {
	// BaseURL is the API root, e.g. http://127.0.0.1:11434/v1.
	BaseURL string
	// APIKey may be empty: local servers need none.
	APIKey string
	// APIKeyEnv names the environment variable the key came from (e.g.
	// "GPUOS_API_KEY"); it is used only to tell the user what to set.
	APIKeyEnv string
	// Stream asks for the reply as a stream, so text reaches onDelta as it
	// is generated.
	Stream bool
	// MaxRetries bounds retries of transient failures: 0 means 4, a
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
// nil) receives content and reasoning text as it streams; with Stream unset,
// or when the server ignores it, onDelta gets each non-empty part once at the
// end, reasoning first. onDelta runs on the caller's goroutine and slows the
// read while it runs.
//
// Content never contains <think> blocks; Reasoning gathers
// reasoning_content, reasoning and <think> text. One case cannot be undone in
// the deltas: a stream that begins inside a think block whose <think> was
// part of the prompt (Qwen3 thinking models) shows its reasoning as content
// until the </think> arrives; the Response has it right.
//
// Errors are *Error values, except when ctx ends, which returns ctx.Err(),
// and when a tool's Parameters are not valid JSON, a bug in the caller.
func (c *Client) Complete(ctx context.Context, req Request, onDelta func(Delta)) (Response, error) {
	body, err := json.Marshal(c.wireRequest(req))
	if err == nil && sendsReasoning(req.Messages) {
		body, err = withReasoning(body)
	}
	if err != nil {
		return Response{}, fmt.Errorf("encode chat request: %w", err)
	}
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
		return Response{}, c.classify(req.Model, &serverError{status: resp.StatusCode, message: msg, body: string(raw)})
	}

	r, err := readReply(resp.Body, onDelta, newRecovery(req))
	if err != nil {
		return Response{}, c.replyError(ctx, req.Model, err)
	}
	return r, nil
}

// readReply reads a successful reply, streamed or whole, and recovers the
// tool calls written in its text when rec is set.
func readReply(body io.Reader, onDelta func(Delta), rec *recovery) (Response, error) {
	br := bufio.NewReaderSize(body, 64<<10)
	var a assembler
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

// replyError turns a failure while reading a reply into an Error.
func (c *Client) replyError(ctx context.Context, model string, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	var se *serverError
	if errors.As(err, &se) {
		return c.classify(model, se)
	}
	return c.badResponse(err)
}
