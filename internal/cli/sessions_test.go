package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/charmbracelet/x/ansi"

	"github.com/terpdev/terp/internal/config"
	"github.com/terpdev/terp/internal/llm/llmtest"
	"github.com/terpdev/terp/internal/sandbox"
	"github.com/terpdev/terp/internal/store"
	"github.com/terpdev/terp/internal/terptest"
)

// sharedEnv is an environment whose data directory outlives one command, so
// a test can run several terp commands on the same conversations.
func sharedEnv(t *testing.T, s *llmtest.Server) (map[string]string, string) {
	t.Helper()
	dir := terptest.TempDir(t)
	env := map[string]string{
		"XDG_DATA_HOME":   filepath.Join(dir, "data"),
		"XDG_CONFIG_HOME": filepath.Join(dir, "config"),
	}
	if s != nil {
		env["TERP_BASE_URL"] = s.BaseURL()
		env["TERP_MODEL"] = "test-model"
	}
	return env, filepath.Join(dir, "data", "terp")
}

func askJSONOf(t *testing.T, r result) askJSON {
	t.Helper()
	var got askJSON
	if err := json.Unmarshal([]byte(r.stdout), &got); err != nil {
		t.Fatalf("stdout is not one JSON object: %v\n%s\nstderr:\n%s", err, r.stdout, r.stderr)
	}
	return got
}

func TestContinueSeesHistoryAndFiles(t *testing.T) {
	s := llmtest.New(t,
		llmtest.Fixed(llmtest.RunPython("x = 41\nopen('notes.txt', 'w').write('kept')\nprint('saved')")),
		llmtest.Fixed(llmtest.Answer("Saved notes.txt.")),
		func(req llmtest.Request) llmtest.Reply {
			// The follow-up carries the whole first turn.
			var sawFirstStep bool
			for _, m := range req.Messages {
				if m.Role == "tool" && strings.Contains(m.Content, "saved") {
					sawFirstStep = true
				}
			}
			last := req.Messages[len(req.Messages)-1]
			if !sawFirstStep || last.Role != "user" || !strings.Contains(last.Content, "all variables and imports were lost") {
				t.Errorf("the follow-up request lacks the history or the note about the restarted session: %+v", req.Messages)
			}
			return llmtest.RunPython("print(open('notes.txt').read(), 'x' in globals())")
		},
		answerWithStdout)
	env, dataDir := sharedEnv(t, s)
	out := filepath.Join(terptest.TempDir(t), "out")
	first := askJSONOf(t, terp(t, env, "", "ask", "--json", "-o", out, "save a note"))
	second := askJSONOf(t, terp(t, env, "", "ask", "--json", "-o", out, "--continue", "read it back"))
	if second.ConversationID != first.ConversationID || second.Answer != "kept False" {
		t.Fatalf("follow-up = %+v; want the same conversation, its file kept and its variables reset", second)
	}
	st, _ := store.Open(dataDir)
	c, err := st.Load(first.ConversationID)
	if err != nil {
		t.Fatal(err)
	}
	if c.Turns != 2 || c.Steps != 4 || c.Title != "save a note" || c.Usage.TotalTokens != 440 {
		t.Errorf("stored %d turns, %d steps, title %q, %d tokens; want 2, 4, the first question, 440", c.Turns, c.Steps, c.Title, c.Usage.TotalTokens)
	}
	wantPausedConversations(t, dataDir)
}

func TestSessionsCommands(t *testing.T) {
	s := llmtest.New(t, llmtest.Fixed(llmtest.Answer("one")), llmtest.Fixed(llmtest.Answer("two")))
	env, dataDir := sharedEnv(t, s)
	a := askJSONOf(t, terp(t, env, "", "ask", "--json", "--exec-mode", "script", "first question"))
	b := askJSONOf(t, terp(t, env, "", "ask", "--json", "--exec-mode", "script", "second question"))

	r := terp(t, env, "", "sessions", "ls")
	if r.code != 0 || !strings.Contains(r.stdout, "second question") || strings.Index(r.stdout, b.ConversationID) > strings.Index(r.stdout, a.ConversationID) {
		t.Errorf("sessions ls (exit %d) does not list both, latest first:\n%s%s", r.code, r.stdout, r.stderr)
	}
	var rows []sessionRow
	r = terp(t, env, "", "sessions", "ls", "--json")
	if err := json.Unmarshal([]byte(r.stdout), &rows); err != nil || len(rows) != 2 || rows[0].ID != b.ConversationID || rows[0].Steps != 1 {
		t.Errorf("sessions ls --json = %+v, %v", rows, err)
	}

	// Any unique prefix names a conversation.
	prefix := a.ConversationID[:6]
	r = terp(t, env, "", "sessions", "show", prefix)
	if r.code != 0 || !strings.Contains(r.stdout, "── you\nfirst question") || !strings.Contains(r.stdout, "one") {
		t.Errorf("sessions show %s (exit %d):\n%s%s", prefix, r.code, r.stdout, r.stderr)
	}
	if r := terp(t, env, "", "sessions", "show", "zzz"); r.code != exitUsage || !strings.Contains(r.stderr, "no such conversation") {
		t.Errorf("sessions show of an unknown id: exit %d, %s", r.code, r.stderr)
	}

	r = terp(t, env, "", "sessions", "rm", prefix)
	if r.code != 0 || !strings.Contains(r.stdout, "removed "+a.ConversationID) {
		t.Fatalf("sessions rm (exit %d):\n%s%s", r.code, r.stdout, r.stderr)
	}
	st, _ := store.Open(dataDir)
	if entries, _ := st.List(); len(entries) != 1 || entries[0].ID != b.ConversationID {
		t.Errorf("after rm: %+v", entries)
	}
	c, _ := st.Load(b.ConversationID)
	other := filepath.Join(dataDir, "sandboxes", c.Sandbox.SessionID)
	if sandboxes, _ := filepath.Glob(filepath.Join(dataDir, "sandboxes", "[0-9a-f]*")); len(sandboxes) != 1 || sandboxes[0] != other {
		t.Errorf("sandboxes after rm: %v, want only %s", sandboxes, other)
	}
}

func TestPrune(t *testing.T) {
	s := llmtest.New(t, llmtest.Fixed(llmtest.Answer("old")), llmtest.Fixed(llmtest.Answer("new")))
	env, dataDir := sharedEnv(t, s)
	old := askJSONOf(t, terp(t, env, "", "ask", "--json", "--exec-mode", "script", "old question"))
	recent := askJSONOf(t, terp(t, env, "", "ask", "--json", "--exec-mode", "script", "new question"))
	// Age the first conversation by rewriting its record's last activity.
	path := filepath.Join(dataDir, "conversations", old.ConversationID, "conversation.json")
	b, _ := os.ReadFile(path)
	var rec map[string]any
	if err := json.Unmarshal(b, &rec); err != nil {
		t.Fatal(err)
	}
	rec["updated"] = time.Now().Add(-48 * time.Hour).UTC().Format(time.RFC3339)
	b, _ = json.Marshal(rec)
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	r := terp(t, env, "", "sessions", "prune", "--older-than", "24h")
	if r.code != 0 || !strings.Contains(r.stdout, "1 conversations removed") {
		t.Fatalf("prune (exit %d):\n%s%s", r.code, r.stdout, r.stderr)
	}
	st, _ := store.Open(dataDir)
	if entries, _ := st.List(); len(entries) != 1 || entries[0].ID != recent.ConversationID {
		t.Errorf("after prune: %+v, want only the recent one", entries)
	}
	if r := terp(t, env, "", "sessions", "prune"); r.code != exitUsage {
		t.Errorf("prune without --older-than: exit %d", r.code)
	}
}

func TestResumeWhenTheSandboxVanished(t *testing.T) {
	s := llmtest.New(t,
		llmtest.Fixed(llmtest.RunPython("open('/work/result.txt', 'w').write('lost')")),
		llmtest.Fixed(llmtest.Answer("done")),
		func(req llmtest.Request) llmtest.Reply {
			last := req.Messages[len(req.Messages)-1].Content
			if !strings.Contains(last, "sandbox had expired") || !strings.Contains(last, "/work/sales.csv") {
				t.Errorf("the model was not told its sandbox is new and what was uploaded again: %q", last)
			}
			return llmtest.RunPython("import os\nprint(sorted(f for f in os.listdir('/work') if not f.startswith('.')))")
		},
		answerWithStdout)
	env, dataDir := sharedEnv(t, s)
	first := askJSONOf(t, terp(t, env, "", "ask", "--json", "-o", terptest.TempDir(t), "-f", salesCSV(t), "work"))
	st, _ := store.Open(dataDir)
	c, _ := st.Load(first.ConversationID)
	if err := os.RemoveAll(filepath.Join(dataDir, "sandboxes", c.Sandbox.SessionID)); err != nil {
		t.Fatal(err)
	}
	second := askJSONOf(t, terp(t, env, "", "ask", "--json", "-o", terptest.TempDir(t), "--resume", first.ConversationID[:5], "again"))
	if second.Answer != "['sales.csv']" {
		t.Errorf("answer = %q; want the upload back and the lost file gone", second.Answer)
	}
}

func TestDamagedAndBusyConversations(t *testing.T) {
	s := llmtest.New(t, llmtest.Fixed(llmtest.Answer("a")), llmtest.Fixed(llmtest.Answer("b")))
	env, dataDir := sharedEnv(t, s)
	good := askJSONOf(t, terp(t, env, "", "ask", "--json", "--exec-mode", "script", "good"))
	bad := askJSONOf(t, terp(t, env, "", "ask", "--json", "--exec-mode", "script", "bad"))
	if err := os.WriteFile(filepath.Join(dataDir, "conversations", bad.ConversationID, "conversation.json"), []byte(`{"id": "`), 0o600); err != nil {
		t.Fatal(err)
	}
	r := terp(t, env, "", "sessions", "ls")
	if r.code != 0 || !strings.Contains(r.stdout, good.ConversationID) || !strings.Contains(r.stdout, bad.ConversationID+"  (damaged") {
		t.Errorf("sessions ls with a damaged record (exit %d):\n%s%s", r.code, r.stdout, r.stderr)
	}
	r = terp(t, env, "", "ask", "--resume", bad.ConversationID, "more")
	if r.code != exitError || !strings.Contains(r.stderr, "is damaged") || !strings.Contains(r.stderr, "terp sessions rm "+bad.ConversationID) {
		t.Errorf("resuming a damaged conversation: exit %d, %s", r.code, r.stderr)
	}

	// A conversation open in another process is refused, not shared.
	st, _ := store.Open(dataDir)
	lock, err := st.Lock(good.ConversationID)
	if err != nil {
		t.Fatal(err)
	}
	r = terp(t, env, "", "ask", "--resume", good.ConversationID, "more")
	if r.code != exitError || !strings.Contains(r.stderr, "is open in another terp process") {
		t.Errorf("resuming a busy conversation: exit %d, %s", r.code, r.stderr)
	}
	lock.Unlock()
}

// TestKilledMidStepThenResumed kills a real terp process with SIGKILL while
// the code of its first question runs: in the first step, when no step was
// saved but code had set x, or in the second, when the first was saved. The
// follow-up goes on with what was saved and the files, and the model is told
// its variables are gone, so it does not count on x.
func TestKilledMidStepThenResumed(t *testing.T) {
	const step1 = "x = 41\nopen('/work/step1.txt', 'w').write('from step 1')\nprint('step 1 done')"
	const hang = "\nopen('/work/running.txt', 'w').write('yes')\nimport time\ntime.sleep(300)"
	tests := []struct {
		name   string
		before []llmtest.Step // the steps of the first question, the last killed
		// history is the roles the follow-up sends, up to its question.
		history string
	}{
		// The question was saved before the first model call, and the
		// turn it began is closed with a note.
		{"in the first step", []llmtest.Step{llmtest.Fixed(llmtest.RunPython(step1 + hang))}, "system,user,assistant,user"},
		{"in the second step", []llmtest.Step{llmtest.Fixed(llmtest.RunPython(step1)), llmtest.Fixed(llmtest.RunPython(hang))},
			// The saved turn is closed with a note, so the roles alternate.
			"system,user,assistant,tool,assistant,user"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			bin := terptest.Binary(t)
			s := llmtest.New(t, append(tt.before,
				func(req llmtest.Request) llmtest.Reply {
					var history []string
					for _, m := range req.Messages {
						history = append(history, m.Role)
					}
					if got := strings.Join(history, ","); got != tt.history {
						t.Errorf("resumed history = %s; want %s: what was saved, without the killed step", got, tt.history)
					}
					if last := req.LastUser(); !strings.Contains(last, "all variables and imports were lost. Files in /work were kept") {
						t.Errorf("the model was not told its variables are gone:\n%s", last)
					}
					return llmtest.RunPython("print(open('/work/step1.txt').read(), 'x' in globals())")
				},
				answerWithStdout)...)
			env, dataDir := sharedEnv(t, s)
			cmd := exec.Command(bin, "ask", "--json", "two steps")
			cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir()}
			for k, v := range env {
				cmd.Env = append(cmd.Env, k+"="+v)
			}
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			defer cmd.Process.Kill()
			// The killed step's code is running once its file is there.
			for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(50 * time.Millisecond) {
				if running, _ := filepath.Glob(filepath.Join(dataDir, "sandboxes", "*", "work", "running.txt")); len(running) > 0 {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("the killed step's code never ran; stderr:\n%s", stderr.String())
				}
			}
			if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			_ = cmd.Wait()

			r := terp(t, env, "", "ask", "--json", "-o", terptest.TempDir(t), "--continue", "what did step 1 write?")
			got := askJSONOf(t, r)
			if r.code != 0 || got.Answer != "from step 1 False" {
				t.Fatalf("resume after SIGKILL: exit %d, %+v; want step 1's file kept and x gone\n%s", r.code, got, r.stderr)
			}
			wantPausedConversations(t, dataDir)
		})
	}
}

// answerWithStdout answers with what the last step printed.
func answerWithStdout(req llmtest.Request) llmtest.Reply {
	res, _ := req.ToolResult()
	return llmtest.Answer(strings.TrimSpace(res.Stdout))
}

func TestChatResumesAStoredConversation(t *testing.T) {
	s := llmtest.New(t,
		llmtest.Fixed(llmtest.RunPython("open('/work/first.txt', 'w').write('from ask')")),
		llmtest.Fixed(llmtest.Answer("wrote it")),
		func(req llmtest.Request) llmtest.Reply {
			if len(req.Messages) < 5 {
				t.Errorf("the resumed chat sent %d messages, want the stored history too", len(req.Messages))
			}
			return llmtest.RunPython("print(open('/work/first.txt').read())")
		},
		answerWithStdout)
	env, _ := sharedEnv(t, s)
	first := askJSONOf(t, terp(t, env, "", "ask", "--json", "-o", terptest.TempDir(t), "write a file"))
	r := terp(t, env, "/resume\n/resume "+first.ConversationID[:4]+"\nwhat is in it?\n", "chat", "-o", terptest.TempDir(t))
	if r.code != 0 {
		t.Fatalf("chat: exit %d\n%s", r.code, r.stderr)
	}
	if !strings.Contains(r.stdout+r.stderr, "write a file") || !strings.Contains(r.stderr, "resumed conversation "+first.ConversationID) {
		t.Errorf("/resume did not list and resume the conversation:\n%s\n%s", r.stdout, r.stderr)
	}
	if !strings.Contains(r.stdout, "from ask") {
		t.Errorf("the answer does not come from the resumed sandbox:\n%s", r.stdout)
	}
}

// slowLines feeds a REPL one line at a time, waiting before each after the
// first, as a person who comes back to the chat later.
type slowLines struct {
	lines []string
	wait  time.Duration
	n     int
}

func (s *slowLines) Read(p []byte) (int, error) {
	if len(s.lines) == 0 {
		return 0, io.EOF
	}
	if s.n > 0 {
		time.Sleep(s.wait)
	}
	s.n++
	line := s.lines[0] + "\n"
	s.lines = s.lines[1:]
	return copy(p, line), nil
}

// TestChatPausesWhileTheUserIsAway covers both reasons a chat's sandbox is
// paused between questions: idle_pause, and sandbox_timeout, which a long
// chat outlives; either way the next question resumes it and the model is
// told its variables are gone and its files kept.
func TestChatPausesWhileTheUserIsAway(t *testing.T) {
	for _, flags := range [][]string{{"--idle-pause", "200ms"}, {"--sandbox-timeout", "300ms"}} {
		t.Run(flags[0], func(t *testing.T) {
			s := llmtest.New(t,
				llmtest.Fixed(llmtest.RunPython("x = 1\nopen('/work/kept.txt', 'w').write('kept')")),
				llmtest.Fixed(llmtest.Answer("set")),
				func(req llmtest.Request) llmtest.Reply {
					last := req.Messages[len(req.Messages)-1].Content
					if !strings.Contains(last, "Python was restarted") {
						t.Errorf("the model was not told its session restarted: %q", last)
					}
					return llmtest.RunPython("print(open('/work/kept.txt').read(), 'x' in globals())")
				},
				answerWithStdout)
			env, _ := sharedEnv(t, s)
			var out, errOut bytes.Buffer
			f := NewFactory()
			f.IO = IOStreams{In: &slowLines{lines: []string{"set x", "and now?"}, wait: time.Second}, Out: &out, ErrOut: &errOut}
			f.Getenv = func(k string) string { return env[k] }
			code := Run(context.Background(), f, append([]string{"chat", "-o", terptest.TempDir(t)}, flags...))
			if code != 0 || !strings.Contains(out.String(), "kept False") {
				t.Fatalf("exit %d, stdout %q, stderr:\n%s", code, out.String(), errOut.String())
			}
			// The user hears what the model heard.
			if !strings.Contains(errOut.String(), "Python was restarted") {
				t.Errorf("the user was not told the session restarted:\n%s", errOut.String())
			}
		})
	}
}

// TestContinueKeepsTheStoredSettings resumes a conversation started in script
// mode with a model and endpoint given as flags: the follow-up, without them,
// keeps all three (a variable set in one step is gone in the next, as in
// script mode); one that sets the exec mode in the environment switches it
// (the variable survives), and the record keeps the new mode.
func TestContinueKeepsTheStoredSettings(t *testing.T) {
	// Each follow-up sets y in one step and looks for it in the next.
	setAndLook := func(wantTool string) []llmtest.Step {
		return []llmtest.Step{
			func(req llmtest.Request) llmtest.Reply {
				if req.Model != "first-model" {
					t.Errorf("the follow-up asked model %q, want the stored first-model", req.Model)
				}
				if desc := req.Tools[0].Function.Description; !strings.HasPrefix(desc, wantTool) {
					t.Errorf("the model was told the tool is:\n%s\nwant it to start %q", desc, wantTool)
				}
				return llmtest.RunPython("y = 2")
			},
			llmtest.Fixed(llmtest.RunPython("print('y' in globals())")),
			answerWithStdout,
		}
	}
	const script, persistent = "Run a Python 3 script", "Run Python 3 code in a persistent session"
	steps := []llmtest.Step{llmtest.Fixed(llmtest.Answer("started"))}
	steps = append(steps, setAndLook(script)...)
	steps = append(steps, setAndLook(persistent)...)
	s := llmtest.New(t, steps...)
	env, dataDir := sharedEnv(t, nil) // neither model nor endpoint from the environment
	first := askJSONOf(t, terp(t, env, "", "ask", "--json", "--exec-mode", "script",
		"--model", "first-model", "--base-url", s.BaseURL(), "start"))

	if got := askJSONOf(t, terp(t, env, "", "ask", "--json", "-c", "is y kept?")); got.Answer != "False" {
		t.Errorf("follow-up without flags answered %q (%s), want False: the conversation is in script mode", got.Answer, got.Error)
	}
	env["TERP_EXEC_MODE"] = "kernel"
	if got := askJSONOf(t, terp(t, env, "", "ask", "--json", "-c", "is y kept now?")); got.Answer != "True" {
		t.Errorf("follow-up with TERP_EXEC_MODE=kernel answered %q (%s), want True", got.Answer, got.Error)
	}
	st, _ := store.Open(dataDir)
	c, err := st.Load(first.ConversationID)
	if err != nil {
		t.Fatal(err)
	}
	if want := (store.Settings{Model: "first-model", BaseURL: s.BaseURL(), ExecMode: "kernel", MaxSteps: 8, Network: "none"}); !reflect.DeepEqual(c.Settings, want) {
		t.Errorf("stored settings = %+v, want %+v", c.Settings, want)
	}
}

// TestSessionsListFitsTheTerminal stores conversations whose titles and
// model names are far too long for a row: every row of the listing still
// fits 80 columns, with ids whole and titles cut with an ellipsis, however
// wide their characters are.
func TestSessionsListFitsTheTerminal(t *testing.T) {
	env, dataDir := sharedEnv(t, nil)
	st, err := store.Open(dataDir)
	if err != nil {
		t.Fatal(err)
	}
	long := store.New("aaaaaaaaaaa1", "ask", "", store.Settings{Model: "qwen3-32b"}, "local")
	long.Title = strings.Repeat("How did revenue grow per month? ", 7)[:200] // older records, other writers
	wide := store.New("aaaaaaaaaaa2", "ask", "", store.Settings{Model: "Qwen/Qwen3-Coder-480B-A35B-Instruct-FP8"}, "local")
	wide.Title = strings.Repeat("月別の売上の伸び", 25) // 200 characters, 400 cells
	short := store.New("aaaaaaaaaaa3", "chat", "2+2?", store.Settings{Model: "tiny-model"}, "local")
	for _, c := range []*store.Conversation{long, wide, short} {
		if err := st.Save(c); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.MkdirAll(filepath.Join(dataDir, "conversations", "aaaaaaaaaaa4"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dataDir, "conversations", "aaaaaaaaaaa4", "conversation.json"), []byte(`{"id": "`), 0o600); err != nil {
		t.Fatal(err)
	}

	r := terp(t, env, "", "sessions", "ls")
	if r.code != 0 {
		t.Fatalf("sessions ls: exit %d\n%s", r.code, r.stderr)
	}
	lines := strings.Split(strings.TrimRight(r.stdout, "\n"), "\n")
	if len(lines) != 5 {
		t.Fatalf("sessions ls printed %d lines, want a header and 4 rows:\n%s", len(lines), r.stdout)
	}
	for _, l := range lines {
		if w := ansi.StringWidth(l); w > 80 {
			t.Errorf("row is %d columns wide, want at most 80:\n%s", w, l)
		}
	}
	for _, want := range []string{"aaaaaaaaaaa1  How did revenue grow", "aaaaaaaaaaa2  月別", "aaaaaaaaaaa3  2+2?", "aaaaaaaaaaa4  (damaged: run terp sessions show aaaaaaaaaaa4)"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("no row with %q:\n%s", want, r.stdout)
		}
	}
	if strings.Count(r.stdout, "…") < 2 {
		t.Errorf("the long titles are not cut with an ellipsis:\n%s", r.stdout)
	}
	// The columns still line up, in cells: each model starts under MODEL.
	col := strings.Index(lines[0], "MODEL")
	for _, model := range []string{"qwen3-32b", "Qwen/Qwen3", "tiny-model"} {
		i := slices.IndexFunc(lines, func(l string) bool { return strings.Contains(l, model) })
		if i < 0 {
			t.Errorf("no row with model %q:\n%s", model, r.stdout)
			continue
		}
		at := strings.Index(lines[i], model)
		if at < 0 || ansi.StringWidth(lines[i][:at]) != col {
			t.Errorf("model %q is not under MODEL (column %d):\n%s", model, col, r.stdout)
		}
	}
}

// sessions rm removes the sandbox on the backend the record names, not the
// one this command is configured for: a local conversation removed with
// TERP_SANDBOX=docker set loses its /work too.
func TestSessionsRmUsesTheRecordsBackend(t *testing.T) {
	s := llmtest.New(t, llmtest.Fixed(llmtest.Answer("one")))
	env, dataDir := sharedEnv(t, s)
	a := askJSONOf(t, terp(t, env, "", "ask", "--json", "--exec-mode", "script", "a question"))
	if sandboxes, _ := filepath.Glob(filepath.Join(dataDir, "sandboxes", "[0-9a-f]*")); len(sandboxes) != 1 {
		t.Fatalf("sandboxes after ask: %v", sandboxes)
	}
	env["TERP_SANDBOX"] = "docker"
	r := terp(t, env, "", "sessions", "rm", a.ConversationID)
	if r.code != 0 {
		t.Fatalf("sessions rm (exit %d):\n%s%s", r.code, r.stdout, r.stderr)
	}
	if sandboxes, _ := filepath.Glob(filepath.Join(dataDir, "sandboxes", "[0-9a-f]*")); len(sandboxes) != 0 {
		t.Errorf("the local sandbox survived sessions rm with TERP_SANDBOX=docker: %v", sandboxes)
	}
}

// resumeFailsOnce is a real backend whose first Resume fails, as when a
// daemon is briefly away.
type resumeFailsOnce struct {
	sandbox.Backend
	failed atomic.Bool
}

func (b *resumeFailsOnce) Resume(ctx context.Context, id sandbox.SessionID) (sandbox.Sandbox, error) {
	if b.failed.CompareAndSwap(false, true) {
		return nil, errors.New("the sandbox backend is briefly away")
	}
	return b.Backend.Resume(ctx, id)
}

// A wake that fails leaves the idle pause working for the rest of the chat:
// after the next question, which wakes the sandbox, being away pauses it
// again, and the question after that is told so.
func TestFailedWakeKeepsTheIdlePause(t *testing.T) {
	restarted := func(req llmtest.Request) bool {
		return strings.Contains(req.Messages[len(req.Messages)-1].Content, "Python was restarted")
	}
	s := llmtest.New(t,
		llmtest.Fixed(llmtest.RunPython("x = 1")),
		llmtest.Fixed(llmtest.Answer("one")),
		func(req llmtest.Request) llmtest.Reply {
			if !restarted(req) {
				t.Error("the question after the failed wake was not told of the restart")
			}
			return llmtest.Answer("three")
		},
		func(req llmtest.Request) llmtest.Reply {
			if !restarted(req) {
				t.Error("after the failed wake, being away no longer paused the sandbox")
			}
			return llmtest.Answer("four")
		})
	env, _ := sharedEnv(t, s)
	var out, errOut bytes.Buffer
	f := NewFactory()
	f.IO = IOStreams{In: &slowLines{lines: []string{"one", "two", "three", "four"}, wait: time.Second}, Out: &out, ErrOut: &errOut}
	f.Getenv = func(k string) string { return env[k] }
	real := f.NewBackend
	f.NewBackend = func(cfg *config.Config) (sandbox.Backend, error) {
		b, err := real(cfg)
		if err != nil {
			return nil, err
		}
		return &resumeFailsOnce{Backend: b}, nil
	}
	Run(context.Background(), f, []string{"chat", "-o", terptest.TempDir(t), "--idle-pause", "200ms"})
	if !strings.Contains(errOut.String(), "briefly away") || !strings.Contains(out.String(), "four") {
		t.Errorf("stdout %q, stderr:\n%s", out.String(), errOut.String())
	}
}
