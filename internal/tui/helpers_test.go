package tui

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/terpdev/terp/internal/terptest"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/lipgloss"
	"github.com/charmbracelet/x/ansi"
	"github.com/muesli/termenv"

	"github.com/terpdev/terp/internal/agent"
	"github.com/terpdev/terp/internal/sandbox"
)

// testdata is resolved before any test changes directory.
var testdata, _ = filepath.Abs("testdata")

// golden compares a screen with testdata/name, or rewrites it with
// -update. The files keep the escape sequences, so `cat` shows the screen as
// a terminal would; a mismatch is reported as plain text.
func golden(t *testing.T, name, got string) {
	t.Helper()
	terptest.Golden(t, filepath.Join(testdata, name), []byte(got), ansi.Strip)
}

// turnFunc plays one turn of a scripted conversation.
type turnFunc func(ctx context.Context, send func(agent.Event)) (Turn, error)

// scripted is a Conversation whose turns are played from a script.
type scripted struct {
	mu       sync.Mutex
	info     Info
	turns    []turnFunc
	asked    []string
	uploaded []string
	files    []sandbox.FileInfo
	dir      string // where Download writes
}

func newScripted(turns ...turnFunc) *scripted {
	return &scripted{info: Info{ID: "0123456789ab", Model: "qwen3-32b", Sandbox: "local", MaxSteps: 8}, turns: turns}
}

func (s *scripted) Info() Info { return s.info }

func (s *scripted) Ask(ctx context.Context, q string, send func(agent.Event)) (Turn, error) {
	s.mu.Lock()
	i := len(s.asked)
	s.asked = append(s.asked, q)
	s.mu.Unlock()
	if i >= len(s.turns) {
		return Turn{}, fmt.Errorf("question %d is beyond the script", i+1)
	}
	return s.turns[i](ctx, send)
}

func (s *scripted) Upload(_ context.Context, p string) (string, error) {
	if _, err := os.Stat(p); err != nil {
		return "", fmt.Errorf("cannot upload %s: %w", p, errors.Unwrap(err))
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.uploaded = append(s.uploaded, p)
	return "/work/" + filepath.Base(p), nil
}

func (s *scripted) Download(_ context.Context, name string) (File, error) {
	for _, f := range s.files {
		if f.Path == name {
			p := filepath.Join(s.dir, name)
			return File{Name: name, Path: p, Bytes: f.Size}, nil
		}
	}
	return File{}, fmt.Errorf("download %s: no such file in /work", name)
}

func (s *scripted) Files(context.Context) ([]sandbox.FileInfo, error) { return s.files, nil }
func (s *scripted) SetModel(_ context.Context, name string) error {
	s.info.Model = name
	return nil
}
func (s *scripted) SetMaxSteps(_ context.Context, n int) error {
	s.info.MaxSteps = n
	return nil
}

// play is a turn that sends events and ends with turn.
func play(turn Turn, err error, events ...agent.Event) turnFunc {
	return func(_ context.Context, send func(agent.Event)) (Turn, error) {
		for _, e := range events {
			send(e)
		}
		return turn, err
	}
}

// stepClock is a clock that moves 100ms each time it is read, so that
// timings on screen are the same on every run.
func stepClock() func() time.Time {
	t := time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)
	var mu sync.Mutex
	return func() time.Time {
		mu.Lock()
		defer mu.Unlock()
		t = t.Add(100 * time.Millisecond)
		return t
	}
}

// newTestModel returns a chat on conv at width×height, with 256 colours
// on a dark background and a clock that steps.
func newTestModel(conv Conversation, width, height int, profile termenv.Profile, protocol Protocol) Model {
	r := lipgloss.NewRenderer(io.Discard)
	r.SetColorProfile(profile)
	r.SetHasDarkBackground(true)
	m := New(Options{Conversation: conv, Renderer: r, Protocol: protocol, Now: stepClock()})
	// Spinner frames come at once: a test waits for nothing.
	m.tick = func() tea.Cmd { return func() tea.Msg { return tickMsg{} } }
	next, _ := m.Update(tea.WindowSizeMsg{Width: width, Height: height})
	return next.(Model)
}

// drive delivers msgs to m and then runs the commands they start, one at a
// time in the order they were started, feeding their messages back, until
// none is left. A turn's command runs the whole scripted turn before its
// events are read, so the screens come out the same every time. It must
// not be used with a turn that waits to be cancelled.
func drive(t *testing.T, m Model, msgs ...tea.Msg) Model {
	t.Helper()
	var queue []tea.Cmd
	deliver := func(msg tea.Msg) {
		switch msg := msg.(type) {
		case nil, tea.QuitMsg:
		case tea.BatchMsg:
			queue = append(queue, msg...)
		default:
			next, cmd := m.Update(msg)
			m = next.(Model)
			queue = append(queue, cmd)
		}
	}
	for _, msg := range msgs {
		deliver(msg)
	}
	for n := 0; len(queue) > 0; n++ {
		if n > 100000 {
			t.Fatal("the chat never settled")
		}
		cmd := queue[0]
		queue = queue[1:]
		if cmd != nil {
			deliver(cmd())
		}
	}
	return m
}

// driveRunning is drive for a screen in the middle of a turn: it delivers
// every event of the scripted turn but not its end, and no spinner ticks,
// which would go on for as long as the turn runs.
func driveRunning(t *testing.T, m Model, msgs ...tea.Msg) Model {
	t.Helper()
	var queue []tea.Cmd
	deliver := func(msg tea.Msg) {
		switch msg := msg.(type) {
		case nil, tea.QuitMsg, tickMsg, turnDoneMsg:
		case tea.BatchMsg:
			queue = append(queue, msg...)
		default:
			next, cmd := m.Update(msg)
			m = next.(Model)
			queue = append(queue, cmd)
		}
	}
	for _, msg := range msgs {
		deliver(msg)
	}
	for len(queue) > 0 {
		cmd := queue[0]
		queue = queue[1:]
		if cmd != nil {
			deliver(cmd())
		}
	}
	if m.job == nil {
		t.Fatal("the turn is over")
	}
	return m
}

// typeText returns the key presses that type s.
func typeText(s string) []tea.Msg {
	var msgs []tea.Msg
	for _, r := range s {
		msgs = append(msgs, tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune{r}})
	}
	return msgs
}

// askKeys types a question and presses Enter.
func askKeys(q string) []tea.Msg { return append(typeText(q), tea.KeyMsg{Type: tea.KeyEnter}) }

// terpSequences matches the escape sequences terp itself draws: colours and
// styles (SGR) and hyperlinks (OSC 8). Anything else in a screen came from
// somewhere it should not have.
var terpSequences = regexp.MustCompile("\x1b\\[[0-9;:]*m|\x1b\\]8;[^\x07\x1b]*(\x07|\x1b\\\\)")

// foreignEscapes returns the escape sequences left in a screen once terp's
// own are removed.
func foreignEscapes(screen string) []string {
	rest := terpSequences.ReplaceAllString(screen, "")
	var found []string
	for i := strings.IndexByte(rest, 0x1b); i >= 0; i = strings.IndexByte(rest, 0x1b) {
		end := min(i+12, len(rest))
		found = append(found, fmt.Sprintf("%q", rest[i:end]))
		rest = rest[i+1:]
	}
	return found
}

// live runs the chat as a real Bubble Tea program, without a terminal, so
// that turns run concurrently with the UI as they do for a user. After
// every update it records the screen, for tests to wait on.
type live struct {
	p    *tea.Program
	mu   sync.Mutex
	view string
	busy bool
	done chan tea.Model
}

// observed wraps the chat to record what it shows.
type observed struct {
	Model
	l *live
}

func (o observed) Update(msg tea.Msg) (tea.Model, tea.Cmd) {
	next, cmd := o.Model.Update(msg)
	o.Model = next.(Model)
	o.l.mu.Lock()
	o.l.view, o.l.busy = o.View(), o.job != nil
	o.l.mu.Unlock()
	return o, cmd
}

func startLive(t *testing.T, m Model) *live {
	t.Helper()
	l := &live{done: make(chan tea.Model, 1)}
	l.p = tea.NewProgram(observed{Model: m, l: l},
		tea.WithInput(nil), tea.WithOutput(io.Discard), tea.WithoutRenderer(), tea.WithoutSignalHandler())
	go func() {
		final, _ := l.p.Run()
		l.done <- final
	}()
	t.Cleanup(func() { l.p.Kill() })
	return l
}

func (l *live) send(msgs ...tea.Msg) {
	for _, msg := range msgs {
		l.p.Send(msg)
	}
}

// waitFor waits until cond holds for the screen and whether a job runs.
func (l *live) waitFor(t *testing.T, what string, cond func(screen string, busy bool) bool) string {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		l.mu.Lock()
		view, busy := l.view, l.busy
		l.mu.Unlock()
		if cond(ansi.Strip(view), busy) {
			return ansi.Strip(view)
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s; the screen:\n%s", what, ansi.Strip(view))
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// quit waits for the program to end, after a key that quits.
func (l *live) quit(t *testing.T) Model {
	t.Helper()
	select {
	case final := <-l.done:
		return final.(observed).Model
	case <-time.After(10 * time.Second):
		t.Fatal("the chat did not quit")
		return Model{}
	}
}
