package tui

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/x/ansi"
	"github.com/muesli/termenv"

	"github.com/terpdev/terp/internal/agent"
	"github.com/terpdev/terp/internal/sandbox"
)

var ctrlC = tea.KeyMsg{Type: tea.KeyCtrlC}

// TestCtrlCCancelsTheTurnAndTheChatGoesOn runs a turn that waits until it
// is cancelled, as code sleeping in the sandbox does, presses ctrl+c and
// asks again.
func TestCtrlCCancelsTheTurnAndTheChatGoesOn(t *testing.T) {
	cancelled := make(chan struct{})
	sleeping := func(ctx context.Context, send func(agent.Event)) (Turn, error) {
		send(agent.StepStarted{Step: 1, MaxSteps: 8})
		send(agent.ToolCall{Step: 1, Code: "import time\nprint('napping')\ntime.sleep(300)"})
		send(agent.OutputDelta{Step: 1, Stream: "stdout", Text: "napping\n"})
		<-ctx.Done()
		close(cancelled)
		return Turn{Result: agent.Result{StopReason: agent.Cancelled, Steps: 1}}, ctx.Err()
	}
	conv := newScripted(sleeping, play(Turn{Result: agent.Result{Answer: "still here", StopReason: agent.Answered}}, nil,
		agent.StepStarted{Step: 1, MaxSteps: 8}, agent.Answer{Text: "still here"}))
	l := startLive(t, newTestModel(conv, 80, 24, termenv.ANSI256, HalfBlock))

	l.send(askKeys("sleep for five minutes")...)
	l.waitFor(t, "the code to run", func(s string, _ bool) bool {
		return strings.Contains(s, "Running") && strings.Contains(s, "\n    napping")
	})
	l.send(ctrlC)
	<-cancelled
	screen := l.waitFor(t, "the turn to end", func(_ string, busy bool) bool { return !busy })
	// What the code printed stays, even though no result came.
	for _, want := range []string{"time.sleep(300)", "\n    napping", "■ stopped", "Cancelled"} {
		if !strings.Contains(screen, want) {
			t.Errorf("after ctrl+c the screen does not show %q:\n%s", want, screen)
		}
	}

	// The ctrl+c that cancelled does not count towards quitting: the next
	// one only warns.
	l.send(ctrlC)
	l.waitFor(t, "the quit hint after the cancel", func(s string, _ bool) bool { return strings.Contains(s, "Press ctrl+c again to quit") })
	l.send(tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune("x")}, tea.KeyMsg{Type: tea.KeyBackspace})

	l.send(askKeys("are you there?")...)
	l.waitFor(t, "the second answer", func(s string, busy bool) bool { return !busy && strings.Contains(s, "still here") })
	if got := conv.asked; len(got) != 2 || got[1] != "are you there?" {
		t.Errorf("questions asked = %q", got)
	}
	// A ctrl+c after the answer arms the quit; a second one quits.
	l.send(ctrlC)
	l.waitFor(t, "the quit hint", func(s string, _ bool) bool { return strings.Contains(s, "ctrl+c again") })
	l.send(ctrlC)
	l.quit(t)
}

func TestQuitKeys(t *testing.T) {
	tests := []struct {
		name string
		keys []tea.Msg
		quit bool
	}{
		{"ctrl+d on an empty input", []tea.Msg{tea.KeyMsg{Type: tea.KeyCtrlD}}, true},
		{"ctrl+d with text deletes", append(typeText("abc"), tea.KeyMsg{Type: tea.KeyCtrlD}), false},
		{"one ctrl+c", []tea.Msg{ctrlC}, false},
		{"two ctrl+c", []tea.Msg{ctrlC, ctrlC}, true},
		{"ctrl+c, a key, ctrl+c", []tea.Msg{ctrlC, tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune("x")}, ctrlC}, false},
		{"/quit", askKeys("/quit"), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := newTestModel(newScripted(), 80, 24, termenv.ANSI256, HalfBlock)
			quit := false
			for _, k := range tt.keys {
				next, cmd := m.Update(k)
				m = next.(Model)
				if cmd != nil {
					if _, ok := cmd().(tea.QuitMsg); ok {
						quit = true
					}
				}
			}
			if quit != tt.quit {
				t.Errorf("quit = %v, want %v; status: %q", quit, tt.quit, ansi.Strip(m.View()))
			}
		})
	}
}

// statusLine is the message line of a screen.
func statusLine(m Model) string {
	lines := strings.Split(ansi.Strip(m.View()), "\n")
	return lines[len(lines)-2-m.input.height()]
}

func TestSlashCommands(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	if err := os.WriteFile("sales.csv", []byte("month,revenue\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	writeChart(t, "chart.png")
	tests := []struct {
		line       string
		status     string // on the message line
		transcript string // in the transcript, when set
		check      func(t *testing.T, conv *scripted)
	}{
		{line: "/frobnicate", status: "Unknown command /frobnicate"},
		{line: "/upload", status: "/upload needs path"},
		{line: "/upload /nonexistent/data.csv", status: "cannot upload /nonexistent/data.csv"},
		{line: "/upload sales.csv", status: "Uploaded /work/sales.csv", transcript: "Uploaded sales.csv to /work/sales.csv",
			check: func(t *testing.T, conv *scripted) {
				if len(conv.uploaded) != 1 || conv.uploaded[0] != "sales.csv" {
					t.Errorf("uploaded = %q", conv.uploaded)
				}
			}},
		{line: "/files", transcript: "chart.png"},
		{line: "/download nothing.png", status: "no such file"},
		{line: "/download /work/chart.png", status: "Downloaded", transcript: "▣ /work/chart.png"},
		{line: "/steps many", status: "/steps needs a whole number"},
		{line: "/steps 3", status: "At most 3 steps", check: func(t *testing.T, conv *scripted) {
			if conv.info.MaxSteps != 3 {
				t.Errorf("max steps = %d, want 3", conv.info.MaxSteps)
			}
		}},
		{line: "/model llama-3.3-70b", status: "llama-3.3-70b", check: func(t *testing.T, conv *scripted) {
			if conv.info.Model != "llama-3.3-70b" {
				t.Errorf("model = %q", conv.info.Model)
			}
		}},
		{line: "/help", transcript: "/upload PATH"},
		{line: "/new", status: "cannot start a new conversation"},
	}
	for _, tt := range tests {
		t.Run(tt.line, func(t *testing.T) {
			conv := newScripted()
			conv.dir = dir
			conv.files = []sandbox.FileInfo{{Path: "chart.png", Size: 2345}}
			m := newTestModel(conv, 80, 24, termenv.ANSI256, HalfBlock)
			m = drive(t, m, askKeys(tt.line)...)
			if !strings.Contains(statusLine(m), tt.status) {
				t.Errorf("status line = %q, want it to say %q", statusLine(m), tt.status)
			}
			if tt.transcript != "" && !strings.Contains(ansi.Strip(m.transcript.view()), tt.transcript) {
				t.Errorf("transcript does not show %q:\n%s", tt.transcript, ansi.Strip(m.transcript.view()))
			}
			if tt.check != nil {
				tt.check(t, conv)
			}
			// A command clears the input, whether it ran or failed.
			if v := m.input.value(); v != "" {
				t.Errorf("the input still holds %q", v)
			}
			if m.job != nil {
				t.Error("the chat is still busy")
			}
		})
	}
}

func TestNewConversation(t *testing.T) {
	first, second := newScripted(), newScripted()
	second.info.ID = "fedcba987654"
	m := newTestModel(first, 80, 24, termenv.ANSI256, HalfBlock)
	m.open = func(context.Context) (Conversation, error) { return second, nil }
	m = drive(t, m, askKeys("/model other")...)
	m = drive(t, m, askKeys("/new")...)
	if m.conv != second {
		t.Fatal("/new did not switch to the new conversation")
	}
	if second.info.Model != "other" {
		t.Errorf("the new conversation's model is %q; the /model choice should hold", second.info.Model)
	}
	if bar := ansi.Strip(m.status.bar(m.theme, 80)); !strings.Contains(bar, "fedcba987654") {
		t.Errorf("status bar = %q, want the new conversation's id", bar)
	}
}

func TestResumeConversation(t *testing.T) {
	first, stored := newScripted(), newScripted()
	first.info.ID = "aaaaaaaaaaaa"
	stored.info = Info{ID: "b1c2d3e4f5a6", Model: "stored-model", Sandbox: "local", MaxSteps: 5, Earlier: 3}
	m := newTestModel(first, 80, 24, termenv.ANSI256, HalfBlock)
	var asked string
	m.resume = func(_ context.Context, ref string) (Conversation, error) { asked = ref; return stored, nil }
	m.list = func(context.Context, int) (string, error) { return "ID  TITLE\nb1c2d3e4f5a6  revenue by month", nil }

	m = drive(t, m, askKeys("/resume")...)
	if view := ansi.Strip(m.View()); !strings.Contains(view, "b1c2d3e4f5a6  revenue by month") || !strings.Contains(view, "/resume ID") {
		t.Errorf("/resume alone did not list the conversations:\n%s", view)
	}
	m = drive(t, m, askKeys("/resume aaaa")...)
	if m.conv != first || !strings.Contains(statusLine(m), "already") {
		t.Errorf("/resume of the current conversation: status %q", statusLine(m))
	}
	m = drive(t, m, askKeys("/resume b1c2")...)
	if m.conv != stored || asked != "b1c2" {
		t.Fatalf("/resume b1c2 did not switch (asked %q)", asked)
	}
	bar := ansi.Strip(m.status.bar(m.theme, 80))
	if !strings.Contains(bar, "b1c2d3e4f5a6") || !strings.Contains(bar, "stored-model") {
		t.Errorf("status bar = %q, want the resumed conversation with its own model", bar)
	}
	if view := ansi.Strip(m.View()); !strings.Contains(view, "Resumed conversation b1c2d3e4f5a6 after 3 questions") {
		t.Errorf("no note about the resumed conversation:\n%s", view)
	}
}

// The list /resume shows is asked for at the width the transcript shows
// it in, so a table that uses all of it is not broken by wrapping.
func TestResumeListFitsTheScreen(t *testing.T) {
	for _, width := range []int{80, 60} {
		m := newTestModel(newScripted(), width, 24, termenv.ANSI256, HalfBlock)
		m.resume = func(context.Context, string) (Conversation, error) { return nil, nil }
		m.list = func(_ context.Context, w int) (string, error) {
			return "b1c2d3e4f5a6  " + strings.Repeat("x", w-len("b1c2d3e4f5a6  ")-1) + "…", nil
		}
		m = drive(t, m, askKeys("/resume")...)
		var row string
		for _, l := range strings.Split(ansi.Strip(m.View()), "\n") {
			if strings.Contains(l, "b1c2d3e4f5a6") {
				row = l
			}
		}
		if !strings.HasSuffix(strings.TrimRight(row, " "), "x…") || ansi.StringWidth(strings.TrimRight(row, " ")) > width {
			t.Errorf("at %d columns the listed row is %q; want it whole, on one line", width, row)
		}
	}
}

func TestTabCompletes(t *testing.T) {
	dir := t.TempDir()
	for _, name := range []string{"sales.csv", "sales-2024.csv", "notes.txt", ".hidden"} {
		if err := os.WriteFile(filepath.Join(dir, name), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Mkdir(filepath.Join(dir, "data"), 0o755); err != nil {
		t.Fatal(err)
	}
	tab := tea.KeyMsg{Type: tea.KeyTab}
	tests := []struct {
		typed, want string
	}{
		{"/up", "/upload "},
		{"/upload " + dir + "/sa", "/upload " + dir + "/sales"},
		{"/upload " + dir + "/sales-", "/upload " + dir + "/sales-2024.csv"},
		{"/upload " + dir + "/d", "/upload " + dir + "/data/"},
		{"/upload " + dir + "/x", "/upload " + dir + "/x"},
		{"what is /up", "what is /up"},
	}
	for _, tt := range tests {
		t.Run(tt.typed, func(t *testing.T) {
			m := newTestModel(newScripted(), 80, 24, termenv.ANSI256, HalfBlock)
			m = drive(t, m, append(typeText(tt.typed), tab)...)
			if got := m.input.value(); got != tt.want {
				t.Errorf("after Tab the input is %q, want %q", got, tt.want)
			}
		})
	}
}

// TestEveryScreenFits draws a finished turn at several sizes, and after a
// resize: every line fits the width and the screen is exactly as tall as
// the terminal.
func TestEveryScreenFits(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	writeChart(t, "chart.png")
	m := newTestModel(newScripted(finishedTurn(), chartTurn("chart.png")), 80, 24, termenv.TrueColor, HalfBlock)
	m = drive(t, m, askKeys("Which month grew the most?")...)
	m = drive(t, m, askKeys(strings.Repeat("a long question ", 30))...)
	for _, size := range [][2]int{{80, 24}, {120, 40}, {60, 20}, {40, 12}, {80, 24}} {
		m = drive(t, m, tea.WindowSizeMsg{Width: size[0], Height: size[1]})
		for _, scroll := range []tea.Msg{nil, tea.KeyMsg{Type: tea.KeyPgUp}, tea.KeyMsg{Type: tea.KeyPgUp}} {
			if scroll != nil {
				m = drive(t, m, scroll)
			}
			lines := strings.Split(m.View(), "\n")
			if len(lines) != size[1] {
				t.Errorf("%dx%d: the screen has %d lines", size[0], size[1], len(lines))
			}
			for i, l := range lines {
				if w := ansi.StringWidth(l); w > size[0] {
					t.Errorf("%dx%d: line %d is %d cells wide: %q", size[0], size[1], i, w, ansi.Strip(l))
				}
			}
		}
	}
}

func TestNoColor(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	writeChart(t, "chart.png")
	m := newTestModel(newScripted(chartTurn("chart.png")), 80, 40, termenv.Ascii, HalfBlock)
	m = drive(t, m, askKeys("Plot revenue")...)
	screen := m.View()
	for _, colour := range []string{"[38;", "[48;", "[3" + "1m", "[9"} {
		if strings.Contains(screen, "\x1b"+colour) {
			t.Errorf("with NO_COLOR the screen has colour %q", colour)
		}
	}
	// The chart still shows, in shades.
	if !strings.Contains(screen, "█") {
		t.Errorf("with NO_COLOR the chart is not drawn in shades:\n%s", screen)
	}
}

// A resumed conversation's model and step cap are its own: a /new after a
// /resume starts with the chat's, and the user's /model still holds.
func TestNewAfterResumeKeepsTheChatsSettings(t *testing.T) {
	first, stored, fresh := newScripted(), newScripted(), newScripted()
	first.info = Info{ID: "aaaaaaaaaaaa", Model: "chat-model", Sandbox: "local", MaxSteps: 8}
	stored.info = Info{ID: "b1c2d3e4f5a6", Model: "stored-model", Sandbox: "local", MaxSteps: 5, Earlier: 3}
	fresh.info = Info{ID: "cccccccccccc", Model: "chat-model", Sandbox: "local", MaxSteps: 8}
	m := newTestModel(first, 80, 24, termenv.ANSI256, HalfBlock)
	m.resume = func(context.Context, string) (Conversation, error) { return stored, nil }
	m.open = func(context.Context) (Conversation, error) { return fresh, nil }
	m = drive(t, m, askKeys("/resume b1c2")...)
	m = drive(t, m, askKeys("/new")...)
	if m.conv != fresh {
		t.Fatal("/new did not switch")
	}
	if got := fresh.info; got.Model != "chat-model" || got.MaxSteps != 8 {
		t.Errorf("after /resume, /new started with model %q and %d steps; want the chat's chat-model and 8", got.Model, got.MaxSteps)
	}
	bar := ansi.Strip(m.status.bar(m.theme, 80))
	if strings.Contains(bar, "stored-model") {
		t.Errorf("status bar = %q, shows the resumed conversation's model", bar)
	}
}
