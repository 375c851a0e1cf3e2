package agent_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/terpdev/terp/internal/agent"
	"github.com/terpdev/terp/internal/kernel"
	"github.com/terpdev/terp/internal/llm"
	"github.com/terpdev/terp/internal/llm/llmtest"
	"github.com/terpdev/terp/internal/sandbox"
	"github.com/terpdev/terp/internal/sandbox/local"
	"github.com/terpdev/terp/internal/terptest"
)

// newSandbox creates a real local sandbox for one test.
func newSandbox(t testing.TB) sandbox.Sandbox {
	t.Helper()
	b, err := local.New(local.Config{Root: terptest.TempDir(t)})
	if err != nil {
		t.Fatal(err)
	}
	sbx, err := b.Create(context.Background(), sandbox.Options{Timeout: 10 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sbx.Close(context.Background()) })
	return sbx
}

// newScript starts a script-mode runner on sbx, closed when the test ends.
func newScript(t testing.TB, sbx sandbox.Sandbox) kernel.Runner {
	t.Helper()
	k, err := kernel.Start(context.Background(), sbx, kernel.Options{Fresh: true, MaxStdout: 4000, MaxStderr: 2000})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k.Close() })
	return k
}

func newAgent(t *testing.T, s *llmtest.Server, cfg agent.Config) *agent.Agent {
	t.Helper()
	if cfg.Timeout == 0 {
		cfg.Timeout = time.Minute
	}
	model := llm.New(llm.Config{BaseURL: s.BaseURL(), Stream: true, MaxRetries: -1})
	sbx := newSandbox(t)
	return agent.New(model, sbx, newScript(t, sbx), cfg)
}

// collect records the events of a turn.
type collect struct{ events []agent.Event }

func (c *collect) send(e agent.Event) { c.events = append(c.events, e) }

func TestSeveralCallsRunInOrderAndAreAnsweredByID(t *testing.T) {
	first := llmtest.Reply{Calls: []llmtest.Call{
		{ID: "call_a", Name: "run_python", Arguments: `{"code": "open('n.txt','w').write('1')\nprint('a')"}`},
		{ID: "call_b", Name: "run_python", Arguments: `{"code": "print('b', open('n.txt').read())"}`},
		{ID: "call_c", Name: "shell", Arguments: `{"cmd": "ls"}`},
	}}
	s := llmtest.New(t, llmtest.Fixed(first), func(req llmtest.Request) llmtest.Reply {
		var got []string
		for _, m := range req.Messages {
			if m.Role == "tool" {
				got = append(got, m.ToolCallID+"="+m.Content)
			}
		}
		if len(got) != 3 {
			t.Fatalf("tool messages = %q, want one per call", got)
		}
		for i, want := range []string{`call_a={"exit_code":0,"stdout":"a\n"`, `call_b={"exit_code":0,"stdout":"b 1\n"`, `call_c={"error":"unknown tool \"shell\"`} {
			if !strings.HasPrefix(got[i], want) {
				t.Errorf("tool message %d = %s, want it to start with %s", i, got[i], want)
			}
		}
		return llmtest.Answer("done")
	})
	a := newAgent(t, s, agent.Config{Model: "m"})
	res, err := a.Ask(context.Background(), "go", nil)
	if err != nil || res.Answer != "done" || res.StopReason != agent.Answered {
		t.Fatalf("Ask = %+v, %v", res, err)
	}
	if len(res.Files) != 1 || res.Files[0].Path != "n.txt" {
		t.Errorf("files = %+v, want n.txt", res.Files)
	}
}

func TestReasoningNeverGoesBackToTheModel(t *testing.T) {
	s := llmtest.New(t,
		llmtest.Fixed(llmtest.Reply{Reasoning: "private chain of thought", Calls: llmtest.RunPython("print(2+2)").Calls}),
		llmtest.Fixed(llmtest.Reply{Content: "<think>more private thoughts</think>It is 4."}),
		func(req llmtest.Request) llmtest.Reply {
			b, _ := json.Marshal(req.Messages)
			if strings.Contains(string(b), "private") {
				t.Errorf("reasoning was sent back: %s", b)
			}
			return llmtest.Answer("ok")
		})
	a := newAgent(t, s, agent.Config{Model: "m"})
	var c collect
	res, err := a.Ask(context.Background(), "2+2?", c.send)
	if err != nil || res.Answer != "It is 4." {
		t.Fatalf("Ask = %+v, %v; want the answer without the think block", res, err)
	}
	var reasoning string
	for _, e := range c.events {
		if r, ok := e.(agent.ReasoningDelta); ok {
			reasoning += r.Text
		}
	}
	if !strings.Contains(reasoning, "private chain of thought") || !strings.Contains(reasoning, "more private thoughts") {
		t.Errorf("reasoning events = %q, want both thoughts shown", reasoning)
	}
	// The follow-up question carries the history, without reasoning.
	if _, err := a.Ask(context.Background(), "and again?", nil); err != nil {
		t.Fatal(err)
	}
}

func TestTimeoutKillsTheRunAndTellsTheModel(t *testing.T) {
	s := llmtest.New(t,
		llmtest.Fixed(llmtest.RunPython("import subprocess, time\nsubprocess.Popen(['sleep', '300'])\nprint('started', flush=True)\ntime.sleep(300)")),
		func(req llmtest.Request) llmtest.Reply {
			res, err := req.ToolResult()
			if err != nil || !res.TimedOut || !strings.Contains(res.Stdout, "started") || !strings.Contains(res.Note, "timeout") {
				t.Errorf("tool result = %+v (%v), want timed_out with the output so far and a note", res, err)
			}
			return llmtest.RunPython("print('alive')")
		},
		func(req llmtest.Request) llmtest.Reply {
			res, _ := req.ToolResult()
			return llmtest.Answer(res.Stdout)
		})
	a := newAgent(t, s, agent.Config{Model: "m", Timeout: time.Second})
	start := time.Now()
	res, err := a.Ask(context.Background(), "sleep", nil)
	if err != nil || res.Answer != "alive" {
		t.Fatalf("Ask = %+v, %v; want the sandbox to work after a timeout", res, err)
	}
	if d := time.Since(start); d > 30*time.Second {
		t.Errorf("a 1s timeout took %s", d)
	}
}

func TestEventsTellTheStory(t *testing.T) {
	s := llmtest.New(t,
		llmtest.Fixed(llmtest.RunPython("open('/work/out.txt','w').write('hi')\nprint('wrote')")),
		llmtest.Fixed(llmtest.Answer("Saved out.txt.")))
	a := newAgent(t, s, agent.Config{Model: "m", MaxSteps: 4})
	var c collect
	if _, err := a.Ask(context.Background(), "write", c.send); err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for _, e := range c.events {
		switch e := e.(type) {
		case agent.StepStarted:
			kinds = append(kinds, "step")
		case agent.ToolCall:
			kinds = append(kinds, "call")
		case agent.ToolOutput:
			kinds = append(kinds, "output:"+strings.TrimSpace(e.Stdout))
		case agent.FileSaved:
			kinds = append(kinds, "file:"+e.Path)
		case agent.Answer:
			kinds = append(kinds, "answer:"+e.Text)
		}
	}
	want := "step call output:wrote file:out.txt step answer:Saved out.txt."
	if got := strings.Join(kinds, " "); got != want {
		t.Errorf("events = %s\nwant     %s", got, want)
	}
}

// TestToolOutputCarriesTheFacts: the event of a run has the facts a
// protocol forwards (the cell, the exception), while the model reads the
// JSON it always read.
func TestToolOutputCarriesTheFacts(t *testing.T) {
	s := llmtest.New(t,
		llmtest.Fixed(llmtest.RunPython("print('before')\n1 / 0")),
		func(req llmtest.Request) llmtest.Reply {
			var keys map[string]any
			if err := json.Unmarshal([]byte(req.Messages[len(req.Messages)-1].Content), &keys); err != nil {
				t.Fatal(err)
			}
			for k := range keys {
				if !strings.Contains(" exit_code stdout stderr files timed_out note ", " "+k+" ") {
					t.Errorf("the tool result has %q: %v", k, keys)
				}
			}
			return llmtest.Answer("done")
		})
	a := newAgent(t, s, agent.Config{Model: "m"})
	var c collect
	if _, err := a.Ask(context.Background(), "fail", c.send); err != nil {
		t.Fatal(err)
	}
	var out *agent.ToolOutput
	for _, e := range c.events {
		if o, ok := e.(agent.ToolOutput); ok {
			out = &o
		}
	}
	if out == nil || out.Cell != 1 || out.Outcome != kernel.OutcomeError || out.Exception == nil ||
		out.Exception.Name != "ZeroDivisionError" || out.Exception.Value != "division by zero" {
		t.Fatalf("ToolOutput = %+v; want cell 1 and the ZeroDivisionError", out)
	}
}

func TestUploadsAreListedNotReportedAsSaved(t *testing.T) {
	s := llmtest.New(t,
		func(req llmtest.Request) llmtest.Reply {
			if !strings.Contains(req.Messages[0].Content, "/work/data.csv (8 bytes)") {
				t.Errorf("system prompt does not list the upload:\n%s", req.Messages[0].Content)
			}
			return llmtest.RunPython("import pandas as pd\nprint(pd.read_csv('data.csv').x.sum())")
		},
		answerWithStdout)
	a := newAgent(t, s, agent.Config{Model: "m"})
	if err := a.Upload(context.Background(), "data.csv", strings.NewReader("x\n1\n2\n3\n")); err != nil {
		t.Fatal(err)
	}
	res, err := a.Ask(context.Background(), "sum x", nil)
	if err != nil || res.Answer != "6" {
		t.Fatalf("Ask = %+v, %v", res, err)
	}
	if len(res.Files) != 0 {
		t.Errorf("files = %+v, want none: the upload was not changed", res.Files)
	}
}

func answerWithStdout(req llmtest.Request) llmtest.Reply {
	res, _ := req.ToolResult()
	return llmtest.Answer(strings.TrimSpace(res.Stdout))
}

func TestCancelStopsTheRun(t *testing.T) {
	s := llmtest.New(t, llmtest.Fixed(llmtest.RunPython("import time\ntime.sleep(300)")))
	a := newAgent(t, s, agent.Config{Model: "m"})
	ctx, cancel := context.WithCancel(context.Background())
	res, err := a.Ask(ctx, "wait", func(e agent.Event) {
		if _, ok := e.(agent.ToolCall); ok {
			time.AfterFunc(300*time.Millisecond, cancel)
		}
	})
	if !errors.Is(err, context.Canceled) || res.StopReason != agent.Cancelled {
		t.Fatalf("Ask = %+v, %v; want cancelled", res, err)
	}
}

func TestDownloadStaysInsideTheDirectory(t *testing.T) {
	sbx := newSandbox(t)
	ctx := context.Background()
	if err := sbx.WriteFile(ctx, "/work/sub/chart.png", strings.NewReader("png")); err != nil {
		t.Fatal(err)
	}
	dir := terptest.TempDir(t)
	outside := terptest.TempDir(t)
	// A symlink planted in the output directory must not redirect the write.
	if err := os.Symlink(outside, filepath.Join(dir, "sub")); err != nil {
		t.Fatal(err)
	}
	if _, _, err := agent.Download(ctx, sbx, "sub/chart.png", dir, 1<<20); err == nil {
		t.Error("download followed a symlink out of the directory")
	}
	if entries, _ := os.ReadDir(outside); len(entries) != 0 {
		t.Errorf("files appeared outside the output directory: %v", entries)
	}
	for _, name := range []string{"../x", "/etc/passwd", "a/../../x"} {
		if _, _, err := agent.Download(ctx, sbx, name, dir, 1<<20); err == nil {
			t.Errorf("Download(%q) was allowed", name)
		}
	}
	if err := sbx.WriteFile(ctx, "/work/big.bin", strings.NewReader(strings.Repeat("x", 2048))); err != nil {
		t.Fatal(err)
	}
	if _, _, err := agent.Download(ctx, sbx, "big.bin", dir, 1024); err == nil {
		t.Error("a file over the cap was downloaded")
	}
	if _, err := os.Stat(filepath.Join(dir, "big.bin")); err == nil {
		t.Error("a partial file was left under the real name")
	}
	p, n, err := agent.Download(ctx, sbx, "big.bin", dir, 4096)
	if err != nil || n != 2048 || p != filepath.Join(dir, "big.bin") {
		t.Errorf("Download = %s, %d, %v", p, n, err)
	}
}

func TestAnEmptyReplyIsAskedAgainOnce(t *testing.T) {
	s := llmtest.New(t,
		llmtest.Fixed(llmtest.Answer("")),
		func(req llmtest.Request) llmtest.Reply {
			last := req.Messages[len(req.Messages)-1]
			if last.Role != "user" || !strings.Contains(last.Content, "empty") {
				t.Errorf("last message = %+v, want a nudge about the empty reply", last)
			}
			return llmtest.Answer("")
		})
	a := newAgent(t, s, agent.Config{Model: "m"})
	res, err := a.Ask(context.Background(), "hello?", nil)
	if err != nil || res.StopReason != agent.Answered || res.Answer != "" || res.Steps != 2 {
		t.Fatalf("Ask = %+v, %v; want an empty answer after one nudge", res, err)
	}
}

func TestKernelModeKeepsStateAndSavesFigures(t *testing.T) {
	s := llmtest.New(t,
		llmtest.Fixed(llmtest.RunPython("import matplotlib.pyplot as plt\nx = 21\nplt.plot([1, 2, 3])\nplt.show()")),
		llmtest.Fixed(llmtest.RunPython("x * 2")),
		func(req llmtest.Request) llmtest.Reply {
			res, _ := req.ToolResult()
			return llmtest.Answer("x*2 = " + strings.TrimSpace(res.Stdout))
		})
	sbx := newSandbox(t)
	k, err := kernel.Start(context.Background(), sbx, kernel.Options{Prewarm: []string{"matplotlib"}, MaxStdout: 4000, MaxStderr: 2000})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k.Close() })
	model := llm.New(llm.Config{BaseURL: s.BaseURL(), Stream: true, MaxRetries: -1})
	a := agent.New(model, sbx, k, agent.Config{Model: "m", Timeout: time.Minute, ExecMode: kernel.ModeKernel})
	res, err := a.Ask(context.Background(), "double x", nil)
	if err != nil || res.Answer != "x*2 = 42" {
		t.Fatalf("Ask = %+v, %v; want the variable to survive into the next step", res, err)
	}
	if len(res.Files) != 1 || res.Files[0].Path != "figure_1.png" {
		t.Errorf("files = %+v, want the figure plt.show() saved", res.Files)
	}
	if desc := s.Requests()[0].Tools[0].Function.Description; !strings.Contains(desc, "persistent") {
		t.Errorf("the tool description does not tell the model about the kernel: %s", desc)
	}
}

// TestPrewarmDoesNotDelayTheFirstModelRequest blocks the kernel's prewarm
// import until the model's first request arrives: if the loop waited for the
// imports before asking the model, the two would wait for each other and the
// import would give up.
func TestPrewarmDoesNotDelayTheFirstModelRequest(t *testing.T) {
	sbx := newSandbox(t)
	ctx := context.Background()
	slow := "import os, time\ndeadline = time.time() + 30\n" +
		"while not os.path.exists('/work/release'):\n" +
		"    if time.time() > deadline:\n        raise RuntimeError('the model was never asked')\n" +
		"    time.sleep(0.02)\nVALUE = 7\n"
	if err := sbx.WriteFile(ctx, "/work/slowmod.py", strings.NewReader(slow)); err != nil {
		t.Fatal(err)
	}
	s := llmtest.New(t,
		func(llmtest.Request) llmtest.Reply {
			// The model is asked while slowmod's import is still blocked.
			if err := sbx.WriteFile(ctx, "/work/release", strings.NewReader("")); err != nil {
				t.Error(err)
			}
			return llmtest.RunPython("import sys\nprint('slowmod' in sys.modules, sys.modules['slowmod'].VALUE)")
		},
		answerWithStdout)
	k, err := kernel.Start(ctx, sbx, kernel.Options{Prewarm: []string{"slowmod"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k.Close() })
	model := llm.New(llm.Config{BaseURL: s.BaseURL(), Stream: true, MaxRetries: -1})
	a := agent.New(model, sbx, k, agent.Config{Model: "m", Timeout: time.Minute, ExecMode: kernel.ModeKernel})
	res, err := a.Ask(ctx, "go", nil)
	if err != nil || res.Answer != "True 7" {
		t.Fatalf("Ask = %+v, %v; want the prewarmed module imported by the first step", res, err)
	}
}

// alternates checks that every user message after the first follows an
// assistant answer, as some Mistral and Llama chat templates demand.
func alternates(t *testing.T, req llmtest.Request) {
	t.Helper()
	var roles []string
	for _, m := range req.Messages {
		roles = append(roles, m.Role)
	}
	seenUser := false
	for i, m := range req.Messages {
		if m.Role != "user" {
			continue
		}
		if seenUser {
			prev := req.Messages[i-1]
			if prev.Role != "assistant" || len(prev.ToolCalls) > 0 {
				t.Errorf("message %d is a user message after %q: roles %v do not alternate", i, prev.Role, roles)
			}
		}
		seenUser = true
	}
}

// A question cancelled while the model was answering stays in the history
// with a short note, so the next request still alternates user and
// assistant.
func TestCancelledQuestionKeepsTheHistoryAlternating(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s := llmtest.New(t,
		func(llmtest.Request) llmtest.Reply {
			cancel() // the user presses Ctrl+C while the model thinks
			// and the model goes on thinking: the answer must not arrive
			// before the client has seen the cancel.
			time.Sleep(time.Second)
			return llmtest.Answer("too late")
		},
		func(req llmtest.Request) llmtest.Reply {
			alternates(t, req)
			return llmtest.Answer("4")
		})
	a := newAgent(t, s, agent.Config{Model: "m"})
	res, err := a.Ask(ctx, "first question", nil)
	if !errors.Is(err, context.Canceled) || res.StopReason != agent.Cancelled {
		t.Fatalf("Ask = %+v, %v; want cancelled", res, err)
	}
	res, err = a.Ask(context.Background(), "2+2?", nil)
	if err != nil || res.Answer != "4" {
		t.Fatalf("Ask after the cancel = %+v, %v", res, err)
	}
	msgs := s.Requests()[1].Messages
	if len(msgs) != 4 || msgs[1].Content != "first question" || msgs[3].Content != "2+2?" || msgs[2].Role != "assistant" || !strings.Contains(msgs[2].Content, "cancelled") {
		t.Errorf("history sent = %+v, want the cancelled question, a note, then the new question", msgs)
	}
}

// A turn cancelled while its code ran ends with the tool results and the
// note, so the next request still alternates.
func TestCancelledRunKeepsTheHistoryAlternating(t *testing.T) {
	s := llmtest.New(t,
		llmtest.Fixed(llmtest.RunPython("import time\ntime.sleep(300)")),
		func(req llmtest.Request) llmtest.Reply {
			alternates(t, req)
			return llmtest.Answer("ok")
		})
	a := newAgent(t, s, agent.Config{Model: "m"})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	_, err := a.Ask(ctx, "wait", func(e agent.Event) {
		if _, ok := e.(agent.ToolCall); ok {
			time.AfterFunc(300*time.Millisecond, cancel)
		}
	})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Ask = %v, want cancelled", err)
	}
	if _, err := a.Ask(context.Background(), "and now?", nil); err != nil {
		t.Fatal(err)
	}
}

// A turn stopped at the step cap, or by an error, ends with a note too, and
// so does a stored history that ends mid-turn: the next request alternates.
func TestUnansweredTurnsKeepTheHistoryAlternating(t *testing.T) {
	t.Run("step cap", func(t *testing.T) {
		s := llmtest.New(t,
			llmtest.Fixed(llmtest.RunPython("print(1)")),
			func(req llmtest.Request) llmtest.Reply {
				alternates(t, req)
				return llmtest.Answer("ok")
			})
		a := newAgent(t, s, agent.Config{Model: "m", MaxSteps: 1})
		if res, _ := a.Ask(context.Background(), "loop", nil); res.StopReason != agent.MaxSteps {
			t.Fatalf("stop reason %q, want max_steps", res.StopReason)
		}
		if res, err := a.Ask(context.Background(), "and now?", nil); err != nil || res.Answer != "ok" {
			t.Fatalf("Ask after the cap = %+v, %v", res, err)
		}
	})
	t.Run("stored mid-turn", func(t *testing.T) {
		s := llmtest.New(t, func(req llmtest.Request) llmtest.Reply {
			alternates(t, req)
			return llmtest.Answer("ok")
		})
		a := newAgent(t, s, agent.Config{Model: "m"})
		stored := []llm.Message{{Role: llm.RoleSystem, Content: "sys"}, {Role: llm.RoleUser, Content: "killed during this"}}
		if err := a.Restore(context.Background(), stored, llm.Usage{}, 0); err != nil {
			t.Fatal(err)
		}
		if res, err := a.Ask(context.Background(), "again?", nil); err != nil || res.Answer != "ok" {
			t.Fatalf("Ask after Restore = %+v, %v", res, err)
		}
	})
}

// A run cancelled by the user ends with what it printed: the screen keeps
// it (ToolOutput), and the model reads it, with how long the run took, when
// the conversation goes on. In kernel mode the output also arrives while the
// code runs, and here it is what the user "sees" before pressing Ctrl+C.
func TestCancelledRunTellsTheModelWhatItPrinted(t *testing.T) {
	const code = "import time\nprint('partial result 41', flush=True)\n" +
		"open('/work/started', 'w').close()\ntime.sleep(300)"
	for _, mode := range []kernel.Mode{kernel.ModeKernel, kernel.ModeScript} {
		t.Run(string(mode), func(t *testing.T) {
			s := llmtest.New(t,
				llmtest.Fixed(llmtest.RunPython(code)),
				func(req llmtest.Request) llmtest.Reply {
					alternates(t, req)
					// The model answers from what it was told.
					return llmtest.Answer(req.LastTool())
				})
			sbx := newSandbox(t)
			k, err := kernel.Start(context.Background(), sbx,
				kernel.Options{Fresh: mode == kernel.ModeScript, MaxStdout: 4000, MaxStderr: 2000})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = k.Close() })
			var runner kernel.Runner = k
			model := llm.New(llm.Config{BaseURL: s.BaseURL(), Stream: true, MaxRetries: -1})
			var saved []llm.Message
			a := agent.New(model, sbx, runner, agent.Config{Model: "m", Timeout: time.Minute, ExecMode: mode,
				Checkpoint: func(c agent.Checkpoint) error { saved = c.Messages; return nil }})

			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			var mu sync.Mutex
			var c collect
			send := func(e agent.Event) {
				mu.Lock()
				defer mu.Unlock()
				c.send(e)
				switch e := e.(type) {
				case agent.OutputDelta:
					if strings.Contains(e.Text, "partial result 41") {
						cancel() // the user saw it and pressed Ctrl+C
					}
				case agent.ToolCall:
					if mode == kernel.ModeScript {
						// No live output: cancel once the code got as far.
						go waitForFile(ctx, sbx, "/work/started", cancel)
					}
				}
			}
			res, err := a.Ask(ctx, "compute it", send)
			if !errors.Is(err, context.Canceled) || res.StopReason != agent.Cancelled {
				t.Fatalf("Ask = %+v, %v; want cancelled", res, err)
			}
			var out *agent.ToolOutput
			for _, e := range c.events {
				if o, ok := e.(agent.ToolOutput); ok {
					out = &o
				}
			}
			if out == nil || !strings.HasPrefix(out.Stopped, "cancelled by the user after ") || out.Stdout != "partial result 41\n" {
				t.Errorf("ToolOutput = %+v, want it stopped by the user with the output so far", out)
			}

			// The step is saved, for a conversation continued later.
			if last := saved[len(saved)-1]; last.Role != llm.RoleTool || !strings.HasPrefix(last.Content, "cancelled by the user after ") {
				t.Errorf("the last message saved is %+v, want the cancelled run's", last)
			}

			res, err = a.Ask(context.Background(), "what did you get?", nil)
			if err != nil {
				t.Fatalf("Ask after the cancel = %+v, %v", res, err)
			}
			told := regexp.MustCompile(`^cancelled by the user after [0-9]+\.[0-9] s; output so far:\npartial result 41(\n|$)`)
			if !told.MatchString(res.Answer) {
				t.Errorf("the model was told %q, want the cancel with its time and the output so far", res.Answer)
			}
		})
	}
}

// waitForFile calls then once path exists in sbx, unless ctx ends first.
func waitForFile(ctx context.Context, sbx sandbox.Sandbox, path string, then func()) {
	for ctx.Err() == nil {
		if rc, err := sbx.ReadFile(ctx, path); err == nil {
			rc.Close()
			then()
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
}
