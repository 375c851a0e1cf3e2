// Package conformance is the test suite every sandbox backend passes. A new
// backend is added by calling Run from its own tests:
//
//	func TestConformance(t *testing.T) {
//		conformance.Run(t, func(t *testing.T) sandbox.Backend { return newBackend(t) })
//	}
//
// The suite checks the rules package sandbox states for every backend: files
// round-trip byte for byte, output is bounded, a timed-out command is killed
// with its children, the network is off and the host environment invisible,
// pause and resume keep files, the persistent kernel runs on the sandbox, and
// Close removes everything. Bench (bench.go) measures every backend with the
// same code, so their numbers compare.
package conformance

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"io"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/terpdev/terp/internal/kernel"
	"github.com/terpdev/terp/internal/sandbox"
)

// hostSecret is set in the test process's environment; no sandbox may see it.
const hostSecret = "TERP_CONFORMANCE_HOST_SECRET"

// Run runs the whole suite. newBackend is called once per subtest.
func Run(t *testing.T, newBackend func(t *testing.T) sandbox.Backend) {
	tests := []struct {
		name string
		fn   func(t *testing.T, b sandbox.Backend)
	}{
		{"FileRoundTrip", fileRoundTrip},
		{"LargeFile", largeFile},
		{"List", list},
		{"ExecExitCodes", execExitCodes},
		{"OutputBounded", outputBounded},
		{"TimeoutKillsChildren", timeoutKillsChildren},
		{"NoNetwork", noNetwork},
		{"HostEnvInvisible", hostEnvInvisible},
		{"PauseResume", pauseResume},
		{"Kernel", kernelMode},
		{"CloseRemoves", closeRemoves},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { tc.fn(t, newBackend(t)) })
	}
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return c
}

// create makes a sandbox that is closed when the test ends.
func create(t *testing.T, b sandbox.Backend) sandbox.Sandbox {
	t.Helper()
	sbx, err := b.Create(ctx(t), sandbox.Options{Timeout: 10 * time.Minute})
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	t.Cleanup(func() { _ = sbx.Close(context.Background()) })
	return sbx
}

func write(t *testing.T, sbx sandbox.Sandbox, path string, data []byte) {
	t.Helper()
	if err := sbx.WriteFile(ctx(t), path, bytes.NewReader(data)); err != nil {
		t.Fatalf("WriteFile %s: %v", path, err)
	}
}

func read(t *testing.T, sbx sandbox.Sandbox, path string) []byte {
	t.Helper()
	rc, err := sbx.ReadFile(ctx(t), path)
	if err != nil {
		t.Fatalf("ReadFile %s: %v", path, err)
	}
	defer rc.Close()
	data, err := io.ReadAll(rc)
	if err != nil {
		t.Fatalf("ReadFile %s: %v", path, err)
	}
	return data
}

func run(t *testing.T, sbx sandbox.Sandbox, script string, opt sandbox.ExecOptions) sandbox.ExecResult {
	t.Helper()
	res, err := sbx.Exec(ctx(t), []string{"sh", "-c", script}, opt)
	if err != nil {
		t.Fatalf("Exec %q: %v", script, err)
	}
	return res
}

func fileRoundTrip(t *testing.T, b sandbox.Backend) {
	sbx := create(t, b)
	text := []byte("month,revenue\n2024-01,100\nünïcode ✓\n")
	bin := make([]byte, 4096)
	for i := range bin {
		bin[i] = byte(i)
	}
	write(t, sbx, "/work/a.csv", text)
	write(t, sbx, "/work/sub/b.bin", bin)
	if got := read(t, sbx, "/work/a.csv"); !bytes.Equal(got, text) {
		t.Errorf("text file came back as %q", got)
	}
	if got := read(t, sbx, "/work/sub/b.bin"); !bytes.Equal(got, bin) {
		t.Errorf("binary file came back changed (%d bytes)", len(got))
	}
	// The code sees what was written, and the host sees what the code wrote.
	res := run(t, sbx, "cat /work/a.csv > /work/copy.csv && printf 'from code' > /work/out.txt", sandbox.ExecOptions{})
	if res.ExitCode != 0 {
		t.Fatalf("exit %d: %s", res.ExitCode, res.Stderr)
	}
	if got := read(t, sbx, "/work/copy.csv"); !bytes.Equal(got, text) {
		t.Errorf("copy made in the sandbox is %q", got)
	}
	if got := string(read(t, sbx, "/work/out.txt")); got != "from code" {
		t.Errorf("file written by code reads %q", got)
	}
	if _, err := sbx.ReadFile(ctx(t), "/work/missing.txt"); err == nil {
		t.Error("reading a missing file succeeded")
	}
}

func largeFile(t *testing.T, b sandbox.Backend) {
	sbx := create(t, b)
	data := make([]byte, 50<<20)
	if _, err := rand.Read(data); err != nil {
		t.Fatal(err)
	}
	write(t, sbx, "/work/big.bin", data)
	if got := read(t, sbx, "/work/big.bin"); !bytes.Equal(got, data) {
		t.Fatalf("50 MB file came back changed (%d bytes)", len(got))
	}
	res := run(t, sbx, "wc -c < /work/big.bin", sandbox.ExecOptions{})
	if strings.TrimSpace(res.Stdout) != "52428800" {
		t.Errorf("the sandbox sees %q bytes", res.Stdout)
	}
}

func list(t *testing.T, b sandbox.Backend) {
	sbx := create(t, b)
	write(t, sbx, "/work/a.txt", []byte("a"))
	write(t, sbx, "/work/d/e/f.txt", []byte("four"))
	run(t, sbx, "mkdir -p /work/empty && printf xyz > /work/d/g.txt", sandbox.ExecOptions{})
	files, err := sbx.List(ctx(t), "/work")
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]int64{}
	for _, f := range files {
		got[f.Path] = f.Size
	}
	want := map[string]int64{"a.txt": 1, "d/e/f.txt": 4, "d/g.txt": 3}
	for p, n := range want {
		if got[p] != n {
			t.Errorf("List: %s has size %d, want %d (all: %v)", p, got[p], n, got)
		}
	}
	if _, ok := got["empty"]; ok {
		t.Errorf("List returned a directory: %v", got)
	}
}

func execExitCodes(t *testing.T, b sandbox.Backend) {
	sbx := create(t, b)
	res := run(t, sbx, "echo out; echo err >&2; exit 3", sandbox.ExecOptions{})
	if res.ExitCode != 3 || res.Stdout != "out\n" || res.Stderr != "err\n" {
		t.Errorf("got exit %d stdout %q stderr %q", res.ExitCode, res.Stdout, res.Stderr)
	}
	res = run(t, sbx, "pwd; python3 -c 'print(6*7)'", sandbox.ExecOptions{})
	if res.ExitCode != 0 || res.Stdout != sandbox.WorkDir+"\n42\n" {
		t.Errorf("got exit %d stdout %q stderr %q", res.ExitCode, res.Stdout, res.Stderr)
	}
	res = run(t, sbx, "cat; echo \"$FOO\"", sandbox.ExecOptions{Stdin: strings.NewReader("in\n"), Env: []string{"FOO=bar"}})
	if res.Stdout != "in\nbar\n" {
		t.Errorf("stdin and env: stdout %q stderr %q", res.Stdout, res.Stderr)
	}
	res = run(t, sbx, "kill -KILL $$", sandbox.ExecOptions{})
	if res.ExitCode != 128+9 {
		t.Errorf("killed by SIGKILL: exit %d, want 137", res.ExitCode)
	}
}

func outputBounded(t *testing.T, b sandbox.Backend) {
	sbx := create(t, b)
	res := run(t, sbx, "head -c 20000000 /dev/zero | tr '\\0' x; echo; echo END", sandbox.ExecOptions{MaxStdout: 1000, MaxStderr: 100})
	if res.ExitCode != 0 {
		t.Fatalf("exit %d: %s", res.ExitCode, res.Stderr)
	}
	if len(res.Stdout) > 2000 {
		t.Errorf("stdout kept %d bytes, bound 1000", len(res.Stdout))
	}
	if !strings.HasPrefix(res.Stdout, "xxx") || !strings.HasSuffix(res.Stdout, "END\n") {
		t.Errorf("head and tail not kept: %q...%q", res.Stdout[:min(20, len(res.Stdout))], res.Stdout[max(0, len(res.Stdout)-20):])
	}
	if res.StdoutBytes != 20000005 {
		t.Errorf("StdoutBytes = %d, want 20000005", res.StdoutBytes)
	}
}

func timeoutKillsChildren(t *testing.T, b sandbox.Backend) {
	sbx := create(t, b)
	start := time.Now()
	// The child outlives its parent's death unless the backend kills the
	// whole tree; if it survives it writes the marker file.
	res := run(t, sbx, "(sleep 3; echo alive > /work/marker) & sleep 60", sandbox.ExecOptions{Timeout: time.Second})
	if !res.TimedOut || res.ExitCode != sandbox.ExitTimedOut {
		t.Errorf("TimedOut %v exit %d, want true %d", res.TimedOut, res.ExitCode, sandbox.ExitTimedOut)
	}
	if d := time.Since(start); d > 20*time.Second {
		t.Errorf("a 1s timeout took %v", d)
	}
	time.Sleep(4 * time.Second)
	if _, err := sbx.ReadFile(ctx(t), "/work/marker"); err == nil {
		t.Error("a child of the timed-out command survived and wrote its marker")
	}
}

func noNetwork(t *testing.T, b sandbox.Backend) {
	sbx := create(t, b)
	script := `import socket
s = socket.socket()
s.settimeout(3)
try:
    s.connect(("1.1.1.1", 80))
    print("CONNECTED")
except OSError as e:
    print("blocked", e)
`
	write(t, sbx, "/work/net.py", []byte(script))
	res := run(t, sbx, "python3 /work/net.py", sandbox.ExecOptions{Timeout: 30 * time.Second})
	if strings.Contains(res.Stdout, "CONNECTED") || !strings.Contains(res.Stdout, "blocked") {
		t.Errorf("network is not off: stdout %q stderr %q", res.Stdout, res.Stderr)
	}
}

func hostEnvInvisible(t *testing.T, b sandbox.Backend) {
	t.Setenv(hostSecret, "leaked-value")
	sbx := create(t, b)
	res := run(t, sbx, "env", sandbox.ExecOptions{})
	if strings.Contains(res.Stdout, "leaked-value") || strings.Contains(res.Stdout, hostSecret) {
		t.Errorf("the host environment reached the sandbox:\n%s", res.Stdout)
	}
	if os.Getenv(hostSecret) == "" {
		t.Fatal("the test could not set its variable")
	}
}

func pauseResume(t *testing.T, b sandbox.Backend) {
	sbx := create(t, b)
	write(t, sbx, "/work/keep.txt", []byte("kept"))
	run(t, sbx, "mkdir -p /work/out && echo made > /work/out/made.txt", sandbox.ExecOptions{})
	id, err := sbx.Pause(ctx(t))
	if err != nil {
		t.Fatalf("Pause: %v", err)
	}
	if id == "" {
		t.Fatal("Pause returned an empty session id")
	}
	again, err := b.Resume(ctx(t), id)
	if err != nil {
		t.Fatalf("Resume(%s): %v", id, err)
	}
	t.Cleanup(func() { _ = again.Close(context.Background()) })
	if got := string(read(t, again, "/work/keep.txt")); got != "kept" {
		t.Errorf("uploaded file after resume: %q", got)
	}
	res := run(t, again, "cat /work/out/made.txt", sandbox.ExecOptions{})
	if res.Stdout != "made\n" {
		t.Errorf("file the code made, after resume: %q %q", res.Stdout, res.Stderr)
	}
}

func kernelMode(t *testing.T, b sandbox.Backend) {
	sbx := create(t, b)
	k, err := kernel.Start(ctx(t), sbx, kernel.Options{})
	if err != nil {
		t.Fatalf("kernel.Start: %v", err)
	}
	defer func() { _ = k.Close() }()
	steps := []struct{ code, want string }{
		{"x = 41\nprint('set')", "set\n"},
		{"x += 1\nprint(x)", "42\n"},
		{"import matplotlib\nmatplotlib.use('Agg')\nimport matplotlib.pyplot as plt\nplt.plot([1, 2, 3], [x, 2, 1])\nplt.savefig('/work/chart.png')\nprint('saved')", "saved\n"},
	}
	for _, s := range steps {
		res, err := k.Run(ctx(t), s.code, 30*time.Second)
		if err != nil {
			t.Fatalf("Run %q: %v", s.code, err)
		}
		if res.ExitCode != 0 || res.Stdout != s.want {
			t.Fatalf("Run %q: exit %d stdout %q stderr %q notice %q", s.code, res.ExitCode, res.Stdout, res.Stderr, res.Notice)
		}
	}
	// A step that times out is interrupted; the session and its variables
	// survive it.
	res, err := k.Run(ctx(t), "import time\ntime.sleep(60)", time.Second)
	if err != nil || !res.TimedOut {
		t.Fatalf("a step past its timeout: %+v, %v", res, err)
	}
	res, err = k.Run(ctx(t), "print(x)", 30*time.Second)
	if err != nil || res.Stdout != "42\n" {
		t.Errorf("after an interrupted step: %+v, %v", res, err)
	}
	png := read(t, sbx, "/work/chart.png")
	if !bytes.HasPrefix(png, []byte("\x89PNG")) {
		t.Errorf("the chart is not a PNG (%d bytes)", len(png))
	}
}

func closeRemoves(t *testing.T, b sandbox.Backend) {
	sbx, err := b.Create(ctx(t), sandbox.Options{Timeout: 10 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	write(t, sbx, "/work/a.txt", []byte("a"))
	id := sbx.ID()
	if err := sbx.Close(ctx(t)); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if _, err := b.Resume(ctx(t), id); !errors.Is(err, sandbox.ErrExpired) {
		t.Errorf("Resume after Close: %v, want ErrExpired", err)
	}
}
