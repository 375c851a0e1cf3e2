package memory_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"path"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/terpdev/terp/internal/sandbox"
	"github.com/terpdev/terp/internal/sandbox/conformance"
	"github.com/terpdev/terp/internal/sandbox/memory"
)

// contractPrograms are the conformance suite's commands (see its
// commands.go) written as programs.
var contractPrograms = map[string]memory.Program{
	"echo-exit": func(_ context.Context, c *memory.Cmd) int {
		fmt.Fprintln(c.Stdout, "out")
		fmt.Fprintln(c.Stderr, "err")
		return 3
	},
	"cat-env": func(_ context.Context, c *memory.Cmd) int {
		if _, err := io.Copy(c.Stdout, c.Stdin); err != nil {
			return 1
		}
		fmt.Fprintln(c.Stdout, c.Getenv("FOO"))
		return 0
	},
	"env": func(_ context.Context, c *memory.Cmd) int {
		for _, kv := range c.Env {
			fmt.Fprintln(c.Stdout, kv)
		}
		return 0
	},
	"pwd": func(_ context.Context, c *memory.Cmd) int {
		fmt.Fprintln(c.Stdout, c.Dir)
		return 0
	},
	"cat": func(_ context.Context, c *memory.Cmd) int {
		data, err := c.FS.ReadFile(c.Args[1])
		if err != nil {
			return fail(c, err)
		}
		_, _ = c.Stdout.Write(data)
		return 0
	},
	"copy": func(_ context.Context, c *memory.Cmd) int {
		data, err := c.FS.ReadFile(c.Args[1])
		if err == nil {
			err = c.FS.WriteFile(c.Args[2], data)
		}
		if err != nil {
			return fail(c, err)
		}
		return 0
	},
	"write": func(_ context.Context, c *memory.Cmd) int {
		if err := c.FS.WriteFile(c.Args[1], []byte(c.Args[2])); err != nil {
			return fail(c, err)
		}
		return 0
	},
	"mkdir": func(_ context.Context, c *memory.Cmd) int {
		if err := c.FS.MkdirAll(c.Args[1]); err != nil {
			return fail(c, err)
		}
		return 0
	},
	"size": func(_ context.Context, c *memory.Cmd) int {
		data, err := c.FS.ReadFile(c.Args[1])
		if err != nil {
			return fail(c, err)
		}
		fmt.Fprintln(c.Stdout, len(data))
		return 0
	},
	"flood": func(_ context.Context, c *memory.Cmd) int {
		for i, w := range []io.Writer{c.Stdout, c.Stderr} {
			n, _ := strconv.Atoi(c.Args[1+i])
			chunk := bytes.Repeat([]byte{"xy"[i]}, 64<<10)
			for ; n > 0; n -= len(chunk) {
				_, _ = w.Write(chunk[:min(n, len(chunk))])
			}
			fmt.Fprint(w, "\nEND\n")
		}
		return 0
	},
	// tick ignores ctx, as a program that traps every signal: only the
	// sandbox shutting its FS stops it.
	"tick": func(_ context.Context, c *memory.Cmd) int {
		fmt.Fprintln(c.Stdout, "started")
		for i := 1; ; i++ {
			if err := c.FS.WriteFile(c.Args[1], []byte(strconv.Itoa(i)+"\n")); err != nil {
				return 1
			}
		}
	},
	"hang": func(ctx context.Context, c *memory.Cmd) int {
		fmt.Fprintln(c.Stdout, "started")
		<-ctx.Done()
		return 1
	},
	"echo-lines": func(_ context.Context, c *memory.Cmd) int {
		lines := bufio.NewScanner(c.Stdin)
		for lines.Scan() {
			fmt.Fprintln(c.Stdout, "got", lines.Text())
		}
		fmt.Fprintln(c.Stderr, "done")
		return 4
	},
}

func fail(c *memory.Cmd, err error) int {
	fmt.Fprintf(c.Stderr, "%s: %v\n", c.Args[0], err)
	return 1
}

func TestConformance(t *testing.T) {
	conformance.RunContract(t, func(t *testing.T) sandbox.Backend {
		return memory.New(memory.Config{Programs: contractPrograms})
	}, conformance.Programs)
}

// newSandbox is a sandbox of a backend running programs, closed when the
// test ends.
func newSandbox(t *testing.T, programs map[string]memory.Program, opt sandbox.Options) (*memory.Backend, sandbox.Sandbox) {
	t.Helper()
	b := memory.New(memory.Config{Programs: programs})
	sbx, err := b.Create(t.Context(), opt)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sbx.Close(context.Background()) })
	return b, sbx
}

// within fails the test if c does not deliver soon. It guards against a
// hang; no result depends on how soon.
func within[T any](t *testing.T, c <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-c:
		return v
	case <-time.After(10 * time.Second):
		t.Fatalf("%s never happened", what)
		var zero T
		return zero
	}
}

func TestUnknownCommandIsNotFound(t *testing.T) {
	_, sbx := newSandbox(t, nil, sandbox.Options{})
	res, err := sbx.Exec(t.Context(), []string{"python3", "-c", "print(1)"}, sandbox.ExecOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if res.ExitCode != 127 || !strings.Contains(res.Stderr, "python3: command not found") {
		t.Errorf("exit %d stderr %q, want 127 and command not found", res.ExitCode, res.Stderr)
	}
}

func TestProgramFoundByBaseName(t *testing.T) {
	_, sbx := newSandbox(t, contractPrograms, sandbox.Options{})
	res, err := sbx.Exec(t.Context(), []string{"/usr/bin/pwd"}, sandbox.ExecOptions{})
	if err != nil || res.Stdout != "/work\n" {
		t.Errorf("/usr/bin/pwd: %+v, %v", res, err)
	}
}

// A timeout ends the program's context, and what the program does after
// it reaches nothing: not stdout, not /work.
func TestTimeoutStopsProgram(t *testing.T) {
	cause := make(chan error, 1)
	release := make(chan struct{})
	late := make(chan error, 1)
	programs := map[string]memory.Program{"slow": func(ctx context.Context, c *memory.Cmd) int {
		fmt.Fprintln(c.Stdout, "before")
		<-ctx.Done()
		cause <- context.Cause(ctx)
		<-release
		fmt.Fprintln(c.Stdout, "after")
		late <- c.FS.WriteFile("late.txt", []byte("x"))
		return 0
	}}
	_, sbx := newSandbox(t, programs, sandbox.Options{})
	res, err := sbx.Exec(t.Context(), []string{"slow"}, sandbox.ExecOptions{Timeout: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if !res.TimedOut || res.ExitCode != sandbox.ExitTimedOut {
		t.Errorf("TimedOut %v exit %d", res.TimedOut, res.ExitCode)
	}
	if err := within(t, cause, "the program's ctx ending"); err == nil {
		t.Error("the program's ctx has no cause")
	}
	close(release)
	if err := within(t, late, "the late write"); err == nil {
		t.Error("a timed-out program still wrote to /work")
	}
	if _, err := sbx.ReadFile(t.Context(), "late.txt"); err == nil {
		t.Error("late.txt exists")
	}
	if res.Stdout != "before\n" {
		t.Errorf("stdout %q", res.Stdout)
	}
}

func TestCallerGivesUp(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	programs := map[string]memory.Program{"wait": func(pctx context.Context, c *memory.Cmd) int {
		cancel()
		<-pctx.Done()
		return 0
	}}
	_, sbx := newSandbox(t, programs, sandbox.Options{})
	res, err := sbx.Exec(ctx, []string{"wait"}, sandbox.ExecOptions{})
	if !errors.Is(err, context.Canceled) || res.ExitCode != -1 {
		t.Errorf("exit %d, %v; want -1 and context.Canceled", res.ExitCode, err)
	}
}

func TestCloseStopsRunningCommand(t *testing.T) {
	started := make(chan struct{})
	programs := map[string]memory.Program{"wait": func(ctx context.Context, c *memory.Cmd) int {
		close(started)
		<-ctx.Done()
		return 0
	}}
	_, sbx := newSandbox(t, programs, sandbox.Options{})
	done := make(chan error, 1)
	go func() {
		_, err := sbx.Exec(context.Background(), []string{"wait"}, sandbox.ExecOptions{})
		done <- err
	}()
	within(t, started, "the command starting")
	if err := sbx.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := within(t, done, "Exec returning after Close"); err == nil {
		t.Error("a command stopped by Close reported no error")
	}
	for name, err := range map[string]error{
		"WriteFile": sbx.WriteFile(t.Context(), "a.txt", strings.NewReader("a")),
		"List":      second(sbx.List(t.Context(), "")),
		"Start":     second(sbx.Start(t.Context(), []string{"wait"}, sandbox.ExecOptions{})),
		"Pause":     second(sbx.Pause(t.Context())),
	} {
		if err == nil {
			t.Errorf("%s on a closed sandbox succeeded", name)
		}
	}
}

func second[T any](_ T, err error) error { return err }

func TestListKeepsNewest(t *testing.T) {
	b := memory.New(memory.Config{MaxList: 3})
	sbx, err := b.Create(t.Context(), sandbox.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		if err := sbx.WriteFile(t.Context(), fmt.Sprintf("f%d.txt", i), strings.NewReader("x")); err != nil {
			t.Fatal(err)
		}
	}
	files, err := sbx.List(t.Context(), "/work")
	var te *sandbox.TruncatedError
	if !errors.As(err, &te) || te.Listed != 3 || te.Total != 5 {
		t.Fatalf("List: %v, want 3 of 5 listed", err)
	}
	var got []string
	for _, f := range files {
		got = append(got, f.Path)
	}
	if strings.Join(got, " ") != "f2.txt f3.txt f4.txt" {
		t.Errorf("listed %v, want the three written last", got)
	}
}

func TestResume(t *testing.T) {
	b := memory.New(memory.Config{})
	if _, err := b.Resume(t.Context(), "mem-unknown"); !errors.Is(err, sandbox.ErrExpired) {
		t.Errorf("Resume of an unknown id: %v, want ErrExpired", err)
	}

	// A sandbox left running past its lifetime is gone; a paused one is
	// not, and comes back with its files.
	left, err := b.Create(t.Context(), sandbox.Options{Timeout: time.Nanosecond})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := left.Exec(t.Context(), []string{"pwd"}, sandbox.ExecOptions{}); !errors.Is(err, sandbox.ErrExpired) {
		t.Errorf("Exec past the lifetime: %v, want ErrExpired", err)
	}
	if _, err := b.Resume(t.Context(), left.ID()); !errors.Is(err, sandbox.ErrExpired) {
		t.Errorf("Resume of a sandbox left running past its lifetime: %v, want ErrExpired", err)
	}

	paused, err := b.Create(t.Context(), sandbox.Options{Timeout: time.Nanosecond})
	if err != nil {
		t.Fatal(err)
	}
	if err := paused.WriteFile(t.Context(), "kept.txt", strings.NewReader("kept")); err != nil {
		t.Fatal(err)
	}
	id, err := paused.Pause(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	again, err := b.Resume(t.Context(), id)
	if err != nil {
		t.Fatalf("Resume of a paused sandbox: %v", err)
	}
	rc, err := again.ReadFile(t.Context(), "kept.txt")
	if err != nil {
		t.Fatal(err)
	}
	if data, _ := io.ReadAll(rc); string(data) != "kept" {
		t.Errorf("after resume kept.txt reads %q", data)
	}
}

func TestWorkBytesStopsGrowth(t *testing.T) {
	programs := map[string]memory.Program{"fill": func(_ context.Context, c *memory.Cmd) int {
		if err := c.FS.WriteFile("small.bin", make([]byte, 60)); err != nil {
			return fail(c, err)
		}
		if err := c.FS.WriteFile("big.bin", make([]byte, 60)); err != nil {
			return fail(c, err)
		}
		fmt.Fprintln(c.Stdout, "both written")
		return 0
	}}
	_, sbx := newSandbox(t, programs, sandbox.Options{Limits: sandbox.Limits{WorkBytes: 100}})
	res, err := sbx.Exec(t.Context(), []string{"fill"}, sandbox.ExecOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if res.ExitCode != 128+9 || !strings.Contains(res.Stopped, "max_work_size") || strings.Contains(res.Stdout, "both") {
		t.Errorf("exit %d stopped %q stdout %q; want the command stopped at the second write", res.ExitCode, res.Stopped, res.Stdout)
	}
	files, err := sbx.List(t.Context(), "")
	if err != nil || len(files) != 1 || files[0].Path != "small.bin" {
		t.Errorf("/work holds %v, %v; want small.bin alone", files, err)
	}
}

func TestStartSignals(t *testing.T) {
	_, sbx := newSandbox(t, contractPrograms, sandbox.Options{})
	for sig, want := range map[sandbox.Signal]int{sandbox.SIGINT: 130, sandbox.SIGTERM: 143} {
		p, err := sbx.Start(t.Context(), []string{"hang"}, sandbox.ExecOptions{})
		if err != nil {
			t.Fatal(err)
		}
		line, _ := bufio.NewReader(p.Stdout()).ReadString('\n')
		if line != "started\n" {
			t.Fatalf("hang printed %q", line)
		}
		if err := p.Signal(sig); err != nil {
			t.Fatal(err)
		}
		if code, err := p.Wait(); code != want || err != nil {
			t.Errorf("after SIG%s: exit %d, %v; want %d", sig, code, err, want)
		}
		if _, err := io.WriteString(p.Stdin(), "x\n"); err == nil {
			t.Errorf("after SIG%s the process still takes stdin", sig)
		}
	}
}

// Start's pipes hold output until it is read, so waiting first is fine.
func TestStartWaitBeforeReading(t *testing.T) {
	_, sbx := newSandbox(t, contractPrograms, sandbox.Options{})
	p, err := sbx.Start(t.Context(), []string{"echo-lines"}, sandbox.ExecOptions{Stdin: strings.NewReader("one\ntwo\n")})
	if err != nil {
		t.Fatal(err)
	}
	if code, err := p.Wait(); code != 4 || err != nil {
		t.Fatalf("exit %d, %v", code, err)
	}
	out, _ := io.ReadAll(p.Stdout())
	if string(out) != "got one\ngot two\n" {
		t.Errorf("stdout %q", out)
	}
}

func TestPathsResolveAgainstDir(t *testing.T) {
	_, sbx := newSandbox(t, contractPrograms, sandbox.Options{})
	if err := sbx.WriteFile(t.Context(), "d/in.txt", strings.NewReader("in")); err != nil {
		t.Fatal(err)
	}
	res, err := sbx.Exec(t.Context(), []string{"copy", "in.txt", "../out.txt"}, sandbox.ExecOptions{Dir: "d"})
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("copy in /work/d: %+v, %v", res, err)
	}
	rc, err := sbx.ReadFile(t.Context(), path.Join(sandbox.WorkDir, "out.txt"))
	if err != nil {
		t.Fatal(err)
	}
	if data, _ := io.ReadAll(rc); string(data) != "in" {
		t.Errorf("/work/out.txt reads %q", data)
	}
	res, err = sbx.Exec(t.Context(), []string{"write", "../../etc/x", "x"}, sandbox.ExecOptions{Dir: "d"})
	if err != nil || res.ExitCode == 0 || !strings.Contains(res.Stderr, "outside /work") {
		t.Errorf("a program writing ../../etc/x from /work/d: %+v, %v", res, err)
	}
}
