package postgres

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/terpdev/terp/internal/postgres/pgtest"
	"github.com/terpdev/terp/internal/store"
)

// logBuffer is a log the test reads while the DB writes it.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func openLogged(t *testing.T, u string) (*DB, *logBuffer) {
	t.Helper()
	log := &logBuffer{}
	db, err := Open(t.Context(), u, WithLog(slog.New(slog.NewTextHandler(log, nil))))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(db.Close)
	return db, log
}

// terminateLocks ends the sessions that hold advisory locks in the
// database at u, as a server restart or a network cut would.
func terminateLocks(t *testing.T, u string) {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), u)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var n int
	err = conn.QueryRow(t.Context(), `SELECT count(pg_terminate_backend(pid)) FROM pg_locks
		WHERE locktype = 'advisory' AND database = (SELECT oid FROM pg_database WHERE datname = current_database())`).Scan(&n)
	if err != nil || n == 0 {
		t.Fatalf("terminate the lock sessions: %d, %v", n, err)
	}
}

// A lock lost with its connection is taken back on the next Lock, and
// another replica is refused it again.
func TestLockTakenBackAfterTheConnectionDrops(t *testing.T) {
	u := pgtest.URL(t)
	one, log := openLogged(t, u)
	id := store.NewID()
	l, err := one.Conversations().Lock(id)
	if err != nil {
		t.Fatal(err)
	}
	terminateLocks(t, u)
	other, err := one.Conversations().Lock(store.NewID())
	if err != nil {
		t.Fatalf("Lock after the connection dropped: %v", err)
	}
	defer other.Unlock()
	if !strings.Contains(log.String(), "took back the lock") || !strings.Contains(log.String(), id) {
		t.Errorf("the log does not say the lock was taken back:\n%s", log)
	}
	two, _ := openLogged(t, u)
	if _, err := two.Conversations().Lock(id); !errors.Is(err, store.ErrBusy) {
		t.Fatalf("another replica's Lock after the lock was taken back = %v; want ErrBusy", err)
	}
	if _, err := one.Conversations().Lock(id); !errors.Is(err, store.ErrBusy) {
		t.Errorf("a second Lock in the holding process = %v; want ErrBusy", err)
	}
	if err := l.Unlock(); err != nil {
		t.Fatal(err)
	}
	l2, err := two.Conversations().Lock(id)
	if err != nil {
		t.Fatalf("the other replica's Lock once released: %v", err)
	}
	l2.Unlock()
}

// A lock another replica took while the connection was down cannot be
// taken back: that is logged as an error, and the old holder's Unlock
// leaves the new holder's lock alone.
func TestLockTakenMeanwhileIsLoggedAsLost(t *testing.T) {
	u := pgtest.URL(t)
	one, log := openLogged(t, u)
	id := store.NewID()
	l, err := one.Conversations().Lock(id)
	if err != nil {
		t.Fatal(err)
	}
	terminateLocks(t, u)
	two, _ := openLogged(t, u)
	l2, err := two.Conversations().Lock(id)
	if err != nil {
		t.Fatalf("another replica's Lock once the connection dropped: %v", err)
	}
	defer l2.Unlock()
	if _, err := one.Conversations().Lock(store.NewID()); err != nil {
		t.Fatal(err)
	}
	if s := log.String(); !strings.Contains(s, "level=ERROR") || !strings.Contains(s, "another process holds it now") || !strings.Contains(s, id) {
		t.Errorf("the log does not report the lost lock as an error:\n%s", s)
	}
	if err := l.Unlock(); err != nil {
		t.Errorf("Unlock of a lost lock: %v", err)
	}
	if _, err := one.Conversations().Lock(id); !errors.Is(err, store.ErrBusy) {
		t.Errorf("Lock while the other replica holds it = %v; want ErrBusy", err)
	}
}

// Without any Lock to notice, the watch finds a dropped connection and
// takes the locks back by itself.
func TestWatchTakesLocksBack(t *testing.T) {
	defer func(d time.Duration) { checkEvery = d }(checkEvery)
	checkEvery = 50 * time.Millisecond
	u := pgtest.URL(t)
	one, log := openLogged(t, u)
	id := store.NewID()
	l, err := one.Conversations().Lock(id)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Unlock()
	terminateLocks(t, u)
	deadline := time.Now().Add(20 * time.Second)
	for !strings.Contains(log.String(), "took back the lock") {
		if time.Now().After(deadline) {
			t.Fatalf("the lock was not taken back within 20 s:\n%s", log)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if !strings.Contains(log.String(), "level=WARN") {
		t.Errorf("the lost connection was not logged:\n%s", log)
	}
}
