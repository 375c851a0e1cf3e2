package serve

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/terpdev/terp/internal/config"
	"github.com/terpdev/terp/internal/conversation"
	"github.com/terpdev/terp/internal/sandbox"
	"github.com/terpdev/terp/internal/sandbox/memory"
	"github.com/terpdev/terp/internal/serve/state"
	"github.com/terpdev/terp/internal/store"
	"github.com/terpdev/terp/internal/terptest"
)

// A body a handler read in part, or whole, is forwarded whole, as often
// as it is asked for (a forward, then the run here when the replica did
// not answer).
func TestReplayableBodyIsWholeAgain(t *testing.T) {
	srv := &Server{mux: http.NewServeMux()}
	r := httptest.NewRequest("POST", "/v1/chat/completions", strings.NewReader(`{"model": "m"}`))
	head := make([]byte, 5)
	srv.replayable(r, &route{})
	if _, err := io.ReadFull(r.Body, head); err != nil || string(head) != `{"mod` {
		t.Fatalf("read %q, %v", head, err)
	}
	for range 2 {
		again, _ := r.GetBody()
		if b, err := io.ReadAll(again); err != nil || string(b) != `{"model": "m"}` {
			t.Errorf("GetBody gave %q, %v", b, err)
		}
	}
	if rest, _ := io.ReadAll(r.Body); string(rest) != `el": "m"}` {
		t.Errorf("the handler's body went on with %q", rest)
	}
}

// hostReplicas starts n hosts sharing one state, one conversation store
// and one (in-memory) sandbox backend, as replicas on PostgreSQL do, each
// with the protocol proto makes for it registered.
func hostReplicas(t *testing.T, n int, proto func(*Server) Protocol) []*testHost {
	t.Helper()
	dir := terptest.TempDir(t)
	st, err := store.Open(filepath.Join(dir, "data"))
	if err != nil {
		t.Fatal(err)
	}
	shared, err := state.OpenDir(filepath.Join(dir, "serve"))
	if err != nil {
		t.Fatal(err)
	}
	backend := memory.New(memory.Config{Programs: map[string]memory.Program{"python3": memory.PythonStandIn}})
	var out []*testHost
	for range n {
		cfg := config.Default()
		cfg.Sandbox, cfg.ExecMode, cfg.IdlePause = "memory", "script", 0
		svc := conversation.New(conversation.Deps{
			Store:      st,
			NewBackend: func(*config.Config) (sandbox.Backend, error) { return backend, nil },
		})
		hs := httptest.NewUnstartedServer(nil)
		hs.Start()
		srv, err := New(Config{Conversations: svc, Settings: cfg, State: shared, Replica: hs.URL,
			Keys: map[string]Principal{aliceKey: {Name: "alice"}}})
		if err != nil {
			t.Fatal(err)
		}
		srv.Register(proto(srv))
		hs.Config.Handler = srv.Handler()
		t.Cleanup(func() {
			hs.Close()
			srv.Close(context.Background())
		})
		out = append(out, &testHost{Server: hs, srv: srv, store: st})
	}
	return out
}

// A protocol that upgrades its connection (Jupyter's kernel channels are a
// websocket) reaches the replica its container is open in through the
// forwarder: the upgrade is passed on, and the bytes after it flow both
// ways, as they would to that replica itself.
func TestForwardUpgradesTheConnection(t *testing.T) {
	proto := func(srv *Server) Protocol {
		return Protocol{Name: "upgrade", Routes: []Route{{Pattern: "GET /channels/{id}", Handler: func(w http.ResponseWriter, r *http.Request) {
			l, err := srv.Acquire(r.Context(), Owner(r), r.PathValue("id"))
			if srv.Forwarded(w, r, err) {
				return
			}
			if err != nil || l == nil || r.Header.Get("Upgrade") != "echo" {
				http.Error(w, fmt.Sprint("no container: ", err), http.StatusNotFound)
				return
			}
			defer l.Release(context.WithoutCancel(r.Context()))
			w.Header().Set("Connection", "Upgrade")
			w.Header().Set("Upgrade", "echo")
			w.WriteHeader(http.StatusSwitchingProtocols)
			conn, brw, err := http.NewResponseController(w).Hijack()
			if err != nil {
				t.Error(err)
				return
			}
			defer conn.Close()
			line, _ := brw.ReadString('\n')
			fmt.Fprintf(brw, "%s from %s", line, srv.cfg.Replica)
			_ = brw.Flush()
		}}}}
	}
	hosts := hostReplicas(t, 2, proto)
	a, b := hosts[0], hosts[1]
	l, err := a.srv.CreateContainer(ctx(t), "alice", ContainerSpec{Name: "on a"})
	if err != nil {
		t.Fatal(err)
	}
	l.Release(ctx(t))

	conn, err := net.Dial("tcp", strings.TrimPrefix(b.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(time.Minute))
	fmt.Fprintf(conn, "GET /channels/%s HTTP/1.1\r\nHost: b\r\nAuthorization: Bearer %s\r\nConnection: Upgrade\r\nUpgrade: echo\r\n\r\n", l.Container().ID, aliceKey)
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close() // a 101's body is empty: the bytes after it are the connection's
	if resp.StatusCode != http.StatusSwitchingProtocols {
		body, _ := io.ReadAll(resp.Body)
		t.Fatalf("the upgrade through b answered %s: %s", resp.Status, body)
	}
	fmt.Fprint(conn, "hello\n")
	got, _ := io.ReadAll(br)
	if want := "hello\n from " + a.URL; string(got) != want {
		t.Errorf("after the upgrade through b, read %q; want %q", got, want)
	}
	if !a.srv.IsOpen(l.Container().ID) || b.srv.IsOpen(l.Container().ID) {
		t.Error("the container moved: it should stay open in a, where its kernel is")
	}
}

// A replica's mark that it counted a request it forwards holds for the
// key it was made for, under the replicas' secret, for a minute: not for
// another key, another secret, later, or once altered.
func TestCountedMark(t *testing.T) {
	secret, other := []byte("0123456789abcdef0123456789abcdef"), []byte("fedcba9876543210fedcba9876543210")
	now := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	mark := countedMark(secret, "alice", now)
	for _, tt := range []struct {
		what   string
		secret []byte
		owner  string
		mark   string
		at     time.Time
		want   bool
	}{
		{"as made", secret, "alice", mark, now, true},
		{"a forward's time later", secret, "alice", mark, now.Add(2 * time.Second), true},
		{"from a replica whose clock is a little ahead", secret, "alice", mark, now.Add(-30 * time.Second), true},
		{"for another key", secret, "bob", mark, now, false},
		{"under another secret", other, "alice", mark, now, false},
		{"two minutes later", secret, "alice", mark, now.Add(2 * time.Minute), false},
		{"with its time moved on", secret, "alice", fmt.Sprint(now.Add(time.Hour).Unix()) + mark[strings.Index(mark, "."):], now.Add(time.Hour), false},
		{"without its time", secret, "alice", mark[strings.Index(mark, ".")+1:], now, false},
		{"made up", secret, "alice", "forged", now, false},
	} {
		if got := validMark(tt.secret, tt.owner, tt.mark, tt.at); got != tt.want {
			t.Errorf("a mark %s: valid %v, want %v", tt.what, got, tt.want)
		}
	}
}
