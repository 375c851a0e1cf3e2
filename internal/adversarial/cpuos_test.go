package adversarial

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/terpdev/terp/internal/agent"
	"github.com/terpdev/terp/internal/kernel"
	"github.com/terpdev/terp/internal/sandbox"
	"github.com/terpdev/terp/internal/sandbox/cpuos"
	"github.com/terpdev/terp/internal/terptest"
)

// These cases aim at what the cpuos backend adds to the sandbox: an HTTP
// API in front of it. They talk to a real cpuos.Server (on the local
// backend) over a real loopback listener, through terp's client where a
// model's code would reach it that way, and with raw requests where an
// attacker on the network (or a buggy client) would.

// rawCPUOS sends one request to the suite's cpuos server, bypassing terp's
// client and whatever checks it makes, and returns the status and up to
// 1 MiB of the body.
func rawCPUOS(t *testing.T, method, path, rawQuery, auth string, body io.Reader) (int, string) {
	t.Helper()
	cpuosTarget(t)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	u := cpuosServer.hs.URL + path
	if rawQuery != "" {
		u += "?" + rawQuery
	}
	req, err := http.NewRequestWithContext(ctx, method, u, body)
	if err != nil {
		t.Fatal(err)
	}
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	return resp.StatusCode, string(data)
}

// pathQuery is the files API's query for p, escaped so that the server
// decodes exactly p.
func pathQuery(p string) string { return "path=" + url.QueryEscape(p) }

// TestCPUOSAuth sends every kind of request without the bearer token, with
// a wrong one and with near misses: all are refused with 401, and none of
// them has an effect (no file written, no command run, the sandbox not
// killed or paused, its files not read).
func TestCPUOSAuth(t *testing.T) {
	t.Parallel()
	sbx := cpuosTarget(t).create(t, sandbox.Options{})
	ctx := t.Context()
	if err := sbx.WriteFile(ctx, "/work/secret.txt", strings.NewReader(host.secret)); err != nil {
		t.Fatal(err)
	}
	id := string(sbx.ID())
	requests := []struct{ method, path, query, body string }{
		{"POST", "/sandboxes", "", `{"templateID":"python","timeout":60}`},
		{"GET", "/sandboxes/" + id + "/files", pathQuery("/work/secret.txt"), ""},
		{"POST", "/sandboxes/" + id + "/files", pathQuery("/work/evil.txt"), "evil"},
		{"GET", "/sandboxes/" + id + "/files/list", pathQuery("/work"), ""},
		{"POST", "/sandboxes/" + id + "/exec", "", `{"cmd":["touch","/work/ran-exec"]}`},
		{"POST", "/sandboxes/" + id + "/processes", "", `{"cmd":["touch","/work/ran-process"]}`},
		{"POST", "/sandboxes/" + id + "/pause", "", ""},
		{"DELETE", "/sandboxes/" + id, "", ""},
	}
	auths := []struct{ label, header, query string }{
		{"no token", "", ""},
		{"wrong token", "Bearer wrong", ""},
		{"empty bearer", "Bearer ", ""},
		{"token with a suffix", "Bearer " + cpuosToken + "x", ""},
		{"token prefix", "Bearer " + cpuosToken[:len(cpuosToken)-1], ""},
		{"lower-case scheme", "bearer " + cpuosToken, ""},
		{"basic auth", "Basic " + cpuosToken, ""},
		{"token in the query", "", "access_token=" + cpuosToken + "&token=" + cpuosToken},
	}
	for _, a := range auths {
		for _, r := range requests {
			q := r.query
			if a.query != "" {
				q = strings.TrimPrefix(q+"&"+a.query, "&")
			}
			var body io.Reader
			if r.body != "" {
				body = strings.NewReader(r.body)
			}
			status, got := rawCPUOS(t, r.method, r.path, q, a.header, body)
			if status != http.StatusUnauthorized {
				t.Errorf("%s: %s %s answered %d, want 401: %s", a.label, r.method, r.path, status, clip(got))
			}
			if hasSecret(got) {
				t.Errorf("%s: %s %s returned the sandbox's secret file", a.label, r.method, r.path)
			}
		}
	}
	// Nothing happened: the sandbox is alive, nothing was written or run.
	res := runScript(t, sbx, `import os
print(sorted(f for f in os.listdir("/work") if not f.startswith(".")))`, 30*time.Second)
	if strings.TrimSpace(res.Stdout) != "['secret.txt']" {
		t.Errorf("after the refused requests /work holds %q (exit %d, %s)", res.Stdout, res.ExitCode, res.Stderr)
	}
}

// TestCPUOSFilesTraversal plants links in /work, then asks the server's
// files API, with raw requests, to read, write and list through them and
// through ../ and absolute paths. The server must refuse every one, write
// nothing on its machine, and never block on the FIFO.
func TestCPUOSFilesTraversal(t *testing.T) {
	t.Parallel()
	sbx := cpuosTarget(t).create(t, sandbox.Options{})
	res := runScript(t, sbx, strings.Replace(plantLinks, "%q", `"`+host.tmpSecret+`"`, 1), 30*time.Second)
	if !strings.Contains(res.Stdout, "planted") {
		t.Fatalf("the traps were not planted: %s %s", res.Stdout, res.Stderr)
	}
	auth := "Bearer " + cpuosToken
	base := "/sandboxes/" + string(sbx.ID())

	reads := []string{
		"/work/../etc/passwd", "/work/../../../../../etc/passwd", "../etc/passwd", "/etc/passwd",
		host.tmpSecret, "/work/x", "/work/d/etc/passwd", "/work/hostsecret", "/work/up/sandbox.json",
		"/work/sub/escape/etc/passwd", "/work/fifo", "/work/./../work/../etc/passwd", "/work/\x00/../etc/passwd",
		cpuosServer.root, "/proc/self/environ", "/work/d/proc/self/environ",
	}
	t.Run("read", func(t *testing.T) {
		for _, p := range reads {
			status, body := rawCPUOS(t, "GET", base+"/files", pathQuery(p), auth, nil)
			t.Logf("GET files %q: %d %s", p, status, clip(strings.TrimSpace(body)))
			if status == http.StatusOK {
				t.Errorf("GET files %q: 200 with %d bytes: %s", p, len(body), clip(body))
			}
			if hasSecret(body) || strings.Contains(body, host.apiKey) {
				t.Errorf("GET files %q returned the host's secret", p)
			}
		}
		// Percent-encoded dots arrive decoded once; a second decoding
		// would be the bug.
		status, _ := rawCPUOS(t, "GET", base+"/files", "path=%2Fwork%2F%252e%252e%2F%252e%252e%2Fetc%2Fpasswd", auth, nil)
		if status == http.StatusOK {
			t.Error("a doubly encoded ../ read a file")
		}
	})

	name := "terp-adversarial-written-" + randomHex()
	writes := []string{
		"/work/../../../../tmp/" + name, "/tmp/" + name, "../" + name, "/work/d/tmp/" + name,
		"/work/up/" + name, "/work/sub/escape/tmp/" + name,
	}
	// A write to a link or FIFO in /work itself may succeed, but only by
	// replacing that entry of /work with a regular file, never by writing
	// where the link points.
	replaces := []string{"/work/hostsecret", "/work/x", "/work/fifo"}
	t.Run("write", func(t *testing.T) {
		for _, p := range writes {
			status, body := rawCPUOS(t, "POST", base+"/files", pathQuery(p), auth, strings.NewReader("overwritten "+name))
			if status/100 == 2 {
				t.Errorf("POST files %q: %d %s", p, status, body)
			}
		}
		for _, p := range replaces {
			status, body := rawCPUOS(t, "POST", base+"/files", pathQuery(p), auth, strings.NewReader("overwritten "+name))
			t.Logf("POST files %q: %d %s", p, status, body)
		}
		res := runScript(t, sbx, `import os, stat
for p in ["/work/hostsecret", "/work/x", "/work/fifo"]:
    st = os.lstat(p)
    kind = "file" if stat.S_ISREG(st.st_mode) else "link" if stat.S_ISLNK(st.st_mode) else "fifo" if stat.S_ISFIFO(st.st_mode) else "other"
    print(p, kind, open(p).read() if kind == "file" else "")`, 30*time.Second)
		t.Logf("after the writes:\n%s", res.Stdout)
		for line := range strings.Lines(res.Stdout) {
			if f := strings.Fields(line); len(f) >= 2 && f[1] == "file" && !strings.Contains(line, "overwritten "+name) {
				t.Errorf("%s is a regular file that does not hold what was written", f[0])
			}
		}
		if _, err := os.Stat("/tmp/" + name); err == nil {
			t.Errorf("a write reached the host's /tmp/%s", name)
			os.Remove("/tmp/" + name)
		}
		if data, err := os.ReadFile(host.tmpSecret); err != nil || strings.TrimSpace(string(data)) != host.secret {
			t.Errorf("the host's secret file changed: %q %v", data, err)
		}
		if data, _ := os.ReadFile("/etc/passwd"); strings.Contains(string(data), name) {
			t.Error("a write through /work/x reached the host's /etc/passwd")
		}
		// Nothing landed anywhere under the server's own data either.
		_ = filepath.WalkDir(cpuosServer.root, func(p string, d fs.DirEntry, err error) error {
			if err == nil && strings.Contains(d.Name(), name) {
				t.Errorf("a write landed at %s on the server", p)
			}
			return nil
		})
	})

	t.Run("list", func(t *testing.T) {
		for _, p := range []string{"/", "/work/..", "/work/d", "/work/up", "/etc", "../", "/work/sub/escape", cpuosServer.root} {
			status, body := rawCPUOS(t, "GET", base+"/files/list", pathQuery(p), auth, nil)
			if status == http.StatusOK && strings.Contains(body, `"path"`) {
				t.Errorf("GET list %q: %s", p, clip(body))
			}
		}
	})
}

// countingTransport counts the response body bytes terp's client reads.
type countingTransport struct{ n *atomic.Int64 }

func (c countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := http.DefaultTransport.RoundTrip(r)
	if err == nil {
		resp.Body = &countingBody{resp.Body, c.n}
	}
	return resp, err
}

type countingBody struct {
	io.ReadCloser
	n *atomic.Int64
}

func (b *countingBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	b.n.Add(int64(n))
	return n, err
}

// heapInUse is the process's heap in use after a collection.
func heapInUse() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapInuse
}

// peakHeap samples the heap in use until stop is closed and returns the
// largest value seen.
func peakHeap(stop <-chan struct{}) <-chan uint64 {
	out := make(chan uint64, 1)
	go func() {
		var peak uint64
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for {
			var m runtime.MemStats
			runtime.ReadMemStats(&m)
			peak = max(peak, m.HeapInuse)
			select {
			case <-stop:
				out <- peak
				return
			case <-tick.C:
			}
		}
	}()
	return out
}

// TestCPUOSHugeDownload has the code make a 900 MiB file and terp download
// it with max_download_size at 1 MiB through agent.Download: it must refuse
// with ErrTooLarge after reading little more than the cap off the wire,
// leave nothing in the output directory and keep terp's memory flat. The
// test is not parallel, so the heap it measures is its own.
func TestCPUOSHugeDownload(t *testing.T) {
	tg := cpuosTarget(t)
	var read atomic.Int64
	b, err := cpuos.New(cpuos.Config{BaseURL: cpuosServer.hs.URL, APIKey: cpuosToken,
		HTTPClient: &http.Client{Transport: countingTransport{&read}}})
	if err != nil {
		t.Fatal(err)
	}
	tg.b = b
	sbx := tg.create(t, sandbox.Options{})
	res := runScript(t, sbx, `with open("/work/huge.bin", "wb") as f:
    f.truncate(900 << 20)
print("made")`, 30*time.Second)
	if !strings.Contains(res.Stdout, "made") {
		t.Fatalf("no huge file: %s %s", res.Stdout, res.Stderr)
	}
	dir := terptest.TempDir(t)
	before := heapInUse()
	stop := make(chan struct{})
	peak := peakHeap(stop)
	read.Store(0)
	start := time.Now()
	_, n, err := agent.Download(t.Context(), sbx, "huge.bin", dir, 1<<20)
	took := time.Since(start)
	close(stop)
	grew := int64(<-peak) - int64(before)
	t.Logf("Download: %v after %d bytes kept, %d bytes read off the wire, %s, heap grew %d KiB", err, n, read.Load(), took, grew>>10)
	if !errors.Is(err, agent.ErrTooLarge) {
		t.Errorf("Download of 900 MiB with a 1 MiB cap: %v, want ErrTooLarge", err)
	}
	if r := read.Load(); r > 16<<20 {
		t.Errorf("the client read %d MiB of a 900 MiB file to enforce a 1 MiB cap", r>>20)
	}
	if grew > 64<<20 {
		t.Errorf("the heap grew by %d MiB during the download", grew>>20)
	}
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		t.Errorf("the download left %s", e.Name())
	}
	stillWorks(t, sbx)
}

// TestCPUOSOutputFlood floods a process's stdout through the server's
// chunked stream. Read slowly, it must not pile up in terp (the pipe in the
// sandbox pushes back); read by the persistent kernel, 256 MiB must come
// out as a bounded head and tail, and the next cell must work. Not
// parallel, so the heap it measures is its own.
func TestCPUOSOutputFlood(t *testing.T) {
	sbx := cpuosTarget(t).create(t, sandbox.Options{})
	ctx := t.Context()
	flood := "import sys\nline = 'x' * 1023 + '\\n'\nwhile True:\n    sys.stdout.write(line)\n"
	before := heapInUse()
	stop := make(chan struct{})
	peak := peakHeap(stop)

	p, err := sbx.Start(ctx, []string{"python3", "-c", flood}, sandbox.ExecOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// Nobody reads for a while: the output must wait in the sandbox's
	// pipe, not in the server or the client.
	time.Sleep(2 * time.Second)
	stalled := int64(heapInUse()) - int64(before)
	start := time.Now()
	n, err := io.CopyN(io.Discard, p.Stdout(), 256<<20)
	t.Logf("stalled reader: heap +%d KiB; then read %d MiB in %s (%v)", stalled>>10, n>>20, time.Since(start), err)
	if err != nil {
		t.Errorf("reading the stream: %v", err)
	}
	if err := p.Signal(sandbox.SIGKILL); err != nil {
		t.Errorf("kill: %v", err)
	}
	go func() { _, _ = io.Copy(io.Discard, p.Stdout()) }()
	go func() { _, _ = io.Copy(io.Discard, p.Stderr()) }()
	waited := make(chan int, 1)
	go func() { code, _ := p.Wait(); waited <- code }()
	select {
	case code := <-waited:
		if code != 137 {
			t.Errorf("exit %d after SIGKILL, want 137", code)
		}
	case <-time.After(20 * time.Second):
		t.Error("Wait did not return after SIGKILL")
	}
	if stalled > 32<<20 {
		t.Errorf("with nobody reading, the heap grew by %d MiB", stalled>>20)
	}

	k, err := kernel.Start(ctx, sbx, kernel.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer k.Close()
	kres, err := k.Run(ctx, "import sys\nline = 'x' * 1023 + '\\n'\nfor _ in range(256 << 10):\n    sys.stdout.write(line)\n", 120*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	close(stop)
	grew := int64(<-peak) - int64(before)
	t.Logf("kernel: exit %d, kept %d bytes of 256 MiB, notice %q; peak heap +%d MiB", kres.ExitCode, len(kres.Stdout), kres.Notice, grew>>20)
	if len(kres.Stdout) > 2*sandbox.DefaultMaxOutput+1024 {
		t.Errorf("the kernel kept %d bytes of a 256 MiB flood", len(kres.Stdout))
	}
	if grew > 128<<20 {
		t.Errorf("the heap grew by %d MiB during the floods", grew>>20)
	}
	if r, err := k.Run(ctx, "print('alive')", 30*time.Second); err != nil || strings.TrimSpace(r.Stdout) != "alive" {
		t.Errorf("after the flood the next cell: %q %v", r.Stdout, err)
	}
}

// TestCPUOSServerSurvivesKillAll has one sandbox's code SIGKILL everything
// it can name, the server's own pid included; the server must keep serving:
// that sandbox's next step, a process running in another sandbox, and a
// new sandbox all work.
func TestCPUOSServerSurvivesKillAll(t *testing.T) {
	t.Parallel()
	tg := cpuosTarget(t)
	victim := tg.create(t, sandbox.Options{})
	bystander := tg.create(t, sandbox.Options{})
	ctx := t.Context()
	p, err := bystander.Start(ctx, []string{"python3", "-c", "import sys\nfor line in sys.stdin:\n    print(line.strip().upper(), flush=True)\n"}, sandbox.ExecOptions{})
	if err != nil {
		t.Fatal(err)
	}
	res := runScript(t, victim, `import os, signal
for pid in [os.getppid(), 1, `+strconv.Itoa(os.Getpid())+`] + list(range(2, 300)):
    if pid != os.getpid():
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
os.kill(-1, signal.SIGKILL)
`, 30*time.Second)
	t.Logf("kill-all: exit %d %q", res.ExitCode, res.Stderr)
	if _, err := p.Stdin().Write([]byte("still here\n")); err != nil {
		t.Errorf("the other sandbox's process lost its stdin: %v", err)
	}
	buf := make([]byte, len("STILL HERE\n"))
	if _, err := io.ReadFull(p.Stdout(), buf); err != nil || string(buf) != "STILL HERE\n" {
		t.Errorf("the other sandbox's process answered %q %v", buf, err)
	}
	_ = p.Stdin().Close()
	if code, err := p.Wait(); code != 0 || err != nil {
		t.Errorf("the other sandbox's process exited %d %v", code, err)
	}
	stillWorks(t, victim)
	stillWorks(t, tg.create(t, sandbox.Options{}))
}
