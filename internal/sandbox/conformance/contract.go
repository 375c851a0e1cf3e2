package conformance

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"io"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/terpdev/terp/internal/sandbox"
)

// contract are the checks that need no shell or Python: their commands are
// named (commands.go), and each backend runs them its own way.
var contract = []check{
	{"FileRoundTrip", fileRoundTrip},
	{"PathsStayInWork", pathsStayInWork},
	{"LargeFile", largeFile},
	{"List", list},
	{"DataDir", dataDir},
	{"ExecExitCodes", execExitCodes},
	{"WorkingDir", workingDir},
	{"OutputBounded", outputBounded},
	{"Timeout", timeout},
	{"HostEnvInvisible", hostEnvInvisible},
	{"Start", start},
	{"PauseResume", pauseResume},
	{"CloseRemoves", closeRemoves},
}

// hostSecret is set in the test process's environment; no sandbox may see it.
const hostSecret = "TERP_CONFORMANCE_HOST_SECRET"

func fileRoundTrip(t *testing.T, b sandbox.Backend, cmds Commands) {
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
	// A path relative to /work names the same file.
	if got := read(t, sbx, "sub/b.bin"); !bytes.Equal(got, bin) {
		t.Errorf("sub/b.bin is not /work/sub/b.bin (%d bytes)", len(got))
	}
	// Writing again replaces the file, leaving nothing of the old one.
	write(t, sbx, "/work/sub/b.bin", []byte("short"))
	if got := string(read(t, sbx, "/work/sub/b.bin")); got != "short" {
		t.Errorf("a replaced file reads %q", got)
	}
	// The code sees what was written, and the host sees what the code wrote.
	res := exec(t, sbx, cmds("copy", "/work/a.csv", "/work/copy.csv"), sandbox.ExecOptions{})
	if res.ExitCode != 0 {
		t.Fatalf("copy: exit %d: %s", res.ExitCode, res.Stderr)
	}
	if got := read(t, sbx, "/work/copy.csv"); !bytes.Equal(got, text) {
		t.Errorf("copy made in the sandbox is %q", got)
	}
	res = exec(t, sbx, cmds("write", "/work/out.txt", "from code"), sandbox.ExecOptions{})
	if res.ExitCode != 0 {
		t.Fatalf("write: exit %d: %s", res.ExitCode, res.Stderr)
	}
	if got := string(read(t, sbx, "/work/out.txt")); got != "from code" {
		t.Errorf("file written by code reads %q", got)
	}
	if _, err := sbx.ReadFile(ctx(t), "/work/missing.txt"); err == nil {
		t.Error("reading a missing file succeeded")
	}
}

// pathsStayInWork checks that terp's own file access cannot be steered out
// of /work by a path the model chose.
func pathsStayInWork(t *testing.T, b sandbox.Backend, cmds Commands) {
	sbx := create(t, b)
	for _, p := range []string{"/etc/terp-conformance", "/work/../etc/terp-conformance", "../terp-conformance", "/workshop/terp-conformance", "/work"} {
		if err := sbx.WriteFile(ctx(t), p, strings.NewReader("x")); err == nil {
			t.Errorf("WriteFile %s succeeded", p)
		}
	}
	for _, p := range []string{"/etc/passwd", "/work/../etc/passwd", "../../etc/passwd", "/work"} {
		if rc, err := sbx.ReadFile(ctx(t), p); err == nil {
			rc.Close()
			t.Errorf("ReadFile %s succeeded", p)
		}
	}
	for _, p := range []string{"/etc", "/work/.."} {
		if _, err := sbx.List(ctx(t), p); err == nil {
			t.Errorf("List %s succeeded", p)
		}
	}
}

func largeFile(t *testing.T, b sandbox.Backend, cmds Commands) {
	sbx := create(t, b)
	data := make([]byte, 50<<20)
	if _, err := rand.Read(data); err != nil {
		t.Fatal(err)
	}
	write(t, sbx, "/work/big.bin", data)
	if got := read(t, sbx, "/work/big.bin"); !bytes.Equal(got, data) {
		t.Fatalf("50 MB file came back changed (%d bytes)", len(got))
	}
	res := exec(t, sbx, cmds("size", "/work/big.bin"), sandbox.ExecOptions{})
	if strings.TrimSpace(res.Stdout) != strconv.Itoa(len(data)) {
		t.Errorf("the sandbox sees %q bytes", res.Stdout)
	}
}

func list(t *testing.T, b sandbox.Backend, cmds Commands) {
	sbx := create(t, b)
	write(t, sbx, "/work/a.txt", []byte("a"))
	write(t, sbx, "/work/d/e/f.txt", []byte("four"))
	exec(t, sbx, cmds("mkdir", "/work/empty"), sandbox.ExecOptions{})
	exec(t, sbx, cmds("write", "/work/d/g.txt", "xyz"), sandbox.ExecOptions{})
	got := sizes(t, sbx, "/work")
	want := map[string]int64{"a.txt": 1, "d/e/f.txt": 4, "d/g.txt": 3}
	for p, n := range want {
		if got[p] != n {
			t.Errorf("List: %s has size %d, want %d (all: %v)", p, got[p], n, got)
		}
	}
	for p := range got {
		if p == "empty" || p == "d" || p == "d/e" || strings.HasPrefix(p, "/") {
			t.Errorf("List returned %q, which is a directory or not relative: %v", p, got)
		}
	}
	// A subdirectory's listing is relative to it.
	got = sizes(t, sbx, "/work/d")
	if len(got) != 2 || got["e/f.txt"] != 4 || got["g.txt"] != 3 {
		t.Errorf("List /work/d: %v, want e/f.txt and g.txt", got)
	}
	if _, err := sbx.List(ctx(t), "/work/missing"); err == nil {
		t.Error("listing a missing directory succeeded")
	}
	if _, err := sbx.List(ctx(t), "/work/a.txt"); err == nil {
		t.Error("listing a file succeeded")
	}
}

// dataDir checks that /mnt/data is /work under another name, for the code
// and for terp's own file access: notebook-trained models read and write
// there. A file is one file whichever name wrote it, and is listed once, by
// its /work name.
func dataDir(t *testing.T, b sandbox.Backend, cmds Commands) {
	sbx := create(t, b)
	write(t, sbx, "/work/up.csv", []byte("a,b\n1,2\n"))
	if res := exec(t, sbx, cmds("cat", "/mnt/data/up.csv"), sandbox.ExecOptions{}); res.ExitCode != 0 || res.Stdout != "a,b\n1,2\n" {
		t.Errorf("the code reads /mnt/data/up.csv as exit %d %q %q", res.ExitCode, res.Stdout, res.Stderr)
	}
	if res := exec(t, sbx, cmds("write", "/mnt/data/out/chart.txt", "saved"), sandbox.ExecOptions{}); res.ExitCode != 0 {
		t.Fatalf("writing /mnt/data/out/chart.txt: exit %d %s", res.ExitCode, res.Stderr)
	}
	for _, p := range []string{"/work/out/chart.txt", "/mnt/data/out/chart.txt", "out/chart.txt"} {
		if got := string(read(t, sbx, p)); got != "saved" {
			t.Errorf("ReadFile %s = %q, want what the code wrote in /mnt/data", p, got)
		}
	}
	write(t, sbx, "/mnt/data/put.txt", []byte("put"))
	if res := exec(t, sbx, cmds("cat", "/work/put.txt"), sandbox.ExecOptions{}); res.Stdout != "put" {
		t.Errorf("WriteFile /mnt/data/put.txt: the code reads /work/put.txt as %q %q", res.Stdout, res.Stderr)
	}
	got := sizes(t, sbx, "/work")
	want := map[string]int64{"up.csv": 8, "out/chart.txt": 5, "put.txt": 3}
	if len(got) != len(want) {
		t.Errorf("List /work = %v, want each file once: %v", got, want)
	}
	for p, n := range want {
		if got[p] != n {
			t.Errorf("List /work: %s has size %d, want %d (all: %v)", p, got[p], n, got)
		}
	}
	if got := sizes(t, sbx, "/mnt/data/out"); len(got) != 1 || got["chart.txt"] != 5 {
		t.Errorf("List /mnt/data/out = %v, want chart.txt", got)
	}
	for _, p := range []string{"/mnt/data/../../etc/terp-conformance", "/mnt/database/x", "/mnt/x"} {
		if err := sbx.WriteFile(ctx(t), p, strings.NewReader("x")); err == nil {
			t.Errorf("WriteFile %s succeeded", p)
		}
	}
}

// sizes lists dir as path → size, checking every entry is a regular file.
func sizes(t *testing.T, sbx sandbox.Sandbox, dir string) map[string]int64 {
	t.Helper()
	files, err := sbx.List(ctx(t), dir)
	if err != nil {
		t.Fatalf("List %s: %v", dir, err)
	}
	got := map[string]int64{}
	for _, f := range files {
		got[f.Path] = f.Size
		if !f.Mode.IsRegular() {
			t.Errorf("List %s: %s has mode %v", dir, f.Path, f.Mode)
		}
	}
	return got
}

func execExitCodes(t *testing.T, b sandbox.Backend, cmds Commands) {
	sbx := create(t, b)
	res := exec(t, sbx, cmds("echo-exit"), sandbox.ExecOptions{})
	if res.ExitCode != 3 || res.Stdout != "out\n" || res.Stderr != "err\n" {
		t.Errorf("got exit %d stdout %q stderr %q", res.ExitCode, res.Stdout, res.Stderr)
	}
	if res.StdoutBytes != 4 || res.StderrBytes != 4 {
		t.Errorf("StdoutBytes %d StderrBytes %d, want 4 and 4", res.StdoutBytes, res.StderrBytes)
	}
	res = exec(t, sbx, cmds("cat-env"), sandbox.ExecOptions{Stdin: strings.NewReader("in\n"), Env: []string{"FOO=bar"}})
	if res.Stdout != "in\nbar\n" {
		t.Errorf("stdin and env: stdout %q stderr %q", res.Stdout, res.Stderr)
	}
	// Without Stdin the command reads an empty stdin rather than waiting.
	res = exec(t, sbx, cmds("cat-env"), sandbox.ExecOptions{})
	if res.ExitCode != 0 || res.Stdout != "\n" {
		t.Errorf("no stdin, no env: exit %d stdout %q stderr %q", res.ExitCode, res.Stdout, res.Stderr)
	}
}

func workingDir(t *testing.T, b sandbox.Backend, cmds Commands) {
	sbx := create(t, b)
	res := exec(t, sbx, cmds("pwd"), sandbox.ExecOptions{})
	if res.Stdout != sandbox.WorkDir+"\n" {
		t.Errorf("default working directory: stdout %q stderr %q", res.Stdout, res.Stderr)
	}
	write(t, sbx, "/work/d/x.txt", []byte("x"))
	res = exec(t, sbx, cmds("pwd"), sandbox.ExecOptions{Dir: "/work/d"})
	if res.Stdout != "/work/d\n" {
		t.Errorf("Dir /work/d: stdout %q stderr %q", res.Stdout, res.Stderr)
	}
	if _, err := sbx.Exec(ctx(t), cmds("pwd"), sandbox.ExecOptions{Dir: "/work/missing"}); err == nil {
		t.Error("a command ran in a missing directory")
	}
}

func outputBounded(t *testing.T, b sandbox.Backend, cmds Commands) {
	sbx := create(t, b)
	res := exec(t, sbx, cmds("flood", "20000000", "2000"), sandbox.ExecOptions{MaxStdout: 1000, MaxStderr: 100})
	if res.ExitCode != 0 {
		t.Fatalf("exit %d: %s", res.ExitCode, res.Stderr)
	}
	for _, s := range []struct {
		name        string
		got         string
		total, want int64
		bound       int
		fill        string
	}{
		{"stdout", res.Stdout, res.StdoutBytes, 20000005, 1000, "xxx"},
		{"stderr", res.Stderr, res.StderrBytes, 2005, 100, "yyy"},
	} {
		if len(s.got) > 2*s.bound {
			t.Errorf("%s kept %d bytes, bound %d", s.name, len(s.got), s.bound)
		}
		if !strings.HasPrefix(s.got, s.fill) || !strings.HasSuffix(s.got, "END\n") {
			t.Errorf("%s: head and tail not kept: %q...%q", s.name, s.got[:min(20, len(s.got))], s.got[max(0, len(s.got)-20):])
		}
		if !saysOmitted(s.got) {
			t.Errorf("%s does not say where it was cut: %q", s.name, s.got)
		}
		if s.total != s.want {
			t.Errorf("%s: %d bytes counted, want %d", s.name, s.total, s.want)
		}
	}
}

// saysOmitted reports whether out has the line Capture puts where it cut.
func saysOmitted(out string) bool {
	for line := range strings.Lines(out) {
		if _, ok := sandbox.Omitted(strings.TrimSuffix(line, "\n")); ok {
			return true
		}
	}
	return false
}

func timeout(t *testing.T, b sandbox.Backend, cmds Commands) {
	sbx := create(t, b)
	res := exec(t, sbx, cmds("tick", "/work/tick"), sandbox.ExecOptions{Timeout: time.Second})
	if !res.TimedOut || res.ExitCode != sandbox.ExitTimedOut {
		t.Errorf("TimedOut %v exit %d, want true %d", res.TimedOut, res.ExitCode, sandbox.ExitTimedOut)
	}
	if res.Stdout != "started\n" {
		t.Errorf("what the command printed before its timeout: %q", res.Stdout)
	}
	// Nothing of the command survives Exec: the file it kept rewriting
	// stays as it was, however long it is watched.
	before := readIfAny(t, sbx, "/work/tick")
	exec(t, sbx, cmds("pwd"), sandbox.ExecOptions{})
	if after := readIfAny(t, sbx, "/work/tick"); after != before {
		t.Errorf("the timed-out command still runs: /work/tick went from %q to %q", before, after)
	}
}

// readIfAny reads p, or returns "" when it does not exist.
func readIfAny(t *testing.T, sbx sandbox.Sandbox, p string) string {
	t.Helper()
	rc, err := sbx.ReadFile(ctx(t), p)
	if err != nil {
		return ""
	}
	defer rc.Close()
	data, err := io.ReadAll(rc)
	if err != nil {
		t.Fatalf("ReadFile %s: %v", p, err)
	}
	return string(data)
}

func hostEnvInvisible(t *testing.T, b sandbox.Backend, cmds Commands) {
	t.Setenv(hostSecret, "leaked-value")
	sbx := create(t, b)
	res := exec(t, sbx, cmds("env"), sandbox.ExecOptions{Env: []string{"TERP_CONFORMANCE_GIVEN=yes"}})
	if strings.Contains(res.Stdout, "leaked-value") || strings.Contains(res.Stdout, hostSecret) {
		t.Errorf("the host environment reached the sandbox:\n%s", res.Stdout)
	}
	if !strings.Contains(res.Stdout, "TERP_CONFORMANCE_GIVEN=yes\n") {
		t.Errorf("the environment given to the command is not in it:\n%s", res.Stdout)
	}
	if os.Getenv(hostSecret) == "" {
		t.Fatal("the test could not set its variable")
	}
}

// start checks a background command's pipes, exit code and SIGKILL.
func start(t *testing.T, b sandbox.Backend, cmds Commands) {
	sbx := create(t, b)
	p, err := sbx.Start(ctx(t), cmds("echo-lines"), sandbox.ExecOptions{})
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	stdout, stderr := drain(p.Stdout()), drain(p.Stderr())
	if _, err := io.WriteString(p.Stdin(), "a\nb\n"); err != nil {
		t.Fatalf("write stdin: %v", err)
	}
	if err := p.Stdin().Close(); err != nil {
		t.Fatalf("close stdin: %v", err)
	}
	code, err := p.Wait()
	if err != nil || code != 4 {
		t.Errorf("Wait: exit %d, %v; want 4", code, err)
	}
	if out, errOut := <-stdout, <-stderr; out != "got a\ngot b\n" || errOut != "done\n" {
		t.Errorf("stdout %q stderr %q", out, errOut)
	}

	p, err = sbx.Start(ctx(t), cmds("hang"), sandbox.ExecOptions{})
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	stderr = drain(p.Stderr())
	out := bufio.NewReader(p.Stdout())
	if line, err := out.ReadString('\n'); line != "started\n" {
		t.Fatalf("hang printed %q, %v", line, err)
	}
	stdout = drain(out)
	if err := p.Signal(sandbox.SIGKILL); err != nil {
		t.Fatalf("SIGKILL: %v", err)
	}
	if code, _ := p.Wait(); code != 128+9 {
		t.Errorf("killed by SIGKILL: exit %d, want 137", code)
	}
	<-stdout
	<-stderr
}

// drain reads r to its end and sends what it read.
func drain(r io.Reader) <-chan string {
	c := make(chan string, 1)
	go func() {
		data, _ := io.ReadAll(r)
		c <- string(data)
	}()
	return c
}

func pauseResume(t *testing.T, b sandbox.Backend, cmds Commands) {
	sbx := create(t, b)
	write(t, sbx, "/work/keep.txt", []byte("kept"))
	exec(t, sbx, cmds("write", "/work/out/made.txt", "made"), sandbox.ExecOptions{})
	id, err := sbx.Pause(ctx(t))
	if err != nil {
		t.Fatalf("Pause: %v", err)
	}
	if id == "" {
		t.Fatal("Pause returned an empty session id")
	}
	if _, err := sbx.Exec(ctx(t), cmds("pwd"), sandbox.ExecOptions{}); err == nil {
		t.Error("a paused sandbox ran a command")
	}
	again, err := b.Resume(ctx(t), id)
	if err != nil {
		t.Fatalf("Resume(%s): %v", id, err)
	}
	t.Cleanup(func() { _ = again.Close(context.Background()) })
	if again.ID() != id {
		t.Errorf("the resumed sandbox is %s, not %s", again.ID(), id)
	}
	if got := string(read(t, again, "/work/keep.txt")); got != "kept" {
		t.Errorf("uploaded file after resume: %q", got)
	}
	res := exec(t, again, cmds("cat", "/work/out/made.txt"), sandbox.ExecOptions{})
	if res.Stdout != "made" {
		t.Errorf("file the code made, after resume: %q %q", res.Stdout, res.Stderr)
	}
}

func closeRemoves(t *testing.T, b sandbox.Backend, cmds Commands) {
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
	if rc, err := sbx.ReadFile(ctx(t), "/work/a.txt"); err == nil {
		rc.Close()
		t.Error("a closed sandbox still reads its files")
	}
	if _, err := sbx.Exec(ctx(t), cmds("pwd"), sandbox.ExecOptions{}); err == nil {
		t.Error("a closed sandbox ran a command")
	}
	if err := sbx.Close(ctx(t)); err != nil {
		t.Errorf("closing twice: %v", err)
	}
}
