package cpuos

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/terpdev/terp/internal/sandbox"
)

// churnCycles is how many conversations TestServerChurnRetainsNothing has
// after its warm-up; TERP_CHURN_CYCLES sets it. Unset, the test is
// skipped: a few hundred sandboxes take a minute, too long for make test.
func churnCycles(t *testing.T) int {
	t.Helper()
	v := os.Getenv("TERP_CHURN_CYCLES")
	if v == "" {
		t.Skip("set TERP_CHURN_CYCLES (e.g. 1000) to churn sandboxes through the server")
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		t.Fatalf("TERP_CHURN_CYCLES=%q: want a positive number", v)
	}
	return n
}

// churnClients is how many conversations run at a time, as the soak's
// clients do.
const churnClients = 4

// churn has one conversation the way terp serve has it on cpuos: a
// sandbox, a kernel-like process that echoes stdin to stdout, two execs, a
// file written and read back, then the process and the sandbox closed.
// Every other conversation closes the sandbox without waiting for its
// process, as a deleted container does, so the server keeps that entry
// for exitGrace.
func churn(parent context.Context, b *Backend, i int) error {
	// The kernel starts its process on a context of its own that Close
	// ends; an unwaited process stays registered on it until then.
	ctx, cancel := context.WithCancel(parent)
	defer cancel()
	sbx, err := b.Create(ctx, sandbox.Options{Timeout: time.Minute})
	if err != nil {
		return err
	}
	defer func() { _ = sbx.Close(context.Background()) }()
	p, err := sbx.Start(ctx, []string{"sh", "-c", "while read l; do echo \"$l\"; done"}, sandbox.ExecOptions{})
	if err != nil {
		return err
	}
	// The kernel reads both streams to their end, whatever happens.
	lines := make(chan string)
	var streams sync.WaitGroup
	streams.Go(func() {
		defer close(lines)
		sc := bufio.NewScanner(p.Stdout())
		for sc.Scan() {
			lines <- sc.Text()
		}
	})
	streams.Go(func() { _, _ = io.Copy(io.Discard, p.Stderr()) })
	defer func() {
		go func() {
			for range lines { // drain what nobody reads now
			}
		}()
	}()
	for run := range 2 {
		line := fmt.Sprintf("cell %d of %d", run, i)
		if _, err := io.WriteString(p.Stdin(), line+"\n"); err != nil {
			return err
		}
		if got := <-lines; got != line {
			return fmt.Errorf("kernel echo %q, want %q", got, line)
		}
		res, err := sbx.Exec(ctx, []string{"sh", "-c", "echo ran " + strconv.Itoa(run)}, sandbox.ExecOptions{})
		if err != nil || res.Stdout != "ran "+strconv.Itoa(run)+"\n" {
			return fmt.Errorf("exec: %+v, %v", res, err)
		}
	}
	if err := sbx.WriteFile(ctx, "data.txt", strings.NewReader("payload")); err != nil {
		return err
	}
	rc, err := sbx.ReadFile(ctx, "data.txt")
	if err != nil {
		return err
	}
	data, err := io.ReadAll(rc)
	rc.Close()
	if err != nil || string(data) != "payload" {
		return fmt.Errorf("read back %q, %v", data, err)
	}
	if i%2 == 0 {
		if err := p.Signal(sandbox.SIGKILL); err != nil {
			return err
		}
		_, _ = p.Wait()
	}
	if err := sbx.Close(ctx); err != nil {
		return err
	}
	ended := make(chan struct{})
	go func() { streams.Wait(); close(ended) }()
	select {
	case <-ended:
		return nil
	case <-time.After(10 * time.Second):
		return fmt.Errorf("the process's streams did not end after its sandbox was closed")
	}
}

// heapAtRest is the live heap and goroutines once everything freed is
// collected, written as a heap profile to path.
func heapAtRest(t *testing.T, path string) (objects, inuse uint64, goroutines int) {
	t.Helper()
	var ms runtime.MemStats
	for range 3 {
		runtime.GC()
	}
	runtime.ReadMemStats(&ms)
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := pprof.WriteHeapProfile(f); err != nil {
		t.Fatal(err)
	}
	g, err := os.Create(strings.TrimSuffix(path, ".pprof") + ".goroutines.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	if err := pprof.Lookup("goroutine").WriteTo(g, 1); err != nil {
		t.Fatal(err)
	}
	return ms.HeapObjects, ms.HeapInuse, runtime.NumGoroutine()
}

// A server that ran thousands of conversations must hold no more than one
// that ran a few hundred, once both are at rest: the soak of terp sandbox
// serve saw its RSS creep by 0.3 KiB per conversation, and a retained
// object per sandbox, process or request would show here as heap objects
// or goroutines that grow with the cycles. TERP_CHURN_PROFILES names a
// directory to keep the start and end heap profiles in for
// `go tool pprof -diff_base`.
func TestServerChurnRetainsNothing(t *testing.T) {
	cycles := churnCycles(t)
	// Every allocation in the profiles, not one per 512 KiB: what is kept
	// per conversation is a few small objects.
	defer func(rate int) { runtime.MemProfileRate = rate }(runtime.MemProfileRate)
	runtime.MemProfileRate = 1
	const grace = 200 * time.Millisecond
	b, _, srv := serveWith(t, func(s *Server) { s.exitGrace = grace })
	dir := os.Getenv("TERP_CHURN_PROFILES")
	if dir == "" {
		dir = t.TempDir()
	}

	run := func(from, n int) {
		t.Helper()
		var wg sync.WaitGroup
		errs := make(chan error, n)
		next := make(chan int)
		for range churnClients {
			wg.Go(func() {
				for i := range next {
					if err := churn(t.Context(), b, i); err != nil {
						errs <- fmt.Errorf("conversation %d: %w", i, err)
					}
				}
			})
		}
		for i := from; i < from+n; i++ {
			next <- i
		}
		close(next)
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
		// Every entry left for exitGrace is gone after it.
		time.Sleep(2 * grace)
		waitForEntries(t, srv, 0, "at rest")
		srv.mu.Lock()
		left := len(srv.sandboxes)
		srv.mu.Unlock()
		if left != 0 {
			t.Fatalf("%d sandboxes still served at rest", left)
		}
	}

	const warm = 200
	run(0, warm)
	objs0, inuse0, gor0 := heapAtRest(t, filepath.Join(dir, "start.pprof"))
	run(warm, cycles)
	objs1, inuse1, gor1 := heapAtRest(t, filepath.Join(dir, "end.pprof"))
	t.Logf("after %d conversations: %d heap objects, %.1f KiB in use, %d goroutines", warm, objs0, float64(inuse0)/1024, gor0)
	t.Logf("after %d more: %d heap objects (%+d, %+.2f per conversation), %.1f KiB in use (%+.1f), %d goroutines",
		cycles, objs1, int64(objs1)-int64(objs0), float64(int64(objs1)-int64(objs0))/float64(cycles),
		float64(inuse1)/1024, (float64(inuse1)-float64(inuse0))/1024, gor1)

	// One retained object per conversation would be cycles objects; the
	// runtime's and the connection pool's own noise is a few hundred.
	if grew := int64(objs1) - int64(objs0); grew > int64(cycles)/2+500 {
		t.Errorf("heap objects grew by %d over %d conversations: something is kept per conversation", grew, cycles)
	}
	if gor1 > gor0+churnClients*4 {
		t.Errorf("goroutines grew from %d to %d over %d conversations", gor0, gor1, cycles)
	}
}
