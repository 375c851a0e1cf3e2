package llm

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"reflect"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

const okStream = "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"ok\"},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n"

// failFirst answers the first n requests with status, header and body, then
// streams okStream.
func failFirst(n int32, status int, header map[string]string, body string) http.HandlerFunc {
	var seen atomic.Int32
	return func(w http.ResponseWriter, r *http.Request) {
		if seen.Add(1) <= n {
			for k, v := range header {
				w.Header().Set(k, v)
			}
			jsonBody(status, body)(w, r)
			return
		}
		sse(okStream)(w, r)
	}
}

func TestRetries(t *testing.T) {
	tests := []struct {
		name      string
		handler   http.HandlerFunc
		cfg       Config
		wantHits  int32
		wantWaits []time.Duration
	}{
		{
			name:      "503 then success",
			handler:   failFirst(1, 503, nil, `{"error":{"message":"Service Unavailable"}}`),
			wantHits:  2,
			wantWaits: []time.Duration{500 * time.Millisecond},
		},
		{
			name:      "Ollama busy 503 without Retry-After",
			handler:   failFirst(2, 503, nil, `{"error":"server busy, please try again.  maximum pending requests exceeded"}`),
			wantHits:  3,
			wantWaits: []time.Duration{500 * time.Millisecond, time.Second},
		},
		{
			name:      "llama.cpp 503 Loading model",
			handler:   failFirst(1, 503, nil, `{"error":{"code":503,"message":"Loading model","type":"unavailable_error"}}`),
			wantHits:  2,
			wantWaits: []time.Duration{500 * time.Millisecond},
		},
		{
			name:      "502",
			handler:   failFirst(1, 502, nil, "Bad Gateway"),
			wantHits:  2,
			wantWaits: []time.Duration{500 * time.Millisecond},
		},
		{
			name:      "429 with Retry-After in seconds",
			handler:   failFirst(1, 429, map[string]string{"Retry-After": "2"}, `{"error":{"message":"Rate limit exceeded"}}`),
			wantHits:  2,
			wantWaits: []time.Duration{2 * time.Second},
		},
		{
			name:      "Retry-After capped by MaxBackoff",
			handler:   failFirst(1, 429, map[string]string{"retry-after": "120"}, `{"error":{"message":"Rate limit exceeded"}}`),
			cfg:       Config{MaxBackoff: 5 * time.Second},
			wantHits:  2,
			wantWaits: []time.Duration{5 * time.Second},
		},
		{
			name:      "Retry-After as an HTTP date",
			handler:   failFirst(1, 503, map[string]string{"Retry-After": "Sun, 01 Mar 2026 12:00:03 GMT"}, "busy"),
			wantHits:  2,
			wantWaits: []time.Duration{3 * time.Second},
		},
		{
			name:      "backoff doubles up to MaxBackoff",
			handler:   failFirst(4, 504, nil, "Gateway Timeout"),
			cfg:       Config{MaxBackoff: 1500 * time.Millisecond},
			wantHits:  5,
			wantWaits: []time.Duration{500 * time.Millisecond, time.Second, 1500 * time.Millisecond, 1500 * time.Millisecond},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := newServer(t, tt.handler)
			cfg := tt.cfg
			cfg.Stream = true
			c, waits := newTestClient(srv.URL, cfg)
			c.retry.now = func() time.Time { return time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC) }
			// With jitter at its maximum, every backoff is exactly the
			// doubled delay.
			c.retry.jitter = func(d time.Duration) time.Duration { return d }
			got, err := c.Complete(context.Background(), Request{Model: "m"}, nil)
			if err != nil {
				t.Fatalf("Complete: %v", err)
			}
			if got.Content != "ok" {
				t.Errorf("Content = %q", got.Content)
			}
			if n := srv.hits.Load(); n != tt.wantHits {
				t.Errorf("server got %d requests, want %d", n, tt.wantHits)
			}
			if w := waits.all(); !reflect.DeepEqual(w, tt.wantWaits) {
				t.Errorf("waits = %v, want %v", w, tt.wantWaits)
			}
		})
	}
}

func TestRetriesExhausted(t *testing.T) {
	tests := []struct {
		name   string
		status int
		kind   ErrorKind
		subs   []string
	}{
		{"429", 429, KindRateLimited, []string{"rate limiting", "after 4 retries", "slow down"}},
		{"503", 503, KindUnavailable, []string{"busy, down or still loading", "after 4 retries", "slow down"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := newServer(t, jsonBody(tt.status, `{"error":{"message":"slow down"}}`))
			c, waits := newTestClient(srv.URL, Config{Stream: true})
			_, err := c.Complete(context.Background(), Request{Model: "m"}, nil)
			e := wantError(t, err, tt.kind, tt.subs...)
			if e.Status != tt.status {
				t.Errorf("Status = %d", e.Status)
			}
			if n := srv.hits.Load(); n != 1+defaultRetries {
				t.Errorf("server got %d requests, want %d", n, 1+defaultRetries)
			}
			if n := len(waits.all()); n != defaultRetries {
				t.Errorf("waited %d times", n)
			}
		})
	}
}

// A 500 is often passing (a worker restarting): it is retried, and the
// request succeeds when the server recovers.
func TestRetryOn500ThenSuccess(t *testing.T) {
	srv := newServer(t, failFirst(1, 500, nil, `{"error":{"message":"Internal error: tensor shape mismatch"}}`))
	c, waits := newTestClient(srv.URL, Config{Stream: true})
	if _, err := c.Complete(context.Background(), Request{Model: "m"}, nil); err != nil {
		t.Fatalf("Complete after one 500: %v", err)
	}
	if n := srv.hits.Load(); n != 2 || len(waits.all()) != 1 {
		t.Errorf("server got %d requests after %d waits, want 2 and 1", n, len(waits.all()))
	}
}

// A 500 that names a problem no retry fixes fails at once, with the advice.
func TestNoRetryOnPermanent500(t *testing.T) {
	srv := newServer(t, failFirst(1, 500, nil, `{"error":{"code":500,"message":"tools param requires --jinja flag","type":"server_error"}}`))
	c, waits := newTestClient(srv.URL, Config{Stream: true})
	_, err := c.Complete(context.Background(), Request{Model: "m"}, nil)
	wantError(t, err, KindToolsUnsupported, "--jinja")
	if n := srv.hits.Load(); n != 1 || len(waits.all()) != 0 {
		t.Errorf("server got %d requests after %d waits, want 1 and none", n, len(waits.all()))
	}
}

func TestRetriesDisabled(t *testing.T) {
	srv := newServer(t, jsonBody(503, "busy"))
	c, _ := newTestClient(srv.URL, Config{Stream: true, MaxRetries: -1})
	_, err := c.Complete(context.Background(), Request{Model: "m"}, nil)
	e := wantError(t, err, KindUnavailable)
	if n := srv.hits.Load(); n != 1 {
		t.Errorf("server got %d requests, want 1", n)
	}
	if e.Msg == "" || containsAny(e.Msg, []string{"retr"}) {
		t.Errorf("Msg %q should not talk about retries", e.Msg)
	}
}

// Each attempt sends the same body.
func TestRetryReplaysBody(t *testing.T) {
	var bodies []string
	var seen atomic.Int32
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		bodies = append(bodies, string(b))
		if seen.Add(1) == 1 {
			jsonBody(503, "busy")(w, r)
			return
		}
		sse(okStream)(w, r)
	})
	c, _ := newTestClient(srv.URL, Config{Stream: true})
	req := Request{Model: "m", Messages: []Message{{Role: RoleUser, Content: "hello"}}}
	if _, err := c.Complete(context.Background(), req, nil); err != nil {
		t.Fatal(err)
	}
	if len(bodies) != 2 || bodies[0] == "" || bodies[0] != bodies[1] {
		t.Errorf("bodies differ between attempts: %q", bodies)
	}
}

// A request whose body cannot replay itself is buffered once.
func TestRetryBuffersBody(t *testing.T) {
	var bodies []string
	var seen atomic.Int32
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		bodies = append(bodies, string(b))
		if seen.Add(1) == 1 {
			jsonBody(502, "")(w, r)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
	c, _ := newTestClient(srv.URL, Config{})
	req, _ := http.NewRequest(http.MethodPost, srv.URL+"/v1/chat/completions", io.NopCloser(strings.NewReader("payload")))
	resp, err := c.http.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if len(bodies) != 2 || bodies[0] != "payload" || bodies[1] != "payload" {
		t.Errorf("bodies = %q, want the payload twice", bodies)
	}
}

// A connection closed before any reply is retried.
func TestRetryConnectionReset(t *testing.T) {
	var seen atomic.Int32
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		if seen.Add(1) == 1 {
			conn, _, err := w.(http.Hijacker).Hijack()
			if err == nil {
				_ = conn.Close()
			}
			return
		}
		sse(okStream)(w, r)
	})
	c, waits := newTestClient(srv.URL, Config{Stream: true})
	got, err := c.Complete(context.Background(), Request{Model: "m"}, nil)
	if err != nil {
		t.Fatalf("Complete: %v", err)
	}
	if got.Content != "ok" || srv.hits.Load() != 2 || len(waits.all()) != 1 {
		t.Errorf("content %q after %d requests and %d waits, want ok after 2 and 1", got.Content, srv.hits.Load(), len(waits.all()))
	}
}

// Cancelling the context ends a backoff at once, with the context's error.
func TestCancelDuringBackoff(t *testing.T) {
	srv := newServer(t, failFirst(100, 503, map[string]string{"Retry-After": "30"}, "busy"))
	c := New(Config{BaseURL: srv.URL + "/v1", Stream: true, MaxBackoff: time.Minute})
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(20*time.Millisecond, cancel)
	start := time.Now()
	_, err := c.Complete(ctx, Request{Model: "m"}, nil)
	if !errors.Is(err, context.Canceled) {
		t.Errorf("err = %v, want context.Canceled", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("Complete returned after %v, want right after the cancel", d)
	}
	if n := srv.hits.Load(); n != 1 {
		t.Errorf("server got %d requests, want 1", n)
	}
}

func TestRetryAfter(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		in   string
		want time.Duration
		ok   bool
	}{
		{"3", 3 * time.Second, true},
		{"0.5", 500 * time.Millisecond, true},
		{"-4", 0, true},
		{"Sun, 01 Mar 2026 12:00:10 GMT", 10 * time.Second, true},
		{"Sun, 01 Mar 2026 11:00:00 GMT", 0, true},
		{"", 0, false},
		{"soon", 0, false},
	}
	for _, tt := range tests {
		got, ok := retryAfter(tt.in, now)
		if got != tt.want || ok != tt.ok {
			t.Errorf("retryAfter(%q) = %v, %v; want %v, %v", tt.in, got, ok, tt.want, tt.ok)
		}
	}
}

// brokenThen answers the first n requests with a stream that stops after
// "Hel", the connection closed without a finish_reason, then streams
// "Hello." whole.
func brokenThen(n int32) http.HandlerFunc {
	var seen atomic.Int32
	return func(w http.ResponseWriter, r *http.Request) {
		if seen.Add(1) <= n {
			w.Header().Set("Content-Type", "text/event-stream")
			_, _ = io.WriteString(w, "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hel\"},\"finish_reason\":null}]}\n\n")
			w.(http.Flusher).Flush()
			if conn, _, err := w.(http.Hijacker).Hijack(); err == nil {
				_ = conn.Close()
			}
			return
		}
		sse("data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hel\"},\"finish_reason\":null}]}\n\n"+
			"data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"lo.\"},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n")(w, r)
	}
}

// A reply that breaks off before the model finished is asked for again,
// like a 502, and the caller sees its text once: the deltas of the new
// reply skip what the broken one showed.
func TestRetryBrokenStream(t *testing.T) {
	srv := newServer(t, brokenThen(1))
	c, waits := newTestClient(srv.URL, Config{Stream: true})
	c.retry.jitter = func(d time.Duration) time.Duration { return d }
	var deltas []Delta
	got, err := c.Complete(context.Background(), Request{Model: "m"}, collect(&deltas))
	if err != nil {
		t.Fatalf("Complete: %v", err)
	}
	if got.Content != "Hello." || got.FinishReason != "stop" {
		t.Errorf("Response = %+v", got)
	}
	if n := srv.hits.Load(); n != 2 {
		t.Errorf("server got %d requests, want 2", n)
	}
	if w := waits.all(); !reflect.DeepEqual(w, []time.Duration{500 * time.Millisecond}) {
		t.Errorf("waits = %v, want one backoff of 500ms", w)
	}
	want := []Delta{{Kind: DeltaContent, Text: "Hel"}, {Kind: DeltaContent, Text: "lo."}}
	if !reflect.DeepEqual(deltas, want) {
		t.Errorf("deltas = %+v, want %+v: nothing shown twice", deltas, want)
	}
}

// A new reply that differs from the broken one goes on from where it first
// differs; the Response is the new reply alone.
func TestRetryBrokenStreamDiffers(t *testing.T) {
	var seen atomic.Int32
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		if seen.Add(1) == 1 {
			brokenThen(1)(w, r)
			return
		}
		sse("data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Help\"},\"finish_reason\":\"stop\"}]}\n\n")(w, r)
	})
	c, _ := newTestClient(srv.URL, Config{Stream: true})
	var deltas []Delta
	got, err := c.Complete(context.Background(), Request{Model: "m"}, collect(&deltas))
	if err != nil || got.Content != "Help" {
		t.Fatalf("Complete = %q, %v; want Help", got.Content, err)
	}
	want := []Delta{{Kind: DeltaContent, Text: "Hel"}, {Kind: DeltaContent, Text: "p"}}
	if !reflect.DeepEqual(deltas, want) {
		t.Errorf("deltas = %+v, want %+v", deltas, want)
	}
}

// Retries of failed requests and of broken replies come out of one budget
// and one backoff sequence.
func TestRetryBudgetShared(t *testing.T) {
	var seen atomic.Int32
	broken := brokenThen(2)
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		if seen.Add(1) <= 2 {
			jsonBody(503, "busy")(w, r)
			return
		}
		broken(w, r)
	})
	c, waits := newTestClient(srv.URL, Config{Stream: true})
	c.retry.jitter = func(d time.Duration) time.Duration { return d }
	got, err := c.Complete(context.Background(), Request{Model: "m"}, nil)
	if err != nil || got.Content != "Hello." {
		t.Fatalf("Complete = %q, %v", got.Content, err)
	}
	if n := srv.hits.Load(); n != 5 {
		t.Errorf("server got %d requests, want 5", n)
	}
	wantWaits := []time.Duration{500 * time.Millisecond, time.Second, 2 * time.Second, 4 * time.Second}
	if w := waits.all(); !reflect.DeepEqual(w, wantWaits) {
		t.Errorf("waits = %v, want %v", w, wantWaits)
	}

	// One more failure than the budget holds: the broken reply is the
	// error, and it says the retries were spent.
	seen.Store(0)
	srv2 := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		if seen.Add(1) <= 2 {
			jsonBody(503, "busy")(w, r)
			return
		}
		brokenThen(100)(w, r)
	})
	c2, _ := newTestClient(srv2.URL, Config{Stream: true})
	_, err = c2.Complete(context.Background(), Request{Model: "m"}, nil)
	wantError(t, err, KindBadResponse, "stopped before the model finished (after 4 retries)")
	if n := srv2.hits.Load(); n != 5 {
		t.Errorf("server got %d requests, want 5", n)
	}
}

// A whole reply whose body is cut short is asked for again too.
func TestRetryCutWholeReply(t *testing.T) {
	var seen atomic.Int32
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		if seen.Add(1) == 1 {
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("Content-Length", "500")
			_, _ = io.WriteString(w, `{"choices":[{"index":0,"message":{"role":"assistant","content":"Hel`)
			return
		}
		jsonBody(200, `{"choices":[{"index":0,"message":{"role":"assistant","content":"Hello."},"finish_reason":"stop"}]}`)(w, r)
	})
	c, waits := newTestClient(srv.URL, Config{})
	got, err := c.Complete(context.Background(), Request{Model: "m"}, nil)
	if err != nil || got.Content != "Hello." {
		t.Fatalf("Complete = %q, %v", got.Content, err)
	}
	if n := srv.hits.Load(); n != 2 || len(waits.all()) != 1 {
		t.Errorf("server got %d requests after %d waits, want 2 and 1", n, len(waits.all()))
	}
}

// A reply whose finish arrived is whole, even when the connection then
// breaks before [DONE]: it is not asked for again.
func TestNoRetryAfterFinish(t *testing.T) {
	srv := newServer(t, func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Done.\"},\"finish_reason\":\"stop\"}]}\n\ndata: {\"choices\":[],\"usage\":{\"prompt_tokens\":3,")
		w.(http.Flusher).Flush()
		if conn, _, err := w.(http.Hijacker).Hijack(); err == nil {
			_ = conn.Close()
		}
	})
	c, _ := newTestClient(srv.URL, Config{Stream: true})
	got, err := c.Complete(context.Background(), Request{Model: "m"}, nil)
	if err != nil || got.Content != "Done." {
		t.Fatalf("Complete = %q, %v", got.Content, err)
	}
	if n := srv.hits.Load(); n != 1 {
		t.Errorf("server got %d requests, want 1", n)
	}
}

// A 500 that persists is retried like a 503, and its message says so.
func TestRetriesExhausted500(t *testing.T) {
	srv := newServer(t, jsonBody(500, `{"error":{"message":"Internal error: worker died"}}`))
	c, _ := newTestClient(srv.URL, Config{Stream: true})
	_, err := c.Complete(context.Background(), Request{Model: "m"}, nil)
	wantError(t, err, KindServer, "failed to answer (after 4 retries)", "worker died")
	if n := srv.hits.Load(); n != 1+defaultRetries {
		t.Errorf("server got %d requests, want %d", n, 1+defaultRetries)
	}
}

// A reply that breaks off in the middle of a call, asked for again, shows
// the call once: its arguments go on where the broken reply left them,
// under the id the caller saw, and the Response's call has that id, though
// the server gave the new one another.
func TestRetryBrokenStreamMidCall(t *testing.T) {
	call := func(id, args, finish string) string {
		return `data: {"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"` + id + `","type":"function","function":{"name":"run_python","arguments":` +
			strconv.Quote(args) + `}}]},"finish_reason":` + finish + `}]}` + "\n\n"
	}
	var seen atomic.Int32
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		if seen.Add(1) == 1 {
			w.Header().Set("Content-Type", "text/event-stream")
			_, _ = io.WriteString(w, call("call_a", `{"code": "print(`, "null"))
			w.(http.Flusher).Flush()
			if conn, _, err := w.(http.Hijacker).Hijack(); err == nil {
				_ = conn.Close()
			}
			return
		}
		sse(call("call_b", `{"code": "print(`, "null")+call("", `42)"}`, `"tool_calls"`)+"data: [DONE]\n\n")(w, r)
	})
	c, _ := newTestClient(srv.URL, Config{Stream: true})
	var deltas []Delta
	tools := []Tool{{Name: "run_python", Parameters: json.RawMessage(`{"type":"object","properties":{"code":{"type":"string"}}}`)}}
	got, err := c.Complete(context.Background(), Request{Model: "m", Tools: tools}, collect(&deltas))
	if err != nil || len(got.ToolCalls) != 1 {
		t.Fatalf("Complete = %+v, %v", got, err)
	}
	var shown strings.Builder
	for _, d := range deltas {
		if d.Kind != DeltaArguments || d.ID != "call_a" {
			t.Errorf("delta %+v; want the arguments of call_a alone", d)
		}
		shown.WriteString(d.Text)
	}
	if shown.String() != `{"code": "print(42)"}` || got.ToolCalls[0].ID != "call_a" || got.ToolCalls[0].Arguments != `{"code": "print(42)"}` {
		t.Errorf("shown %q, call %+v; want the arguments once, under call_a", shown.String(), got.ToolCalls[0])
	}
}
