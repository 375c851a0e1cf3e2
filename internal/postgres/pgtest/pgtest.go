// Package pgtest gives tests a PostgreSQL database of their own: on the
// server that TERP_TEST_POSTGRES names (CI's), or else on a throwaway
// cluster it starts from Debian's postgresql package, once per test binary.
// Without either the test is skipped, loudly ("POSTGRES TESTS SKIPPED"),
// and .ci/run fails on that notice.
//
// Each call to URL creates a new database and drops it when the test ends,
// so tests run in parallel, across packages too, and leave nothing behind.
// A database, not a schema, because advisory locks (conversation locks) are
// per database.
package pgtest

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/terpdev/terp/internal/terptest"
)

// Env names the URL of a database on a server the tests may create
// databases on (the role needs CREATEDB); each test gets its own database
// there. When it is unset, pgtest starts a cluster of its own.
const Env = "TERP_TEST_POSTGRES"

// installs is where Debian's postgresql package puts initdb and pg_ctl,
// one directory per major version; PATH is searched after it.
var installs = "/usr/lib/postgresql/*/bin"

var server struct {
	sync.Once
	admin string // the URL tests create their databases through
	skip  string // why the PostgreSQL tests skip; empty when they run
	err   error
	told  sync.Once
	// stop is the started cluster's lifeline: the cluster stops and its
	// directory goes when this end closes, which the kernel does when the
	// test process exits, however it exits.
	stop io.WriteCloser
}

// URL returns the URL of a new, empty database for t, dropped with
// everything in it when t ends. It skips t, loudly, when there is no
// PostgreSQL to use.
func URL(t testing.TB) string {
	t.Helper()
	admin := Admin(t)
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	name := "terp_test_" + hex.EncodeToString(b)
	if err := adminExec(admin, "CREATE DATABASE "+name); err != nil {
		t.Fatalf("create the test database: %v", err)
	}
	t.Cleanup(func() {
		if err := dropDatabase(admin, name); err != nil {
			t.Errorf("drop the test database %s: %v", name, err)
		}
	})
	u, err := withDatabase(admin, name)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// Admin returns the URL of the server's own database, through which
// databases are created, starting the throwaway cluster on first use when
// TERP_TEST_POSTGRES is unset. Tests should not write to it: use URL.
func Admin(t testing.TB) string {
	t.Helper()
	server.Do(func() {
		if u := os.Getenv(Env); u != "" {
			server.admin = u
			return
		}
		bin, ok := findBin()
		if !ok {
			server.skip = fmt.Sprintf("POSTGRES TESTS SKIPPED: $%s is not set and no PostgreSQL is installed to start a cluster with (no initdb in %s or on PATH); run `make test-deps` (Debian's postgresql), or set %s to a database URL whose role may create databases",
				Env, installs, Env)
			return
		}
		server.admin, server.err = start(bin)
	})
	if server.err != nil {
		t.Fatal(server.err)
	}
	if server.skip != "" {
		terptest.SkipLoudly(t, &server.told, server.skip)
	}
	return server.admin
}

// dropDatabase drops a test's database. FORCE ends the sessions a test
// left open, such as those of a subprocess it killed; but a role without
// pg_signal_backend (CI's is one) may not end an autovacuum worker that
// happens to be in the database then, and is refused (42501): the worker
// is done within seconds, so the drop is tried again meanwhile.
func dropDatabase(admin, name string) error {
	deadline := time.Now().Add(30 * time.Second)
	for {
		err := adminExec(admin, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)")
		var pe *pgconn.PgError
		if err == nil || !errors.As(err, &pe) || pe.Code != "42501" || time.Now().After(deadline) {
			return err
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func adminExec(admin, sql string) error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	conn, err := pgx.Connect(ctx, admin)
	if err != nil {
		return fmt.Errorf("connect to $%s: %w", Env, err)
	}
	defer func() { _ = conn.Close(ctx) }()
	_, err = conn.Exec(ctx, sql)
	return err
}

// withDatabase is the admin URL, a URL or a keyword/value string, naming
// the database name instead.
func withDatabase(admin, name string) (string, error) {
	if strings.HasPrefix(admin, "postgres://") || strings.HasPrefix(admin, "postgresql://") {
		u, err := url.Parse(admin)
		if err != nil {
			return "", fmt.Errorf("$%s is not a URL: %w", Env, err)
		}
		u.Path, u.RawPath = "/"+name, ""
		return u.String(), nil
	}
	// In a keyword/value string the last setting of a keyword wins.
	return admin + " dbname=" + name, nil
}

// findBin is the directory of the newest initdb and pg_ctl.
func findBin() (string, bool) {
	dirs, _ := filepath.Glob(installs)
	// Debian's directories are named by major version: the newest first.
	slices.SortFunc(dirs, func(a, b string) int {
		va, _ := strconv.Atoi(filepath.Base(filepath.Dir(a)))
		vb, _ := strconv.Atoi(filepath.Base(filepath.Dir(b)))
		return vb - va
	})
	for _, d := range dirs {
		if isExec(filepath.Join(d, "initdb")) && isExec(filepath.Join(d, "pg_ctl")) {
			return d, true
		}
	}
	if p, err := exec.LookPath("initdb"); err == nil {
		if d := filepath.Dir(p); isExec(filepath.Join(d, "pg_ctl")) {
			return d, true
		}
	}
	return "", false
}

func isExec(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0
}

// cluster makes a cluster in dir, starts it on a socket there (no TCP, so no
// port to collide with) and says "ready"; then it waits for its standard
// input to close, stops the cluster and removes dir. fsync is off: the
// cluster is thrown away.
const cluster = `set -e
bin=$1 dir=$2
"$bin/initdb" --pgdata="$dir/data" --username=postgres --auth=trust --locale=C --encoding=UTF8 --no-sync >"$dir/initdb.log" 2>&1 ||
	{ cat "$dir/initdb.log"; exit 1; }
"$bin/pg_ctl" --pgdata="$dir/data" --log="$dir/server.log" --wait --silent \
	--options="-c listen_addresses='' -k $dir -c fsync=off -c synchronous_commit=off -c full_page_writes=off -c max_connections=300" start ||
	{ cat "$dir/server.log"; exit 1; }
echo ready
exec >/dev/null 2>&1
read -r _ || true
"$bin/pg_ctl" --pgdata="$dir/data" --mode=immediate --wait stop || true
rm -rf "$dir"
`

// start runs cluster and returns the URL of its postgres database.
// PostgreSQL refuses to run as root, so as root the cluster runs as the
// postgres user (which Debian's package makes) or else nobody.
func start(bin string) (string, error) {
	dir, err := os.MkdirTemp("", "terp-pg-")
	if err != nil {
		return "", err
	}
	// Not bound to a test's context: the cluster serves the whole process.
	cmd := exec.CommandContext(context.Background(), "/bin/sh", "-c", cluster, "sh", bin, dir)
	cmd.Env = []string{"PATH=/usr/bin:/bin", "LC_ALL=C"}
	// Its own process group: a ^C to go test must not kill it before it
	// has cleaned up; the closed pipe tells it to.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if os.Geteuid() == 0 {
		cred, err := unprivileged()
		if err == nil {
			err = os.Chown(dir, int(cred.Uid), int(cred.Gid))
		}
		if err != nil {
			_ = os.RemoveAll(dir)
			return "", fmt.Errorf("start a PostgreSQL cluster for the tests: %w", err)
		}
		cmd.SysProcAttr.Credential = cred
	}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return "", err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return "", err
	}
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		_ = os.RemoveAll(dir)
		return "", fmt.Errorf("start a PostgreSQL cluster for the tests: %w", err)
	}
	ready := make(chan error, 1)
	go func() {
		sc := bufio.NewScanner(out)
		var said []string
		for sc.Scan() {
			if sc.Text() == "ready" {
				ready <- nil
				_, _ = io.Copy(io.Discard, out)
				return
			}
			said = append(said, sc.Text())
		}
		ready <- fmt.Errorf("%s", strings.Join(said, "\n"))
	}()
	select {
	case err = <-ready:
	case <-time.After(2 * time.Minute):
		err = errors.New("it was not ready within 2 minutes")
	}
	if err != nil {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		_ = cmd.Wait()
		_ = os.RemoveAll(dir)
		return "", fmt.Errorf("start a PostgreSQL cluster for the tests with %s (or set $%s): %v", bin, Env, err)
	}
	go func() { _ = cmd.Wait() }()
	// Held for the process's life, never closed: the kernel closes it at
	// exit (Wait would too, but the script exits only after).
	server.stop = stdin
	return "postgres://postgres@/postgres?host=" + url.QueryEscape(dir), nil
}

// unprivileged is the user the cluster runs as when the tests run as root.
func unprivileged() (*syscall.Credential, error) {
	for _, name := range []string{"postgres", "nobody"} {
		u, err := user.Lookup(name)
		if err != nil {
			continue
		}
		uid, _ := strconv.ParseUint(u.Uid, 10, 32)
		gid, _ := strconv.ParseUint(u.Gid, 10, 32)
		if uid == 0 {
			continue
		}
		return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, nil
	}
	return nil, errors.New("PostgreSQL will not run as root, and there is no postgres or nobody user to run it as")
}

// Count runs sql, which selects one integer, on the database at u.
func Count(t testing.TB, u, sql string, args ...any) int {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), u)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = conn.Close(context.Background()) }()
	var n int
	if err := conn.QueryRow(t.Context(), sql, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return n
}
