package conversation

import (
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/terpdev/terp/internal/llm/llmtest"
)

// Code a client runs itself comes back as a model's step would: output,
// exit status and the files it saved, which stay in the sandbox; the idle
// pause still happens and the next run wakes it with /work as it was.
func TestRunWithoutTheModel(t *testing.T) {
	s := llmtest.New(t, func(llmtest.Request) llmtest.Reply {
		t.Error("Run asked the model")
		return llmtest.Answer("")
	})
	w := newWorld(t, s)
	w.svc.newModel = nil
	w.cfg.IdlePause = 10 * time.Millisecond
	c, err := w.svc.Open(ctx(t), w.cfg, Options{Origin: "mcp", KeepFiles: true})
	if err != nil {
		t.Fatal(err)
	}
	closeQuietly(t, c)
	res, err := c.Run(ctx(t), "write out/kept.txt kept\nprint hello\nstderr careful\nexit 3")
	if err != nil {
		t.Fatal(err)
	}
	if res.ExitCode != 3 || res.Stdout != "hello\n" || !strings.Contains(res.Stderr, "careful") {
		t.Errorf("run = %+v, want exit 3, hello and careful", res)
	}
	if len(res.Files) != 1 || res.Files[0].Path != "out/kept.txt" {
		t.Errorf("files = %+v, want out/kept.txt", res.Files)
	}
	if !strings.Contains(res.Content, `"exit_code":3`) {
		t.Errorf("content = %s, want the tool result a model reads", res.Content)
	}
	for deadline := time.Now().Add(30 * time.Second); !c.Paused(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the idle conversation's sandbox was never paused")
		}
	}
	res, err = c.Run(ctx(t), "cat out/kept.txt")
	if err != nil || res.Stdout != "kept" {
		t.Errorf("after the pause: %+v, %v; want the file read back", res, err)
	}
	fh, err := c.ReadFile(ctx(t), "out/kept.txt")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(fh)
	fh.Close()
	if string(b) != "kept" {
		t.Errorf("ReadFile = %q", b)
	}
	if err := c.Restart(ctx(t)); err != nil {
		t.Fatal(err)
	}
	if h, err := c.History(ctx(t)); err != nil || len(h) != 0 {
		t.Errorf("history = %+v, %v; want no message: runs are not the model's", h, err)
	}
}

// Runs go one at a time, as turns do.
func TestRunIsBusyDuringATurn(t *testing.T) {
	entered, release := make(chan struct{}), make(chan struct{})
	s := llmtest.New(t, func(llmtest.Request) llmtest.Reply {
		close(entered)
		<-release
		return llmtest.Answer("first")
	})
	w := newWorld(t, s)
	c, err := w.svc.Open(ctx(t), w.cfg, Options{Origin: "mcp"})
	if err != nil {
		t.Fatal(err)
	}
	closeQuietly(t, c)
	done := make(chan error)
	go func() {
		_, err := c.Ask(ctx(t), "one", nil)
		done <- err
	}()
	<-entered
	if _, err := c.Run(ctx(t), "print x"); !errors.Is(err, ErrBusy) {
		t.Errorf("a run during a turn: %v, want ErrBusy", err)
	}
	close(release)
	if err := <-done; err != nil {
		t.Error(err)
	}
}

// A client's own copy put back with WriteFile is in /work for the code, in
// its directory, but not reported as a file the next run saved, and not
// kept with the conversation as an upload; a path that leaves /work stays
// inside it.
func TestWriteFileIsNotReportedAsSaved(t *testing.T) {
	w := newWorld(t, llmtest.New(t))
	w.svc.newModel = nil
	c, err := w.svc.Open(ctx(t), w.cfg, Options{Origin: "librechat", KeepFiles: true})
	if err != nil {
		t.Fatal(err)
	}
	closeQuietly(t, c)
	if err := c.WriteFile(ctx(t), "/mnt/data/in/data.csv", strings.NewReader("a,b")); err != nil {
		t.Fatal(err)
	}
	if err := c.WriteFile(ctx(t), "../../escape.txt", strings.NewReader("inside")); err != nil {
		t.Fatal(err)
	}
	res, err := c.Run(ctx(t), "cat in/data.csv\nwrite out.txt new")
	if err != nil {
		t.Fatal(err)
	}
	if res.Stdout != "a,b" || len(res.Files) != 1 || res.Files[0].Path != "out.txt" {
		t.Errorf("run = %+v, files %+v; want the copy read and only out.txt saved", res, res.Files)
	}
	if res, err := c.Run(ctx(t), "cat escape.txt"); err != nil || res.Stdout != "inside" {
		t.Errorf("a path that leaves /work: %+v, %v; want it inside /work", res, err)
	}
	c.recMu.Lock()
	inputs := c.rec.Inputs
	c.recMu.Unlock()
	if len(inputs) != 0 {
		t.Errorf("uploads kept: %+v; want none", inputs)
	}
}
