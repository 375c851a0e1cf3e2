package cpuos

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/terpdev/terp/internal/kernel"
	"github.com/terpdev/terp/internal/sandbox"
)

// waitForEntries fails unless the server holds want process entries within
// a few seconds: the server forgets a process as soon as its last stream
// handler returns, which may be a moment after the client saw the end.
func waitForEntries(t *testing.T, srv *Server, want int, what string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		n := srv.processes()
		if n == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: the server holds %d process entries, want %d", what, n, want)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func newServedSandbox(t *testing.T, b *Backend) sandbox.Sandbox {
	t.Helper()
	sbx, err := b.Create(t.Context(), sandbox.Options{Timeout: 10 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sbx.Close(context.Background()) })
	return sbx
}

// Every kernel restart starts a new process; the server must forget each
// one once it has exited and the client has collected it, or a long
// conversation leaks one entry per restart.
func TestServerForgetsCollectedProcesses(t *testing.T) {
	b, _, srv := serveWith(t, nil) // the default grace of a minute never expires here
	sbx := newServedSandbox(t, b)

	const cycles = 25
	for i := range cycles {
		p, err := sbx.Start(t.Context(), []string{"sh", "-c", "echo out; echo err >&2; exit 3"}, sandbox.ExecOptions{})
		if err != nil {
			t.Fatal(err)
		}
		out, _ := io.ReadAll(p.Stdout())
		errOut, _ := io.ReadAll(p.Stderr())
		code, err := p.Wait()
		if err != nil || code != 3 || string(out) != "out\n" || string(errOut) != "err\n" {
			t.Fatalf("cycle %d: exit %d (%v), stdout %q, stderr %q", i, code, err, out, errOut)
		}
		waitForEntries(t, srv, 0, "after a process was read and waited for")
	}

	// The same through the kernel: start, one cell, close, again and again.
	for i := range 5 {
		k, err := kernel.Start(t.Context(), sbx, kernel.Options{})
		if err != nil {
			t.Fatal(err)
		}
		res, err := k.Run(t.Context(), "6 * 7", time.Minute)
		if err != nil || res.Stdout != "42\n" {
			t.Fatalf("kernel %d: %+v, %v", i, res, err)
		}
		if srv.processes() != 1 {
			t.Errorf("kernel %d running: %d entries, want 1", i, srv.processes())
		}
		if err := k.Close(); err != nil {
			t.Fatal(err)
		}
		waitForEntries(t, srv, 0, "after a kernel closed")
	}

	// A forgotten process says why it is gone.
	p, err := sbx.Start(t.Context(), []string{"true"}, sandbox.ExecOptions{})
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.ReadAll(p.Stdout())
	_, _ = io.ReadAll(p.Stderr())
	if _, err := p.Wait(); err != nil {
		t.Fatal(err)
	}
	waitForEntries(t, srv, 0, "after true")
	if err := p.Signal(sandbox.SIGINT); err == nil || !strings.Contains(err.Error(), "has exited") {
		t.Errorf("signal to a collected process: %v, want an error saying it exited", err)
	}
}

// An exited process keeps its output and exit status until the client has
// collected them, whatever the order: nothing is forgotten early.
func TestServerKeepsUncollectedProcesses(t *testing.T) {
	b, _, srv := serveWith(t, nil)
	sbx := newServedSandbox(t, b)

	p, err := sbx.Start(t.Context(), []string{"sh", "-c", "echo before; exit 7"}, sandbox.ExecOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// Wait first, then read: the process exited long before its stdout is
	// read, and waiting must not drop the entry while output is pending.
	code, err := p.Wait()
	if err != nil || code != 7 {
		t.Fatalf("Wait = %d, %v, want 7", code, err)
	}
	time.Sleep(200 * time.Millisecond)
	out, err := io.ReadAll(p.Stdout())
	if err != nil || string(out) != "before\n" {
		t.Fatalf("stdout after Wait = %q, %v", out, err)
	}
	_, _ = io.ReadAll(p.Stderr())
	waitForEntries(t, srv, 0, "after Wait then read")

	// A process whose exit status nobody asked for yet stays: a late Wait
	// still gets it.
	p, err = sbx.Start(t.Context(), []string{"sh", "-c", "exit 5"}, sandbox.ExecOptions{})
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.ReadAll(p.Stdout())
	_, _ = io.ReadAll(p.Stderr())
	time.Sleep(300 * time.Millisecond)
	if n := srv.processes(); n != 1 {
		t.Errorf("an exited, unwaited process: %d entries, want 1", n)
	}
	if code, err := p.Wait(); err != nil || code != 5 {
		t.Errorf("late Wait = %d, %v, want 5", code, err)
	}
	waitForEntries(t, srv, 0, "after the late Wait")
}

// A client that never waits (it crashed, or forgot) does not make the
// server keep the entry forever: it goes exitGrace after the exit.
func TestServerExpiresAbandonedProcesses(t *testing.T) {
	b, _, srv := serveWith(t, func(s *Server) { s.exitGrace = 200 * time.Millisecond })
	sbx := newServedSandbox(t, b)
	for range 10 {
		if _, err := sbx.Start(t.Context(), []string{"sh", "-c", "echo never read"}, sandbox.ExecOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if n := srv.processes(); n == 0 {
		t.Fatal("no entries right after starting 10 processes")
	}
	waitForEntries(t, srv, 0, "exitGrace after 10 unwaited exits")

	// A wait on one of them is a clear error, not a hang.
	sb := sbx.(*Sandbox)
	stale := &process{s: sb, pid: "1", stop: func() bool { return true }}
	_, err := stale.Wait()
	var ae *APIError
	if !errors.As(err, &ae) || ae.Status != 404 || !strings.Contains(err.Error(), "has exited") {
		t.Errorf("Wait on an expired process: %v, want a 404 saying it exited", err)
	}
}
