package cli

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/terpdev/terp/internal/llm/llmtest"
	"github.com/terpdev/terp/internal/terptest"
	"github.com/terpdev/terp/internal/tui"
)

func TestChatREPLWithPipedStdin(t *testing.T) {
	s := llmtest.New(t,
		llmtest.Fixed(llmtest.RunPython("x = 6 * 7\nprint(x)")),
		answerFromTool(t),
		// The second question builds on the first: the kernel kept x.
		llmtest.Fixed(llmtest.RunPython("print(x * 2)")),
		answerFromTool(t),
	)
	data := salesCSV(t)
	out := filepath.Join(terptest.TempDir(t), "out")
	stdin := strings.Join([]string{
		"what is six times seven?",
		"",
		"/frobnicate",
		"/upload " + data,
		"/files",
		"/download sales.csv",
		"/steps zero",
		"and twice that?",
		"/quit",
		"never asked",
	}, "\n") + "\n"
	r := terp(t, serverEnv(s), stdin, "chat", "--prewarm", "", "-o", out)
	// /frobnicate and "/steps zero" were wrong: the session goes on, and
	// its exit code says so.
	if r.code != exitUsage {
		t.Fatalf("exit %d, want %d; stderr:\n%s", r.code, exitUsage, r.stderr)
	}
	want := []string{
		"The month that grew the most: 42\n",
		"sales.csv\t",
		filepath.Join(out, "sales.csv") + "\n",
		"The month that grew the most: 84\n",
	}
	rest := r.stdout
	for _, w := range want {
		i := strings.Index(rest, w)
		if i < 0 {
			t.Fatalf("stdout does not have %q where expected:\n%s", w, r.stdout)
		}
		rest = rest[i+len(w):]
	}
	for _, w := range []string{"unknown command /frobnicate", "uploaded " + data, "/steps needs a whole number", "is kept: terp chat --resume "} {
		if !strings.Contains(r.stderr, w) {
			t.Errorf("stderr does not say %q:\n%s", w, r.stderr)
		}
	}
	if n := len(s.Requests()); n != 4 {
		t.Errorf("the model got %d requests, want 4 (/quit ends the input)", n)
	}
	if b, err := os.ReadFile(filepath.Join(out, "sales.csv")); err != nil || !bytes.HasPrefix(b, []byte("month,")) {
		t.Errorf("/download did not fetch sales.csv: %v", err)
	}
}

func TestChatREPLReportsAFailedQuestion(t *testing.T) {
	s := llmtest.New(t,
		llmtest.Fixed(llmtest.Reply{Status: 400, Body: `{"error":{"message":"model not found"}}`}),
		llmtest.Fixed(llmtest.Answer("fine")))
	r := terp(t, serverEnv(s), "first\nsecond\n", "chat", "--exec-mode", "script")
	if r.code != exitError {
		t.Errorf("exit %d, want %d when a question failed", r.code, exitError)
	}
	if !strings.Contains(r.stderr, "model not found") || r.stdout != "fine\n" {
		t.Errorf("the error was not reported, or the chat did not go on: stdout %q, stderr:\n%s", r.stdout, r.stderr)
	}
}

func TestChatUsage(t *testing.T) {
	if r := terp(t, nil, "", "chat", "what is this?"); r.code != exitUsage || !strings.Contains(r.stderr, "terp ask") {
		t.Errorf("chat with a question: exit %d, stderr %q; want a usage error pointing to terp ask", r.code, r.stderr)
	}
	if r := terp(t, nil, "", "chat", "--image-protocol", "jpeg"); r.code != exitUsage || !strings.Contains(r.stderr, "halfblock") {
		t.Errorf("bad --image-protocol: exit %d, stderr %q", r.code, r.stderr)
	}
	if r := terp(t, nil, "", "chat", "--help"); r.code != 0 || !strings.Contains(r.stdout, "Examples:") {
		t.Errorf("chat --help: exit %d, no examples:\n%s", r.code, r.stdout)
	}
}

// tmuxSession runs a command in a detached tmux session on a socket of its
// own, as a person would see it in a 100×30 terminal.
type tmuxSession struct {
	t      *testing.T
	socket string
}

func startTmux(t *testing.T, dir string, env []string, command string) *tmuxSession {
	t.Helper()
	if _, err := exec.LookPath("tmux"); err != nil {
		t.Skip("tmux is not installed")
	}
	conf := filepath.Join(dir, "tmux.conf")
	// set-clipboard on lets a program's OSC 52 land in tmux's buffers, so
	// the test can see whether one got through.
	if err := os.WriteFile(conf, []byte("set -g set-clipboard on\nset -g status off\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	s := &tmuxSession{t: t, socket: fmt.Sprintf("terp-test-%d-%d", os.Getpid(), time.Now().UnixNano())}
	cmd := exec.Command("tmux", "-L", s.socket, "-f", conf, "new-session", "-d", "-s", "terp", "-x", "100", "-y", "30", "-c", dir, command)
	cmd.Env = env
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("tmux new-session: %v\n%s", err, out)
	}
	path := strings.TrimSpace(s.run("display-message", "-p", "#{socket_path}"))
	t.Cleanup(func() {
		_ = exec.Command("tmux", "-L", s.socket, "kill-server").Run()
		if path != "" {
			_ = os.Remove(path)
		}
	})
	return s
}

func (s *tmuxSession) run(args ...string) string {
	out, _ := exec.Command("tmux", append([]string{"-L", s.socket}, args...)...).Output()
	return string(out)
}

// keys types text literally, then presses the named keys.
func (s *tmuxSession) keys(text string, named ...string) {
	if text != "" {
		s.run("send-keys", "-t", "terp", "-l", text)
	}
	if len(named) > 0 {
		s.run(append([]string{"send-keys", "-t", "terp"}, named...)...)
	}
}

func (s *tmuxSession) screen() string { return s.run("capture-pane", "-p", "-t", "terp") }

// waitFor polls the screen until it has all of want.
func (s *tmuxSession) waitFor(what string, timeout time.Duration, want ...string) string {
	s.t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		screen := s.screen()
		ok := true
		for _, w := range want {
			ok = ok && strings.Contains(screen, w)
		}
		if ok {
			return screen
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("timed out waiting for %s; the screen:\n%s", what, screen)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

const wavesCode = `import numpy as np
import matplotlib.pyplot as plt
x = np.linspace(0, 10, 200)
plt.plot(x, np.sin(x))
plt.savefig("/work/chart.png")
print("peak", round(float(np.sin(x).max()), 2))
print("\x1b]0;owned\x07\x1b]52;c;cHduZWQ=\x07\x1b[2J")
`

// TestChatInTmux drives the real binary in a terminal, with its defaults
// (the Python kernel) and a real local sandbox, against a scripted model:
// a question whose code draws a chart, a run cancelled with ctrl+c, and a
// question after it.
func TestChatInTmux(t *testing.T) {
	bin := terptest.Binary(t)
	sleeping := make(chan struct{})
	s := llmtest.New(t,
		llmtest.Fixed(llmtest.Reply{Reasoning: "A sine wave peaks at 1.", Calls: llmtest.RunPython(wavesCode).Calls}),
		func(req llmtest.Request) llmtest.Reply {
			res, _ := req.ToolResult()
			return llmtest.Answer("The waves **peak** at " + strings.Fields(res.Stdout)[1] + ".")
		},
		func(llmtest.Request) llmtest.Reply {
			close(sleeping)
			return llmtest.RunPython("import time\ntime.sleep(300)")
		},
		func(req llmtest.Request) llmtest.Reply {
			// The cancelled call was answered, so the history the chat
			// goes on with is one a server accepts.
			if !answersEveryCall(req.Messages) {
				t.Errorf("after ctrl+c a tool call has no tool message: %+v", req.Messages)
			}
			return llmtest.Answer("Still here after the interrupt.")
		},
	)
	dir := terptest.TempDir(t)
	env := []string{
		"PATH=" + os.Getenv("PATH"), "HOME=" + dir, "TERM=xterm-256color",
		"XDG_DATA_HOME=" + filepath.Join(dir, "data"), "XDG_CONFIG_HOME=" + filepath.Join(dir, "config"),
		"TERP_BASE_URL=" + s.BaseURL(), "TERP_MODEL=test-model",
	}
	exitFile := filepath.Join(dir, "exit-code")
	// The shell waits after terp, so that what terp printed on leaving
	// stays on the screen to be read.
	tm := startTmux(t, dir, env, fmt.Sprintf("%s chat; echo $? > %s; sleep 60", bin, exitFile))
	title := tm.run("display", "-p", "-t", "terp", "#{pane_title}")

	tm.waitFor("the chat to start", 30*time.Second, "Ask about your data", "test-model")
	tm.keys("Plot the waves", "Enter")
	// The files are downloaded after the answer; the key hints come back
	// when the turn is over.
	end := tm.waitFor("the answer", 60*time.Second, "The waves peak at 1.0.", "enter sends")

	// Scroll back through the turn, collecting what it showed.
	seen := end
	for range 4 {
		tm.keys("", "PPage")
		time.Sleep(200 * time.Millisecond)
		seen += tm.screen()
	}
	for _, want := range []string{
		"❯ Plot the waves", "step 1/8", "Thought", `plt.savefig("/work/chart.png")`, "✓ exit 0", "peak 1.0",
		"▣ /work/chart.png", "▀▀▀▀",
	} {
		if !strings.Contains(seen, want) {
			t.Errorf("the screen never showed %q; it showed:\n%s", want, seen)
		}
	}
	link := regexp.MustCompile(`terp-[0-9a-f]{12}/chart\.png`).FindString(seen)
	if png, err := os.ReadFile(filepath.Join(dir, link)); link == "" || err != nil || !bytes.HasPrefix(png, []byte("\x89PNG")) {
		t.Errorf("the chart's path %q is not on screen or is not the downloaded PNG (%v)", link, err)
	}
	// What the code printed changed neither the title nor the clipboard (its
	// output is shown as a terminal would have left it, the sequences gone).
	if got := tm.run("display", "-p", "-t", "terp", "#{pane_title}"); got != title {
		t.Errorf("the pane's title changed from %q to %q", title, got)
	}
	if bufs := tm.run("list-buffers"); bufs != "" {
		t.Errorf("the code wrote the clipboard: %q", bufs)
	}

	tm.keys("", "Escape")
	tm.keys("Now sleep", "Enter")
	select {
	case <-sleeping:
	case <-time.After(30 * time.Second):
		t.Fatal("the model was never asked the second question")
	}
	tm.waitFor("the code to run", 30*time.Second, "time.sleep(300)", "Running")
	tm.keys("", "C-c")
	tm.waitFor("the run to be cancelled", 30*time.Second, "Cancelled", "■ cancelled by the user after", "KeyboardInterrupt")

	tm.keys("Are you there?", "Enter")
	tm.waitFor("the answer after the interrupt", 30*time.Second, "Still here after the interrupt.")
	if n := len(s.Requests()); n != 4 {
		t.Errorf("the model got %d requests, want 4", n)
	}

	// ctrl+d on the empty input quits, cleanly.
	tm.keys("", "C-d")
	deadline := time.Now().Add(30 * time.Second)
	for {
		if b, err := os.ReadFile(exitFile); err == nil {
			if code := strings.TrimSpace(string(b)); code != "0" {
				t.Errorf("terp chat exited with %s", code)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("terp chat did not quit on ctrl+d; the screen:\n%s", tm.screen())
		}
		time.Sleep(100 * time.Millisecond)
	}
	// Leaving says how to come back.
	tm.waitFor("the resume hint", 10*time.Second, "is kept: terp chat --resume ")
	wantPausedConversations(t, filepath.Join(dir, "data", "terp"))
}

// answersEveryCall reports whether each tool call in msgs has its tool
// message.
func answersEveryCall(msgs []llmtest.Message) bool {
	answered := map[string]bool{}
	for _, m := range msgs {
		if m.Role == "tool" {
			answered[m.ToolCallID] = true
		}
	}
	for _, m := range msgs {
		for _, c := range m.ToolCalls {
			if !answered[c.ID] {
				return false
			}
		}
	}
	return true
}

func TestChatContinuesAStoredConversation(t *testing.T) {
	s := llmtest.New(t, llmtest.Fixed(llmtest.Answer("forty-two")), llmtest.Fixed(llmtest.Answer("eighty-four")))
	env := serverEnv(s)
	env["XDG_DATA_HOME"] = terptest.TempDir(t)
	if r := terp(t, env, "", "ask", "--exec-mode", "script", "what is six times seven?"); r.code != 0 {
		t.Fatalf("ask: exit %d: %s", r.code, r.stderr)
	}
	r := terp(t, env, "and twice that?\n", "chat", "--exec-mode", "script", "--continue")
	if r.code != 0 || r.stdout != "eighty-four\n" {
		t.Fatalf("chat --continue: exit %d, stdout %q, stderr:\n%s", r.code, r.stdout, r.stderr)
	}
	var said []string
	for _, m := range s.Requests()[1].Messages {
		said = append(said, m.Content)
	}
	if !strings.Contains(strings.Join(said, "\n"), "what is six times seven?") {
		t.Errorf("the chat did not go on with the stored conversation; the model got:\n%s", strings.Join(said, "\n"))
	}
}

// A question that reached the step cap makes the line-mode chat exit 3, as
// ask does; a failed question still outranks it.
func TestChatREPLExitsAtTheStepCap(t *testing.T) {
	loop := llmtest.Fixed(llmtest.RunPython("print(1)"))
	s := llmtest.New(t, loop, llmtest.Fixed(llmtest.Answer("done")))
	r := terp(t, serverEnv(s), "loop\nthen answer\n", "chat", "--exec-mode", "script", "--max-steps", "1")
	if r.code != exitMaxSteps || !strings.Contains(r.stdout, "done") {
		t.Fatalf("exit %d, want %d; stdout %q, stderr:\n%s", r.code, exitMaxSteps, r.stdout, r.stderr)
	}
}

// The line-mode chat's /help is the same table as the chat UI's.
func TestChatREPLHelpListsEveryCommand(t *testing.T) {
	s := llmtest.New(t)
	r := terp(t, serverEnv(s), "/help\n", "chat", "--exec-mode", "script")
	for _, c := range tui.Commands {
		if !strings.Contains(r.stderr, c.Name) {
			t.Errorf("/help lacks %s:\n%s", c.Name, r.stderr)
		}
	}
	// Nothing was asked, so nothing was kept to come back to.
	if strings.Contains(r.stderr, "is kept") {
		t.Errorf("an empty chat offers to resume:\n%s", r.stderr)
	}
}
