package llm

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// synthID in a wanted ToolCall stands for an id the client made up.
const synthID = "<synthesized>"

var synthPattern = regexp.MustCompile(`^call_[A-Za-z0-9]{9}$`)

// waits records the backoff delays a client asked for, instead of sleeping.
type waits struct {
	mu sync.Mutex
	ds []time.Duration
}

func (w *waits) add(d time.Duration) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.ds = append(w.ds, d)
}

func (w *waits) all() []time.Duration {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]time.Duration(nil), w.ds...)
}

// server is an httptest server that counts the chat requests it answers.
type server struct {
	*httptest.Server
	hits atomic.Int32
}

func newServer(t testing.TB, h http.HandlerFunc) *server {
	t.Helper()
	s := &server{}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/chat/completions" {
			http.NotFound(w, r)
			return
		}
		s.hits.Add(1)
		h(w, r)
	}))
	t.Cleanup(s.Close)
	return s
}

// newTestClient returns a client for url whose backoff waits are recorded
// rather than slept, with no jitter, so retry tests are fast and exact.
func newTestClient(url string, cfg Config) (*Client, *waits) {
	cfg.BaseURL = url + "/v1"
	c := New(cfg)
	w := &waits{}
	c.retry.wait = func(ctx context.Context, d time.Duration) error {
		w.add(d)
		return ctx.Err()
	}
	c.retry.jitter = func(time.Duration) time.Duration { return 0 }
	return c, w
}

// sse answers with wire as a text/event-stream body, byte for byte.
func sse(wire string) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, wire)
	}
}

// jsonBody answers with status and body as application/json.
func jsonBody(status int, body string) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_, _ = io.WriteString(w, body)
	}
}

// collect returns an onDelta that gathers the deltas it receives.
func collect(into *[]Delta) func(Delta) {
	return func(d Delta) { *into = append(*into, d) }
}

// checkResponse compares got with want, accepting any synthesized id where
// want says synthID, and checking that synthesized ids are distinct.
func checkResponse(t *testing.T, got, want Response) {
	t.Helper()
	seen := map[string]bool{}
	if len(got.ToolCalls) == len(want.ToolCalls) {
		for i := range want.ToolCalls {
			id := got.ToolCalls[i].ID
			if seen[id] {
				t.Errorf("tool call %d reuses id %q", i, id)
			}
			seen[id] = true
			if want.ToolCalls[i].ID == synthID {
				if !synthPattern.MatchString(id) {
					t.Errorf("tool call %d: id %q is not a synthesized id", i, id)
				}
				got.ToolCalls[i].ID = synthID
			}
		}
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("response:\n got %s\nwant %s", dump(got), dump(want))
	}
}

func dump(v any) string {
	b, _ := json.MarshalIndent(v, "", "  ")
	return string(b)
}

// wantError checks that err is an *Error of kind k whose text mentions each
// of subs.
func wantError(t *testing.T, err error, k ErrorKind, subs ...string) *Error {
	t.Helper()
	e, ok := err.(*Error)
	if !ok {
		t.Fatalf("error = %T %v, want *Error of kind %v", err, err, k)
	}
	if e.Kind != k {
		t.Errorf("kind = %v, want %v (error: %v)", e.Kind, k, e)
	}
	if !IsKind(err, k) {
		t.Errorf("IsKind(err, %v) = false", k)
	}
	for _, s := range subs {
		if !strings.Contains(e.Error(), s) {
			t.Errorf("error %q does not mention %q", e.Error(), s)
		}
	}
	return e
}
