package llm

import (
	"bytes"
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"strconv"
	"strings"
	"syscall"
	"time"
)

const (
	defaultRetries    = 4
	defaultMaxBackoff = 30 * time.Second
	firstBackoff      = 500 * time.Millisecond
)

// retryTransport retries requests that failed before any reply started:
// connection errors, and the statuses that mean "try again later". It wraps
// the transport rather than the client because it needs the Retry-After
// header, which no error value carries. Once a 2xx reply is handed on, the
// transport is done with it: a reply that breaks off later is asked for
// again by Client.Complete, from the same budget of retries.
type retryTransport struct {
	base       http.RoundTripper
	maxRetries int
	maxBackoff time.Duration
	// firstBackoff is the delay before the first retry; it doubles on each.
	firstBackoff time.Duration
	// wait sleeps for d or until ctx is done, and jitter returns a random
	// duration in [0, d); tests replace both to run fast and predictably.
	wait   func(ctx context.Context, d time.Duration) error
	jitter func(d time.Duration) time.Duration
	now    func() time.Time
}

func newRetryTransport(base http.RoundTripper, retries int, maxBackoff time.Duration) *retryTransport {
	if base == nil {
		base = http.DefaultTransport
	}
	switch {
	case retries == 0:
		retries = defaultRetries
	case retries < 0:
		retries = 0
	}
	if maxBackoff <= 0 {
		maxBackoff = defaultMaxBackoff
	}
	return &retryTransport{
		base:         base,
		maxRetries:   retries,
		maxBackoff:   maxBackoff,
		firstBackoff: firstBackoff,
		wait:         sleep,
		jitter: func(d time.Duration) time.Duration {
			if d <= 0 {
				return 0
			}
			return rand.N(d)
		},
		now: time.Now,
	}
}

// RoundTrip sends req, again after a delay while it fails transiently.
func (t *retryTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if t.maxRetries == 0 {
		return t.base.RoundTrip(req)
	}
	getBody, err := replayable(req)
	if err != nil {
		return nil, err
	}
	ctx := req.Context()
	// The retries of one Complete call share one budget with the retries
	// of its broken replies; a request sent some other way has its own.
	b, _ := ctx.Value(budgetKey{}).(*budget)
	if b == nil {
		b = new(budget)
	}
	for {
		r := req
		if getBody != nil {
			r = req.Clone(ctx)
			if r.Body, err = getBody(); err != nil {
				return nil, err
			}
		}
		resp, err := t.base.RoundTrip(r)
		if b.spent >= t.maxRetries || ctx.Err() != nil {
			return resp, err
		}
		d, again := t.delay(b.spent, resp, err)
		if !again {
			return resp, err
		}
		b.spent++
		if resp != nil {
			drain(resp.Body)
		}
		if err := t.wait(ctx, d); err != nil {
			return nil, err
		}
	}
}

// replayable returns a function that gives a fresh copy of req's body for
// each attempt, buffering the body when the request cannot replay it itself.
// It closes the original body, which no attempt sends.
func replayable(req *http.Request) (func() (io.ReadCloser, error), error) {
	if req.Body == nil || req.Body == http.NoBody {
		return nil, nil
	}
	defer req.Body.Close()
	if req.GetBody != nil {
		return req.GetBody, nil
	}
	b, err := io.ReadAll(req.Body)
	if err != nil {
		return nil, err
	}
	return func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b)), nil }, nil
}

// delay says whether the outcome of an attempt is worth another, and after
// how long.
func (t *retryTransport) delay(attempt int, resp *http.Response, err error) (time.Duration, bool) {
	if err != nil {
		return t.backoff(attempt), transient(err)
	}
	switch resp.StatusCode {
	case http.StatusTooManyRequests, http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
	case http.StatusInternalServerError:
		// A 500 is often a passing failure (a worker restarting, an
		// out-of-memory batch), but servers also send it for problems no
		// retry fixes, such as llama.cpp's missing --jinja: look first.
		if permanent(resp) {
			return 0, false
		}
	default:
		return 0, false
	}
	if d, ok := retryAfter(resp.Header.Get("Retry-After"), t.now()); ok {
		return min(d, t.maxBackoff), true
	}
	// Ollama's "server busy" and llama.cpp's "Loading model" 503s carry no
	// Retry-After: back off as for any other.
	return t.backoff(attempt), true
}

// permanent reports whether a 500 reply names a problem that sending the
// request again cannot fix. It reads the start of the body and puts it back.
func permanent(resp *http.Response) bool {
	head, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	resp.Body = struct {
		io.Reader
		io.Closer
	}{io.MultiReader(bytes.NewReader(head), resp.Body), resp.Body}
	if err != nil {
		return true
	}
	msg := strings.ToLower(string(head))
	for _, subs := range [][]string{toolsVLLM, toolsLlama, toolsOllama, toolsGeneric, contextFull, modelMissing} {
		if containsAny(msg, subs) {
			return true
		}
	}
	return false
}

// backoff doubles the delay on each attempt up to maxBackoff, and randomizes
// its upper half so that clients that failed together do not retry together.
func (t *retryTransport) backoff(attempt int) time.Duration {
	d := t.maxBackoff
	if attempt < 32 {
		if e := t.firstBackoff << attempt; e > 0 && e < d {
			d = e
		}
	}
	half := d / 2
	return half + t.jitter(d-half)
}

// retryAfter reads a Retry-After value, in seconds or as an HTTP date.
func retryAfter(v string, now time.Time) (time.Duration, bool) {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0, false
	}
	if secs, err := strconv.ParseFloat(v, 64); err == nil {
		secs = min(max(secs, 0), 24*60*60)
		return time.Duration(secs * float64(time.Second)), true
	}
	if at, err := http.ParseTime(v); err == nil {
		return max(at.Sub(now), 0), true
	}
	return 0, false
}

// transient reports whether a request that got no reply may succeed if
// sent again: refused or dropped connections and timeouts, but not an
// unknown host or a bad certificate, which waiting does not fix.
func transient(err error) bool {
	var dns *net.DNSError
	if errors.As(err, &dns) {
		return dns.IsTimeout || dns.IsTemporary
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return true
	}
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "dial" {
		return true
	}
	return errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) ||
		errors.Is(err, syscall.ECONNABORTED) || errors.Is(err, syscall.EPIPE) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF)
}

// drain reads a little of a body before closing it, so the connection can be
// reused for the retry.
func drain(body io.ReadCloser) {
	_, _ = io.Copy(io.Discard, io.LimitReader(body, 64<<10))
	_ = body.Close()
}

// sleep waits for d, or until ctx is done.
func sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-timer.C:
		return nil
	}
}
