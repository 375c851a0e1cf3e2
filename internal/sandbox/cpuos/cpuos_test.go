package cpuos

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/terpdev/terp/internal/sandbox"
	"github.com/terpdev/terp/internal/sandbox/conformance"
	"github.com/terpdev/terp/internal/sandbox/local"
	"github.com/terpdev/terp/internal/terptest"
)

const testToken = "test-token"

// serve starts a Server on a local backend behind a real HTTP listener on
// 127.0.0.1 and returns a client for it.
func serve(t testing.TB) (*Backend, *httptest.Server) {
	b, hs, _ := serveWith(t, nil)
	return b, hs
}

// serveWith is serve that also returns the Server, after letting setup
// adjust it before it handles any request.
func serveWith(t testing.TB, setup func(*Server)) (*Backend, *httptest.Server, *Server) {
	t.Helper()
	lb, err := local.New(local.Config{Root: terptest.TempDir(t)})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := NewServer(lb, testToken)
	if err != nil {
		t.Fatal(err)
	}
	if setup != nil {
		setup(srv)
	}
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(func() {
		hs.Close()
		_ = srv.Close(context.Background())
	})
	b, err := New(Config{BaseURL: hs.URL, APIKey: testToken})
	if err != nil {
		t.Fatal(err)
	}
	return b, hs, srv
}

func TestConformance(t *testing.T) {
	b, _ := serve(t)
	conformance.Run(t, func(t *testing.T) sandbox.Backend { return b })
}

func TestServerNeedsToken(t *testing.T) {
	if _, err := NewServer(nil, ""); err == nil {
		t.Fatal("a server without a token started")
	}
}

func TestWrongKey(t *testing.T) {
	_, hs := serve(t)
	b, err := New(Config{BaseURL: hs.URL, APIKey: "wrong", APIKeyEnv: "MY_CPUOS_KEY"})
	if err != nil {
		t.Fatal(err)
	}
	_, err = b.Create(context.Background(), sandbox.Options{})
	var ae *APIError
	if !errors.As(err, &ae) || ae.Status != http.StatusUnauthorized || !strings.Contains(err.Error(), "MY_CPUOS_KEY") {
		t.Fatalf("got %v, want a 401 naming MY_CPUOS_KEY", err)
	}
}

func TestMissingKeyOrURL(t *testing.T) {
	if _, err := New(Config{BaseURL: "http://127.0.0.1:1"}); err == nil || !strings.Contains(err.Error(), "CPUOS_API_KEY") {
		t.Errorf("no key: %v", err)
	}
	if _, err := New(Config{APIKey: "k"}); err == nil || !strings.Contains(err.Error(), "cpuos_url") {
		t.Errorf("no URL: %v", err)
	}
}

func TestExpired(t *testing.T) {
	b, _ := serve(t)
	ctx := context.Background()
	if _, err := b.Resume(ctx, "no-such-sandbox"); !errors.Is(err, sandbox.ErrExpired) {
		t.Errorf("Resume of an unknown id: %v, want ErrExpired", err)
	}
	sbx := &Sandbox{b: b, id: "no-such-sandbox"}
	if _, err := sbx.Exec(ctx, []string{"true"}, sandbox.ExecOptions{}); !errors.Is(err, sandbox.ErrExpired) {
		t.Errorf("Exec in an unknown sandbox: %v, want ErrExpired", err)
	}
	real, err := b.Create(ctx, sandbox.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer real.Close(ctx)
	if _, err := real.ReadFile(ctx, "/work/nope"); !errors.Is(err, os.ErrNotExist) || errors.Is(err, sandbox.ErrExpired) {
		t.Errorf("missing file: %v, want fs.ErrNotExist", err)
	}
}

// flaky answers with the given statuses first, then passes to next.
func flaky(statuses []int, next http.Handler, calls *atomic.Int32) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := int(calls.Add(1)) - 1
		if n < len(statuses) {
			http.Error(w, `{"message":"busy"}`, statuses[n])
			return
		}
		next.ServeHTTP(w, r)
	})
}

func TestRetries(t *testing.T) {
	lb, err := local.New(local.Config{Root: terptest.TempDir(t)})
	if err != nil {
		t.Fatal(err)
	}
	srv, _ := NewServer(lb, testToken)
	defer srv.Close(context.Background())
	var calls atomic.Int32
	hs := httptest.NewServer(flaky([]int{503, 429, 502}, srv.Handler(), &calls))
	defer hs.Close()
	b, _ := New(Config{BaseURL: hs.URL, APIKey: testToken, RetryWait: time.Millisecond})
	sbx, err := b.Create(context.Background(), sandbox.Options{})
	if err != nil {
		t.Fatalf("Create through transient errors: %v", err)
	}
	sbx.Close(context.Background())
	if calls.Load() < 4 {
		t.Errorf("%d calls, want 3 retries", calls.Load())
	}

	// Quota: 429 that does not go away, and 402, are clear errors.
	for _, status := range []int{429, 402} {
		var n atomic.Int32
		q := httptest.NewServer(flaky([]int{status, status, status, status, status, status}, srv.Handler(), &n))
		b, _ := New(Config{BaseURL: q.URL, APIKey: testToken, RetryWait: time.Millisecond, Retries: 2})
		_, err := b.Create(context.Background(), sandbox.Options{})
		q.Close()
		if err == nil || !strings.Contains(err.Error(), "quota") {
			t.Errorf("HTTP %d: %v, want a quota error", status, err)
		}
		if status == 402 && n.Load() != 1 {
			t.Errorf("402 was retried (%d calls)", n.Load())
		}
	}

	// Connection refused is retried, then reported.
	url := "http://" + terptest.RefusedAddr(t)
	b, _ = New(Config{BaseURL: url, APIKey: testToken, RetryWait: time.Millisecond, Retries: 2})
	if _, err := b.Create(context.Background(), sandbox.Options{}); err == nil || !strings.Contains(err.Error(), "refused") {
		t.Errorf("dead server: %v", err)
	}
}

// A paused sandbox can be killed without resuming it first.
func TestClosePaused(t *testing.T) {
	b, _ := serve(t)
	ctx := context.Background()
	sbx, err := b.Create(ctx, sandbox.Options{})
	if err != nil {
		t.Fatal(err)
	}
	id, err := sbx.Pause(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := sbx.Close(ctx); err != nil {
		t.Fatalf("Close after Pause: %v", err)
	}
	if _, err := b.Resume(ctx, id); !errors.Is(err, sandbox.ErrExpired) {
		t.Errorf("Resume after Close: %v, want ErrExpired", err)
	}
}

// BenchmarkBackend is the shared backend benchmark through the client, over
// real HTTP to a server on 127.0.0.1: local's numbers plus what the
// protocol and loopback add. A real network adds its round trips on top.
func BenchmarkBackend(b *testing.B) {
	conformance.Bench(b, func(b *testing.B) sandbox.Backend {
		c, _ := serve(b)
		return c
	})
}

// BenchmarkStdinWrite is the cost of one write to a process's stdin, which
// the client sends as one HTTP request: every kernel cell is one such write.
// The process discards what it reads, so the time is the request's.
func BenchmarkStdinWrite(b *testing.B) {
	c, _ := serve(b)
	sbx, err := c.Create(b.Context(), sandbox.Options{Timeout: 10 * time.Minute})
	if err != nil {
		b.Fatal(err)
	}
	defer sbx.Close(context.Background())
	p, err := sbx.Start(b.Context(), []string{"sh", "-c", "cat > /dev/null"}, sandbox.ExecOptions{})
	if err != nil {
		b.Fatal(err)
	}
	line := []byte(`{"code": "print(1)", "nonce": "0123456789abcdef"}` + "\n")
	b.SetBytes(int64(len(line)))
	for b.Loop() {
		if _, err := p.Stdin().Write(line); err != nil {
			b.Fatal(err)
		}
	}
	if err := p.Stdin().Close(); err != nil {
		b.Fatal(err)
	}
	if code, err := p.Wait(); err != nil || code != 0 {
		b.Fatalf("cat exited %d, %v", code, err)
	}
}
