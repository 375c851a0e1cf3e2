package cli

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"

	"github.com/terpdev/terp/internal/llm/llmtest"
	"github.com/terpdev/terp/internal/terptest"
)

// serveProcess is the real terp binary running `terp serve`, as an
// operator runs it: signals reach it, and its state is only what it kept.
type serveProcess struct {
	cmd  *exec.Cmd
	base string // http://127.0.0.1:PORT/v1
	log  *lockedBuffer
	done chan struct{}
	err  error
}

// startGatewayProcess starts `terp serve` with env (see homeEnv) and args,
// and waits until it says where it serves.
func startGatewayProcess(t testing.TB, env map[string]string, args ...string) *serveProcess {
	t.Helper()
	return startProcess(t, env, `serving the OpenAI API on (http://\S+/v1)`, append([]string{"serve", "--listen", "127.0.0.1:0", "--shutdown-delay", "0s"}, args...)...)
}

// startProcess starts the terp binary with env and args, and waits until
// its stderr has a line matching ready, whose first group is its address.
func startProcess(t testing.TB, env map[string]string, ready string, args ...string) *serveProcess {
	t.Helper()
	cmd := exec.Command(terptest.Binary(t), args...)
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	cmd.Env = append(cmd.Env, "PATH="+os.Getenv("PATH"))
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &serveProcess{cmd: cmd, log: &lockedBuffer{}, done: make(chan struct{})}
	addr := make(chan string, 1)
	re := regexp.MustCompile(ready)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			fmt.Fprintln(p.log, sc.Text())
			if m := re.FindStringSubmatch(sc.Text()); m != nil {
				addr <- m[1]
			}
		}
		_, _ = io.Copy(p.log, stderr)
		p.err = cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-p.done
	})
	select {
	case p.base = <-addr:
	case <-p.done:
		t.Fatalf("terp %s exited before serving (%v):\n%s", args[0], p.err, p.log)
	case <-time.After(time.Minute):
		t.Fatalf("terp %s did not say where it serves:\n%s", args[0], p.log)
	}
	return p
}

// stop sends sig and waits for the process to end.
func (p *serveProcess) stop(t *testing.T, sig syscall.Signal) error {
	t.Helper()
	if err := p.cmd.Process.Signal(sig); err != nil {
		t.Fatal(err)
	}
	select {
	case <-p.done:
	case <-time.After(2 * time.Minute):
		t.Fatalf("terp serve did not stop on %v:\n%s", sig, p.log)
	}
	return p.err
}

func (p *serveProcess) client() openai.Client {
	return openai.NewClient(option.WithBaseURL(p.base), option.WithAPIKey("unused"), option.WithMaxRetries(0))
}

func codeTool() responses.ToolUnionParam {
	return responses.ToolParamOfCodeInterpreter(responses.ToolCodeInterpreterContainerCodeInterpreterContainerAutoParam{})
}

// After SIGTERM and a restart, the container, its files (uploaded and
// saved by the code), the stored response and previous_response_id all
// go on; the model is told that Python restarted, for the variables are
// gone. A SIGKILL loses no more than the run in flight.
func TestServeSurvivesRestarts(t *testing.T) {
	s := llmtest.New(t,
		llmtest.Fixed(llmtest.RunPython("x = 41\nopen('/work/kept.txt', 'w').write(open('/work/in.csv').read().upper())\nprint('saved')")),
		llmtest.Fixed(llmtest.Answer("Saved kept.txt.")),
		// After the SIGTERM restart.
		func(req llmtest.Request) llmtest.Reply {
			if !strings.Contains(req.LastUser(), "Python was restarted") {
				t.Errorf("the model was not told that Python restarted: %q", req.LastUser())
			}
			return llmtest.RunPython("print(open('/work/kept.txt').read().strip())")
		},
		func(req llmtest.Request) llmtest.Reply {
			res, _ := req.ToolResult()
			return llmtest.Answer("It holds " + strings.TrimSpace(res.Stdout))
		},
		// The run a SIGKILL interrupts.
		llmtest.Fixed(llmtest.RunPython("import time\nprint('started', flush=True)\ntime.sleep(600)")),
		// After the SIGKILL restart.
		llmtest.Fixed(llmtest.RunPython("print(open('/work/kept.txt').read().strip())")),
		func(req llmtest.Request) llmtest.Reply {
			res, _ := req.ToolResult()
			return llmtest.Answer("Still " + strings.TrimSpace(res.Stdout))
		},
	)
	env := homeEnv(t, serverEnv(s))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()

	p := startGatewayProcess(t, env, "--no-auth")
	c := p.client()
	file, err := c.Files.New(ctx, openai.FileNewParams{File: openai.File(strings.NewReader("a,b\n"), "in.csv", "text/csv"), Purpose: openai.FilePurposeUserData})
	if err != nil {
		t.Fatal(err)
	}
	first, err := c.Responses.New(ctx, responses.ResponseNewParams{
		Model: "test-model", Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("Save it upper-case.")},
		Tools: []responses.ToolUnionParam{responses.ToolParamOfCodeInterpreter(
			responses.ToolCodeInterpreterContainerCodeInterpreterContainerAutoParam{FileIDs: []string{file.ID}})},
	})
	if err != nil || first.Status != "completed" {
		t.Fatalf("first response: %v %+v", err, first)
	}
	cntr := first.Output[0].AsCodeInterpreterCall().ContainerID
	if err := p.stop(t, syscall.SIGTERM); err != nil {
		t.Fatalf("SIGTERM: terp serve exited with %v:\n%s", err, p.log)
	}
	if !strings.Contains(p.log.String(), "containers are paused") {
		t.Errorf("terp serve did not say it paused the containers:\n%s", p.log)
	}

	p = startGatewayProcess(t, env, "--no-auth")
	c = p.client()
	if _, err := c.Containers.Get(ctx, cntr); err != nil {
		t.Fatalf("after a restart the container is gone: %v", err)
	}
	if _, err := c.Files.Get(ctx, file.ID); err != nil {
		t.Fatalf("after a restart the uploaded file is gone: %v", err)
	}
	got, err := c.Responses.Get(ctx, first.ID, responses.ResponseGetParams{})
	if err != nil || got.OutputText() != "Saved kept.txt." {
		t.Fatalf("after a restart the stored response: %v %q", err, got.OutputText())
	}
	wantFiles(t, ctx, c, cntr, "in.csv", "kept.txt")
	second, err := c.Responses.New(ctx, responses.ResponseNewParams{
		Model: "test-model", Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("What does it hold?")},
		PreviousResponseID: openai.String(first.ID), Tools: []responses.ToolUnionParam{codeTool()},
	})
	if err != nil || second.OutputText() != "It holds A,B" {
		t.Fatalf("previous_response_id after a restart: %v %q", err, second.OutputText())
	}
	if id := second.Output[0].AsCodeInterpreterCall().ContainerID; id != cntr {
		t.Errorf("the follow-up ran in %s, not the container %s", id, cntr)
	}

	// A crash mid-run.
	running := make(chan error, 1)
	go func() {
		_, err := c.Responses.New(ctx, responses.ResponseNewParams{
			Model: "test-model", Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("Wait.")},
			PreviousResponseID: openai.String(second.ID), Tools: []responses.ToolUnionParam{codeTool()},
		})
		running <- err
	}()
	waitFor(t, func() bool { return len(s.Requests()) >= 5 }, "the model to be asked for the long run")
	time.Sleep(500 * time.Millisecond) // let the run start
	_ = p.stop(t, syscall.SIGKILL)
	if err := <-running; err == nil {
		t.Error("the response killed mid-run answered as if it had finished")
	}

	p = startGatewayProcess(t, env, "--no-auth")
	c = p.client()
	wantFiles(t, ctx, c, cntr, "in.csv", "kept.txt")
	third, err := c.Responses.New(ctx, responses.ResponseNewParams{
		Model: "test-model", Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("Still there?")},
		PreviousResponseID: openai.String(second.ID), Tools: []responses.ToolUnionParam{codeTool()},
	})
	if err != nil || third.OutputText() != "Still A,B" {
		t.Fatalf("after a crash: %v %q\n%s", err, third.OutputText(), p.log)
	}
	if err := p.stop(t, syscall.SIGTERM); err != nil {
		t.Fatalf("SIGTERM: %v:\n%s", err, p.log)
	}
}

// A request still running when the grace period ends is stopped with a
// 503 that says so, and the server exits.
func TestServeStopsRunsAfterTheGracePeriod(t *testing.T) {
	s := llmtest.New(t, llmtest.Fixed(llmtest.RunPython("import time\ntime.sleep(600)")))
	env := homeEnv(t, serverEnv(s))
	p := startGatewayProcess(t, env, "--no-auth", "--grace", "1s")
	c := p.client()
	running := make(chan error, 1)
	go func() {
		_, err := c.Responses.New(context.Background(), responses.ResponseNewParams{
			Model: "test-model", Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("Wait.")},
			Tools: []responses.ToolUnionParam{codeTool()},
		})
		running <- err
	}()
	waitFor(t, func() bool { return len(s.Requests()) >= 1 }, "the model to be asked")
	time.Sleep(500 * time.Millisecond)
	if err := p.stop(t, syscall.SIGTERM); err != nil {
		t.Fatalf("SIGTERM: %v:\n%s", err, p.log)
	}
	err := <-running
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusServiceUnavailable || !strings.Contains(apiErr.Message, "stopped") {
		t.Fatalf("the run cut off by the stop: %v; want 503 saying the server stopped", err)
	}
}

func wantFiles(t *testing.T, ctx context.Context, c openai.Client, cntr string, names ...string) {
	t.Helper()
	page, err := c.Containers.Files.List(ctx, cntr, openai.ContainerFileListParams{})
	if err != nil {
		t.Fatalf("listing the container's files: %v", err)
	}
	var got []string
	for _, f := range page.Data {
		got = append(got, strings.TrimPrefix(f.Path, "/mnt/data/"))
	}
	for _, n := range names {
		if !strings.Contains(strings.Join(got, " "), n) {
			t.Errorf("the container holds %v; want %s", got, n)
		}
	}
}

func waitFor(t testing.TB, ok func() bool, what string) {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); !ok(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}
