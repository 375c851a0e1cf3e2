package cli

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/terpdev/terp/internal/terptest"

	"github.com/charmbracelet/lipgloss"

	"github.com/terpdev/terp/internal/agent"
)

// golden compares got with testdata/name, or rewrites it with -update.
func golden(t *testing.T, name, got string) {
	t.Helper()
	terptest.Golden(t, filepath.Join("testdata", name), []byte(got), nil)
}

func TestProgressShowsEachStep(t *testing.T) {
	var buf bytes.Buffer
	p := &progress{w: &buf, styles: newStyles(lipgloss.NewRenderer(&buf))}
	code := "print('\x1b]52;c;cHduZWQ=\x07done')\n" + strings.Repeat("x = 1\n", 20)
	events := []agent.Event{
		agent.StepStarted{Step: 1, MaxSteps: 8},
		agent.ReasoningDelta{Text: "First I load the file.\n"},
		agent.ReasoningDelta{Text: strings.Repeat("Then I think at length. ", 20)},
		agent.ToolCall{Step: 1, ID: "call_1", Name: "run_python", Code: code},
		agent.ToolOutput{Step: 1, ID: "call_1", ExitCode: 0, Stdout: "rows:\n" + strings.Repeat("row\n", 10) + "[... 5000 bytes omitted ...]\n" + strings.Repeat("row\n", 10) + "\x1b[2Jtotal 42\n", Duration: 1234 * time.Millisecond, Files: []string{"chart.png"}},
		agent.FileSaved{Path: "chart.png", Bytes: 26419},
		agent.StepStarted{Step: 2, MaxSteps: 8},
		agent.ToolCall{Step: 2, ID: "call_2", Name: "run_python", Code: "1/0"},
		agent.ToolOutput{Step: 2, ID: "call_2", ExitCode: 1, Stderr: "Traceback (most recent call last):\n  File \"main.py\", line 1\nZeroDivisionError: division by zero\n", Duration: 50 * time.Millisecond,
			Notice: "The Python process crashed (killed by signal 9). Variables were lost; files in /work were kept."},
		agent.StepStarted{Step: 3, MaxSteps: 8},
		agent.ToolCall{Step: 3, ID: "call_3", Name: "shell"},
		agent.ToolOutput{Step: 3, ID: "call_3", Error: `unknown tool "shell"`},
		agent.TextDelta{Text: "The answer"},
		agent.Answer{Text: "The answer"},
		agent.Failed{Err: errors.New("the server went away")},
	}
	for _, e := range events {
		p.handle(e)
	}
	out := buf.String()
	if strings.ContainsRune(out, 0x1b) || strings.ContainsRune(out, 0x07) {
		t.Errorf("an escape sequence from the code reached the terminal:\n%q", out)
	}
	// Long output shows its end, where the result is, and says what it left out.
	if !strings.Contains(out, "  │ … 17 earlier lines, 5000 bytes cut by terp\n  │ row\n") || !strings.Contains(out, "total 42") {
		t.Errorf("long output is not folded to its last lines with the count:\n%s", out)
	}
	// The error that ends a turn is printed once, where the command ends.
	if strings.Contains(out, "the server went away") {
		t.Errorf("progress printed the error the command prints as it ends:\n%s", out)
	}
	golden(t, "progress.golden", out)
}

// screen is the little of a terminal that live progress uses: text, "\n",
// "\r", cursor up (CSI n A), erase to the end of the line (CSI K) and of the
// screen (CSI J). What it holds is what a person would see.
type screen struct {
	mu       sync.Mutex
	lines    [][]rune
	row, col int
}

func (s *screen) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := []rune(string(p))
	for i := 0; i < len(r); i++ {
		for len(s.lines) <= s.row {
			s.lines = append(s.lines, nil)
		}
		switch c := r[i]; c {
		case '\n':
			s.row, s.col = s.row+1, 0
		case '\r':
			s.col = 0
		case 0x1b:
			j := i + 2 // past ESC [
			for j < len(r) && r[j] >= '0' && r[j] <= '9' {
				j++
			}
			n, _ := strconv.Atoi(string(r[i+2 : j]))
			switch r[j] {
			case 'A':
				s.row = max(s.row-max(n, 1), 0)
			case 'K':
				s.lines[s.row] = s.lines[s.row][:min(s.col, len(s.lines[s.row]))]
			case 'J':
				s.lines[s.row] = s.lines[s.row][:min(s.col, len(s.lines[s.row]))]
				s.lines = s.lines[:s.row+1]
			case 'm':
			default:
				panic(fmt.Sprintf("unexpected escape sequence %q", string(r[i:j+1])))
			}
			i = j
		default:
			line := s.lines[s.row]
			for len(line) < s.col {
				line = append(line, ' ')
			}
			if s.col < len(line) {
				line[s.col] = c
			} else {
				line = append(line, c)
			}
			s.lines[s.row], s.col = line, s.col+1
		}
	}
	return len(p), nil
}

func (s *screen) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	for len(s.lines) <= s.row {
		s.lines = append(s.lines, nil)
	}
	var b strings.Builder
	for i, l := range s.lines {
		if i > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(string(l))
	}
	return b.String()
}

// TestLiveProgress follows a turn on a terminal: a spinner with the time
// while the model thinks and while code runs, the last lines of the running
// output above it, and, once the run ends or is cancelled, the usual excerpt
// in their place, with nothing of the live area left behind.
func TestLiveProgress(t *testing.T) {
	var term screen
	now := time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)
	p := &progress{w: &term, styles: newStyles(lipgloss.NewRenderer(io.Discard)), live: true,
		width: func() int { return 60 }, now: func() time.Time { return now }}
	at := func(d time.Duration) {
		now = now.Add(d)
		p.redraw()
	}
	last := func() string { return term.String()[strings.LastIndexByte(term.String(), '\n')+1:] }

	p.handle(agent.StepStarted{Step: 1, MaxSteps: 8})
	at(3200 * time.Millisecond)
	if !strings.HasSuffix(last(), " thinking 3.2s") {
		t.Errorf("while the model thinks the last line is %q, want a spinner with the time:\n%s", last(), term.String())
	}
	p.handle(agent.ReasoningDelta{Text: "I will train for ten epochs and watch the loss closely."})
	at(100 * time.Millisecond)
	if !strings.Contains(last(), "thinking 3.3s · …") || !strings.HasSuffix(last(), "watch the loss closely.") {
		t.Errorf("the spinner line %q does not end with the latest reasoning, cut to the width", last())
	}

	p.handle(agent.ToolCall{Step: 1, ID: "c1", Name: "run_python", Code: "train()"})
	for i := 1; i <= 6; i++ {
		p.handle(agent.OutputDelta{Step: 1, ID: "c1", Stream: "stdout", Text: fmt.Sprintf("epoch %d\n", i)})
	}
	p.handle(agent.OutputDelta{Step: 1, ID: "c1", Stream: "stderr", Text: "\r 10%"})
	p.handle(agent.OutputDelta{Step: 1, ID: "c1", Stream: "stderr", Text: "\r 70%"})
	at(1400 * time.Millisecond)
	want := "── step 1/8\n" +
		"thinking: I will train for ten epochs and watch the loss closely.\n" +
		"  train()\n" +
		"  │ epoch 4\n  │ epoch 5\n  │ epoch 6\n  │  70%\n"
	if got := term.String(); !strings.HasPrefix(got, want) || !strings.HasSuffix(got, " running 1.4s") || strings.Count(got, "\n") != strings.Count(want, "\n") {
		t.Errorf("while the code runs the screen is\n%s\nwant\n%s<spinner> running 1.4s", got, want)
	}

	p.handle(agent.ToolOutput{Step: 1, ID: "c1", Stdout: "epoch 1\nepoch 2\nepoch 3\nepoch 4\nepoch 5\nepoch 6\n", Duration: 1500 * time.Millisecond})
	// The live lines give way to the excerpt.
	done := "── step 1/8\n" +
		"thinking: I will train for ten epochs and watch the loss closely.\n" +
		"  train()\n" +
		"  exit 0 · 1.5s\n" +
		"  │ epoch 1\n  │ epoch 2\n  │ epoch 3\n  │ epoch 4\n  │ epoch 5\n  │ epoch 6\n"
	if got := term.String(); got != done {
		t.Errorf("after the run the screen is\n%s\nwant\n%s", got, done)
	}

	p.handle(agent.StepStarted{Step: 2, MaxSteps: 8})
	p.handle(agent.ToolCall{Step: 2, ID: "c2", Name: "run_python", Code: "train_more()"})
	p.handle(agent.OutputDelta{Step: 2, ID: "c2", Stream: "stdout", Text: "epoch 7\n"})
	at(4 * time.Second)
	if !strings.Contains(term.String(), "  │ epoch 7\n") || !strings.HasSuffix(last(), " running 4.0s") {
		t.Errorf("the second run is not shown live:\n%s", term.String())
	}
	// Ctrl+C: the run's end comes with what it printed so far.
	p.handle(agent.ToolOutput{Step: 2, ID: "c2", ExitCode: 1, Stdout: "epoch 7\n", Stderr: "KeyboardInterrupt\n",
		Stopped: "cancelled by the user after 4.0 s", Duration: 4 * time.Second})
	p.close()
	done += "── step 2/8\n" +
		"  train_more()\n" +
		"  cancelled by the user after 4.0 s\n" +
		"  │ epoch 7\n" +
		"  │ KeyboardInterrupt\n"
	if got := term.String(); got != done {
		t.Errorf("after the cancel the screen is\n%s\nwant\n%s", got, done)
	}
}

// TestLiveProgressLeavesNothingBehind lets the spinner tick on its own, then
// ends the turn: only the plain progress may stay on the screen.
func TestLiveProgressLeavesNothingBehind(t *testing.T) {
	var term screen
	p := &progress{w: &term, styles: newStyles(lipgloss.NewRenderer(io.Discard)), live: true, every: time.Millisecond,
		width: func() int { return 60 }}
	p.handle(agent.StepStarted{Step: 1, MaxSteps: 8})
	p.handle(agent.ReasoningDelta{Text: "Hmm."})
	for deadline := time.Now().Add(10 * time.Second); !strings.Contains(term.String(), "thinking"); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the spinner never showed:\n%s", term.String())
		}
	}
	// Ctrl+C while the model thinks: the turn ends with no more events.
	p.close()
	if got, want := term.String(), "── step 1/8\nthinking: Hmm.\n"; got != want {
		t.Errorf("after the turn the screen is\n%q\nwant\n%q", got, want)
	}
}
