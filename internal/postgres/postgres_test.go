package postgres_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/terpdev/terp/internal/postgres"
	"github.com/terpdev/terp/internal/postgres/pgtest"
	"github.com/terpdev/terp/internal/serve/state"
	"github.com/terpdev/terp/internal/serve/state/statetest"
	"github.com/terpdev/terp/internal/store"
	"github.com/terpdev/terp/internal/store/storetest"
)

// open opens the database at u, closed when t ends.
func open(t *testing.T, u string, opts ...postgres.Option) *postgres.DB {
	t.Helper()
	db, err := postgres.Open(t.Context(), u, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(db.Close)
	return db
}

// sqlExec runs sql on the database at u on a connection of the test's own,
// as an administrator (or another tool) would.
func sqlExec(t *testing.T, u, sql string, args ...any) {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), u)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(t.Context(), sql, args...); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}

// TestState runs the state's conformance suite; a restart is a new DB on
// the same database, as is another replica.
func TestState(t *testing.T) {
	var mu sync.Mutex
	urls := map[state.State]string{}
	statetest.Run(t, func(t *testing.T) state.State {
		u := pgtest.URL(t)
		st := open(t, u).State()
		mu.Lock()
		urls[st] = u
		mu.Unlock()
		return st
	}, func(t *testing.T, st state.State) state.State {
		mu.Lock()
		u := urls[st]
		mu.Unlock()
		again := open(t, u).State()
		mu.Lock()
		urls[again] = u
		mu.Unlock()
		return again
	})
}

// TestConversations runs the conversation store's conformance suite: a
// second process is a second DB on the same database, and a damaged record
// is a row another tool wrote in the wrong shape.
func TestConversations(t *testing.T) {
	var mu sync.Mutex
	urls := map[store.Store]string{}
	storetest.Run(t, storetest.Config{
		Open: func(t *testing.T) store.Store {
			u := pgtest.URL(t)
			s := open(t, u).Conversations()
			mu.Lock()
			urls[s] = u
			mu.Unlock()
			return s
		},
		Reopen: func(t *testing.T, s store.Store) store.Store {
			mu.Lock()
			defer mu.Unlock()
			return open(t, urls[s]).Conversations()
		},
		Damage: func(t *testing.T, s store.Store, id string) {
			mu.Lock()
			u := urls[s]
			mu.Unlock()
			sqlExec(t, u, `UPDATE conversations SET record = json_build_object('version', 1, 'id', id, 'messages', 'not a list') WHERE id = $1`, id)
		},
	})
}

// A file of several chunks streams back whole, through another replica;
// one too large leaves no row; one deleted while it is read is an error,
// never a file cut short in silence.
func TestFileContent(t *testing.T) {
	u := pgtest.URL(t)
	one, two := open(t, u).State(), open(t, u).State()
	ctx := t.Context()
	content := bytes.Repeat([]byte("terp!"), 5<<20/10) // 2.5 MiB: three chunks
	f, err := one.PutFile(ctx, state.File{ID: "file-big", Owner: "alice", Filename: "big.bin", CreatedAt: time.Now()}, bytes.NewReader(content), int64(len(content)))
	if err != nil || f.Bytes != int64(len(content)) {
		t.Fatalf("PutFile = %+v, %v", f, err)
	}
	if n := pgtest.Count(t, u, "SELECT count(*) FROM file_chunks WHERE file_id = 'file-big'"); n != 3 {
		t.Errorf("%d chunks, want 3 of at most 1 MiB", n)
	}
	rc, err := two.OpenFile(ctx, f)
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(rc)
	rc.Close()
	if err != nil || !bytes.Equal(got, content) {
		t.Fatalf("read %d bytes, %v; want the %d put", len(got), err, len(content))
	}

	_, err = one.PutFile(ctx, state.File{ID: "file-over", Owner: "alice", CreatedAt: time.Now()}, bytes.NewReader(content), 2<<20)
	if !errors.Is(err, state.ErrTooLarge) {
		t.Fatalf("a file over the bound: %v", err)
	}
	if n := pgtest.Count(t, u, "SELECT count(*) FROM file_chunks WHERE file_id = 'file-over'") + pgtest.Count(t, u, "SELECT count(*) FROM files WHERE id = 'file-over'"); n != 0 {
		t.Errorf("the refused file left %d rows", n)
	}
	if _, err := one.OpenFile(ctx, state.File{ID: "file-over"}); !errors.Is(err, state.ErrNotFound) {
		t.Errorf("OpenFile of the refused file: %v; want ErrNotFound", err)
	}

	rc, err = two.OpenFile(ctx, f)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	if _, err := io.ReadFull(rc, make([]byte, 1<<20)); err != nil {
		t.Fatal(err)
	}
	if err := one.DeleteFile(ctx, "alice", "file-big"); err != nil {
		t.Fatal(err)
	}
	if n := pgtest.Count(t, u, "SELECT count(*) FROM file_chunks"); n != 0 {
		t.Errorf("deleting the file left %d chunks", n)
	}
	if _, err := io.ReadAll(rc); !errors.Is(err, io.ErrUnexpectedEOF) || !strings.Contains(err.Error(), "deleted while being read") {
		t.Errorf("reading a file deleted meanwhile: %v; want an error that says so", err)
	}
}

// A client's filename may hold what a text column refuses (NUL, invalid
// UTF-8): the file is stored all the same, the name made valid.
func TestNamesAPostgreSQLTextCannotHold(t *testing.T) {
	db := open(t, pgtest.URL(t))
	f, err := db.State().PutFile(t.Context(), state.File{ID: "file-odd", Owner: "alice", Filename: "a\x00b\xff.csv", CreatedAt: time.Now()}, strings.NewReader("x"), 10)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := db.State().File(t.Context(), "alice", "file-odd"); err != nil || got.Filename != "a\uFFFDb\uFFFD.csv" || got.Filename != f.Filename {
		t.Errorf("File = %+v, %v; PutFile said %q", got, err, f.Filename)
	}
	s, id := db.Conversations(), store.NewID()
	if _, err := s.PutInput(id, "in\x00put\xfe", strings.NewReader("kept")); err != nil {
		t.Fatal(err)
	}
	rc, err := s.OpenInput(id, "in\x00put\xfe")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(rc)
	rc.Close()
	if string(b) != "kept" {
		t.Errorf("read back %q", b)
	}
	if err := s.RemoveInput(id, "in\x00put\xfe"); err != nil {
		t.Fatal(err)
	}
	if has, _ := s.HasInputs(id); has {
		t.Error("the upload is still kept after RemoveInput")
	}
}

// Two replicas that count one key's tokens at once lose none.
func TestUsageFromReplicasAtOnce(t *testing.T) {
	u := pgtest.URL(t)
	replicas := []state.State{open(t, u).State(), open(t, u).State()}
	var wg sync.WaitGroup
	for _, st := range replicas {
		for range 10 {
			wg.Go(func() {
				if _, err := st.AddUsage(t.Context(), "alice", "2026-12-01", 3); err != nil {
					t.Error(err)
				}
			})
		}
	}
	wg.Wait()
	if n, err := replicas[1].Usage(t.Context(), "alice", "2026-12-01"); err != nil || n != 60 {
		t.Errorf("Usage = %d, %v; want 60", n, err)
	}
}

// Replicas that start at once on a new database migrate it once.
func TestReplicasStartingAtOnceMigrateOnce(t *testing.T) {
	u := pgtest.URL(t)
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			db, err := postgres.Open(t.Context(), u)
			if err != nil {
				t.Error(err)
				return
			}
			db.Close()
		})
	}
	wg.Wait()
	files, err := filepath.Glob("migrations/*.sql")
	if err != nil || len(files) == 0 {
		t.Fatalf("no migrations found: %v", err)
	}
	if n := pgtest.Count(t, u, "SELECT count(*) FROM schema_migrations"); n != len(files) {
		t.Errorf("schema_migrations has %d rows, want 1 per migration (%d)", n, len(files))
	}
	if n := pgtest.Count(t, u, "SELECT count(*) FROM schema_migrations WHERE version = 1 AND name = '0001_tables'"); n != 1 {
		t.Error("version 1 is not recorded by its name")
	}
}

// A database a newer terp migrated is refused, not misread.
func TestNewerSchemaIsRefused(t *testing.T) {
	u := pgtest.URL(t)
	open(t, u)
	sqlExec(t, u, "INSERT INTO schema_migrations (version, name) VALUES (99, '0099_future')")
	_, err := postgres.Open(t.Context(), u)
	if err == nil || !strings.Contains(err.Error(), "version 99") || !strings.Contains(err.Error(), "upgrade terp") {
		t.Fatalf("Open of a newer schema: %v; want a refusal that says to upgrade", err)
	}
}

// Tables go in the search_path's schema, and two schemas of one database
// are two stores: their locks do not collide.
func TestSchemaFromSearchPath(t *testing.T) {
	u := pgtest.URL(t)
	sqlExec(t, u, "CREATE SCHEMA a; CREATE SCHEMA b")
	in := func(schema string) string {
		p, err := url.Parse(u)
		if err != nil {
			t.Skipf("%s is not a URL", pgtest.Env)
		}
		q := p.Query()
		q.Set("search_path", schema)
		p.RawQuery = q.Encode()
		return p.String()
	}
	a, b := open(t, in("a")), open(t, in("b"))
	if !strings.Contains(a.Where(), "search_path=a") {
		t.Errorf("Where = %s; want it to name the schema", a.Where())
	}
	if n := pgtest.Count(t, u, "SELECT count(*) FROM pg_tables WHERE schemaname = 'b' AND tablename = 'conversations'"); n != 1 {
		t.Fatal("no conversations table in schema b")
	}
	id := store.NewID()
	la, err := a.Conversations().Lock(id)
	if err != nil {
		t.Fatal(err)
	}
	defer la.Unlock()
	lb, err := b.Conversations().Lock(id)
	if err != nil {
		t.Fatalf("the same id in another schema: %v", err)
	}
	lb.Unlock()
}

// Open says what is wrong and what to do, and never shows the password.
func TestOpenErrors(t *testing.T) {
	admin, err := url.Parse(pgtest.URL(t))
	if err != nil || admin.Scheme == "" {
		t.Skipf("%s is not a URL", pgtest.Env)
	}
	with := func(fn func(u *url.URL)) string {
		u := *admin
		fn(&u)
		return u.String()
	}
	tests := []struct {
		name, url string
		want      []string
	}{
		{"bad URL", "postgres://terp:s3cret@db.example:notaport/terp", []string{"not valid", "postgres://USER:PASSWORD@HOST:5432/DATABASE"}},
		{"unreachable", "postgres://terp:s3cret@127.0.0.1:1/terp?connect_timeout=5", []string{"cannot reach PostgreSQL at postgres://terp@127.0.0.1:1/terp", "check that the server is running"}},
		{"bad user", with(func(u *url.URL) { u.User = url.UserPassword("no_such_role", "s3cret") }), []string{`refused user "no_such_role"`, "check the user and password"}},
		{"no database", with(func(u *url.URL) { u.Path = "/no_such_database" }), []string{`no database "no_such_database"`, "createdb"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			db, err := postgres.Open(t.Context(), tt.url)
			if err == nil {
				db.Close()
				t.Fatal("Open succeeded")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
			if strings.Contains(err.Error(), "s3cret") {
				t.Errorf("error %q shows the password", err)
			}
		})
	}
}

func TestWhereHidesThePassword(t *testing.T) {
	u, err := url.Parse(pgtest.URL(t))
	if err != nil || u.Scheme == "" {
		t.Skipf("%s is not a URL", pgtest.Env)
	}
	db := open(t, u.String())
	if u.User != nil {
		if p, ok := u.User.Password(); ok && strings.Contains(db.Where(), p) {
			t.Errorf("Where = %s shows the password", db.Where())
		}
	}
	if !strings.HasPrefix(db.Where(), "postgres://") || !strings.Contains(db.Where(), strings.TrimPrefix(u.Path, "/")) {
		t.Errorf("Where = %s; want a URL that names the database", db.Where())
	}
}

// Closing a DB releases its locks, as a process's exit would.
func TestCloseReleasesLocks(t *testing.T) {
	u := pgtest.URL(t)
	one, err := postgres.Open(t.Context(), u)
	if err != nil {
		t.Fatal(err)
	}
	id := store.NewID()
	if _, err := one.Conversations().Lock(id); err != nil {
		t.Fatal(err)
	}
	two := open(t, u).Conversations()
	if _, err := two.Lock(id); !errors.Is(err, store.ErrBusy) {
		t.Fatalf("Lock while the other DB holds it = %v; want ErrBusy", err)
	}
	one.Close()
	if _, err := one.Conversations().Lock(store.NewID()); err == nil || !strings.Contains(err.Error(), "closed") {
		t.Errorf("Lock on a closed DB = %v; want an error that says so", err)
	}
	l, err := two.Lock(id)
	if err != nil {
		t.Fatalf("Lock once the holder closed its DB: %v", err)
	}
	l.Unlock()
}

const (
	lockHelperURL = "TERP_POSTGRES_LOCK_HELPER_URL"
	lockHelperID  = "TERP_POSTGRES_LOCK_HELPER_ID"
)

// TestLockHelper is a terp process that takes a conversation and never
// lets go; it does nothing unless TestLockDiesWithProcess runs it.
func TestLockHelper(t *testing.T) {
	u := os.Getenv(lockHelperURL)
	if u == "" {
		t.Skip("run by TestLockDiesWithProcess")
	}
	db, err := postgres.Open(context.Background(), u)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Conversations().Lock(os.Getenv(lockHelperID)); err != nil {
		t.Fatal(err)
	}
	fmt.Println("locked")
	select {} // until killed
}

// A replica is refused a conversation another process holds, told which
// process, and gets it once that process is SIGKILLed: the server ends
// the dead process's session, and its locks with it.
func TestLockDiesWithProcess(t *testing.T) {
	u := pgtest.URL(t)
	id := store.NewID()
	cmd := exec.Command(os.Args[0], "-test.run", "^TestLockHelper$")
	cmd.Env = append(os.Environ(), lockHelperURL+"="+u, lockHelperID+"="+id)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	locked := make(chan bool, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if sc.Text() == "locked" {
				locked <- true
				break
			}
		}
		close(locked)
		_, _ = io.Copy(io.Discard, out)
	}()
	select {
	case ok := <-locked:
		if !ok {
			t.Fatal("the helper exited without taking the lock")
		}
	case <-time.After(time.Minute):
		t.Fatal("the helper did not take the lock within a minute")
	}

	replica := open(t, u).Conversations()
	_, err = replica.Lock(id)
	if !errors.Is(err, store.ErrBusy) || !strings.Contains(err.Error(), fmt.Sprintf("pid %d", cmd.Process.Pid)) {
		t.Fatalf("Lock while the helper holds it = %v; want ErrBusy naming pid %d", err, cmd.Process.Pid)
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	deadline := time.Now().Add(30 * time.Second)
	for {
		l, err := replica.Lock(id)
		if err == nil {
			l.Unlock()
			return
		}
		if !errors.Is(err, store.ErrBusy) || time.Now().After(deadline) {
			t.Fatalf("Lock after the holder was killed: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
