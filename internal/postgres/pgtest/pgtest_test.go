package pgtest

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// Each URL is a database of its own, gone when its test ends.
func TestURLIsFreshAndDropped(t *testing.T) {
	var name string
	t.Run("first", func(t *testing.T) {
		u := URL(t)
		conn, err := pgx.Connect(t.Context(), u)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close(context.Background())
		if _, err := conn.Exec(t.Context(), "CREATE TABLE mine (a int)"); err != nil {
			t.Fatal(err)
		}
		if err := conn.QueryRow(t.Context(), "SELECT current_database()").Scan(&name); err != nil {
			t.Fatal(err)
		}
		// Left open on purpose: the drop must end it.
	})
	u := URL(t)
	if n := Count(t, u, "SELECT count(*) FROM pg_tables WHERE tablename = 'mine'"); n != 0 {
		t.Error("a new database has the last test's table")
	}
	if n := Count(t, u, "SELECT count(*) FROM pg_database WHERE datname = $1", name); n != 0 {
		t.Errorf("the database %s is still there after its test", name)
	}
}

func TestWithDatabase(t *testing.T) {
	for _, tt := range []struct{ admin, want string }{
		{"postgres://u:p@h:5433/postgres?sslmode=disable", "postgres://u:p@h:5433/terp_test_x?sslmode=disable"},
		{"postgresql://u@/postgres?host=%2Ftmp%2Fs", "postgresql://u@/terp_test_x?host=%2Ftmp%2Fs"},
		{"host=h user=u dbname=postgres", "host=h user=u dbname=postgres dbname=terp_test_x"},
	} {
		if got, err := withDatabase(tt.admin, "terp_test_x"); err != nil || got != tt.want {
			t.Errorf("withDatabase(%q) = %q, %v; want %q", tt.admin, got, err, tt.want)
		}
	}
}

const clusterHelper = "TERP_PGTEST_CLUSTER_HELPER"

// TestClusterHelper starts a cluster and waits to be killed; it does
// nothing unless TestClusterGoesWithTheProcess runs it.
func TestClusterHelper(t *testing.T) {
	if os.Getenv(clusterHelper) == "" {
		t.Skip("run by TestClusterGoesWithTheProcess")
	}
	fmt.Println(Admin(t))
	select {}
}

// A cluster pgtest started stops, and its directory goes, when the test
// process dies, even by SIGKILL, which runs no cleanup.
func TestClusterGoesWithTheProcess(t *testing.T) {
	if _, ok := findBin(); !ok {
		t.Skip("no PostgreSQL installed to start a cluster with")
	}
	cmd := exec.Command(os.Args[0], "-test.run", "^TestClusterHelper$")
	var env []string
	for _, e := range os.Environ() {
		if !strings.HasPrefix(e, Env+"=") {
			env = append(env, e)
		}
	}
	cmd.Env = append(env, clusterHelper+"=1")
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	said := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		if sc.Scan() {
			said <- sc.Text()
		}
		close(said)
		_, _ = io.Copy(io.Discard, out)
	}()
	var admin string
	select {
	case admin = <-said:
	case <-time.After(3 * time.Minute):
		t.Fatal("the helper started no cluster within 3 minutes")
	}
	u, err := url.Parse(admin)
	if err != nil || u.Query().Get("host") == "" {
		t.Fatalf("the helper said %q; want a URL with a socket directory", admin)
	}
	dir := u.Query().Get("host")
	if n := Count(t, admin, "SELECT 1"); n != 1 {
		t.Fatal("the cluster does not answer")
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	deadline := time.Now().Add(time.Minute)
	for {
		_, err := os.Stat(dir)
		if errors.Is(err, os.ErrNotExist) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s is still there a minute after the test process died", dir)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if conn, err := pgx.Connect(t.Context(), admin); err == nil {
		conn.Close(context.Background())
		t.Error("the cluster still answers after the test process died")
	}
}

const skipHelper = "TERP_PGTEST_SKIP_HELPER"

// TestSkipHelper is two PostgreSQL tests on a machine without PostgreSQL;
// it does nothing unless TestSkipNotice runs it.
func TestSkipHelper(t *testing.T) {
	if os.Getenv(skipHelper) == "" {
		t.Skip("run by TestSkipNotice")
	}
	installs = "/nonexistent/*/bin"
	for _, name := range []string{"first", "second"} {
		t.Run(name, func(t *testing.T) {
			URL(t)
			t.Error("URL returned without a server")
		})
	}
}

// Without TERP_TEST_POSTGRES and without PostgreSQL installed, the tests
// skip with one notice in capitals, on stderr and in the notices file
// that make test prints and .ci/run greps.
func TestSkipNotice(t *testing.T) {
	notices := t.TempDir() + "/notices"
	cmd := exec.Command(os.Args[0], "-test.run", "^TestSkipHelper$")
	var env []string
	for _, e := range os.Environ() {
		if !strings.HasPrefix(e, Env+"=") && !strings.HasPrefix(e, "PATH=") {
			env = append(env, e)
		}
	}
	cmd.Env = append(env, skipHelper+"=1", "PATH=/nonexistent", "TERP_TEST_NOTICES="+notices)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if out, err := cmd.Output(); err != nil {
		t.Fatalf("the helper failed: %v\n%s%s", err, out, stderr.String())
	}
	const notice = "*** POSTGRES TESTS SKIPPED: $TERP_TEST_POSTGRES is not set and no PostgreSQL is installed"
	if n := strings.Count(stderr.String(), notice); n != 1 {
		t.Errorf("stderr holds the notice %d times, want once:\n%s", n, stderr.String())
	}
	b, err := os.ReadFile(notices)
	if err != nil || !strings.Contains(string(b), notice) || !strings.Contains(string(b), "make test-deps") {
		t.Errorf("the notices file holds %q, %v; want the notice saying how to fix it", b, err)
	}
}
