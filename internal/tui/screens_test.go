package tui

import (
	"context"
	"errors"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/x/ansi"
	"github.com/muesli/termenv"

	"github.com/terpdev/terp/internal/agent"
	"github.com/terpdev/terp/internal/llm"
)

const salesCode = `import pandas as pd
df = pd.read_csv("/work/sales.csv")
growth = df["revenue"].diff()
print(df.loc[growth.idxmax(), "month"], int(growth.max()))`

// finishedTurn is a two-step turn: code that runs and prints, then an
// answer in Markdown.
func finishedTurn() turnFunc {
	return play(Turn{Result: agent.Result{Answer: "December grew the most.", StopReason: agent.Answered, Steps: 2}}, nil,
		agent.StepStarted{Step: 1, MaxSteps: 8},
		agent.ReasoningDelta{Text: "I should load the CSV and look at the month-over-month growth."},
		agent.TextDelta{Text: "Let me compute the growth per month."},
		agent.ToolCall{Step: 1, ID: "call_1", Name: "run_python", Code: salesCode},
		agent.ToolOutput{Step: 1, ID: "call_1", Stdout: "2025-12 26450\n", Duration: 1230 * time.Millisecond},
		agent.UsageUpdated{Usage: llm.Usage{PromptTokens: 900, CompletionTokens: 60, TotalTokens: 960}},
		agent.StepStarted{Step: 2, MaxSteps: 8},
		agent.TextDelta{Text: "**December** grew the most"},
		agent.Answer{Text: "**December** grew the most: revenue rose by `26,450` over November.\n\n- it is the holiday season\n- the chart is in `chart.png`"},
		agent.UsageUpdated{Usage: llm.Usage{PromptTokens: 2000, CompletionTokens: 120, TotalTokens: 2120}},
	)
}

func TestScreenFinishedStep(t *testing.T) {
	conv := newScripted(finishedTurn())
	m := newTestModel(conv, 80, 24, termenv.ANSI256, HalfBlock)
	m = drive(t, m, askKeys("Which month grew the most?")...)
	golden(t, "step.golden", m.View())
}

func TestScreenError(t *testing.T) {
	down := errors.New("cannot reach the model server at http://localhost:8000/v1: connection refused; is it running?")
	conv := newScripted(play(Turn{Result: agent.Result{StopReason: agent.Errored, Steps: 1}}, down,
		agent.StepStarted{Step: 1, MaxSteps: 8},
		agent.Failed{Err: down},
	))
	m := newTestModel(conv, 80, 24, termenv.ANSI256, HalfBlock)
	m = drive(t, m, askKeys("Which month grew the most?")...)
	golden(t, "error.golden", m.View())
	if m.job != nil {
		t.Error("the chat is still busy after the turn failed")
	}
}

// writeChart draws a small line chart, the kind matplotlib saves.
func writeChart(t *testing.T, path string) {
	t.Helper()
	img := image.NewRGBA(image.Rect(0, 0, 800, 200))
	for i := range img.Pix {
		img.Pix[i] = 0xff
	}
	grey := color.RGBA{80, 80, 80, 255}
	for x := 40; x < 780; x++ {
		img.Set(x, 180, grey)
		img.Set(x, 181, grey)
	}
	for y := 10; y < 180; y++ {
		img.Set(40, y, grey)
		img.Set(41, y, grey)
	}
	for x := 40; x < 780; x++ {
		f := float64(x-40) / 740
		ys := 95 - 70*math.Sin(f*4*math.Pi)
		yc := 95 - 70*math.Cos(f*4*math.Pi)
		for d := -2; d <= 2; d++ {
			img.Set(x, int(ys)+d, color.RGBA{31, 119, 180, 255})
			img.Set(x, int(yc)+d, color.RGBA{255, 127, 14, 255})
		}
	}
	fh, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer fh.Close()
	if err := png.Encode(fh, img); err != nil {
		t.Fatal(err)
	}
}

// chartTurn saves chart.png and answers; the downloaded file is at path.
func chartTurn(path string) turnFunc {
	return play(Turn{
		Result: agent.Result{Answer: "Saved the chart.", StopReason: agent.Answered, Steps: 2},
		Files:  []File{{Name: "chart.png", Path: path, Bytes: 2345}},
	}, nil,
		agent.StepStarted{Step: 1, MaxSteps: 8},
		agent.ToolCall{Step: 1, ID: "call_1", Name: "run_python", Code: "df.plot()\nplt.savefig('/work/chart.png')"},
		agent.ToolOutput{Step: 1, ID: "call_1", Duration: 800 * time.Millisecond, Files: []string{"chart.png"}},
		agent.FileSaved{Path: "chart.png", Bytes: 2345},
		agent.StepStarted{Step: 2, MaxSteps: 8},
		agent.Answer{Text: "Saved the chart."},
	)
}

func TestScreenHalfBlockChart(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	if err := os.Mkdir("terp-0123456789ab", 0o755); err != nil {
		t.Fatal(err)
	}
	rel := filepath.Join("terp-0123456789ab", "chart.png")
	writeChart(t, rel)

	m := newTestModel(newScripted(chartTurn(rel)), 80, 24, termenv.TrueColor, HalfBlock)
	m = drive(t, m, askKeys("Plot revenue")...)
	screen := m.View()
	// The link's target is absolute, and the directory is new each run.
	abs, _ := filepath.Abs(rel)
	if !strings.Contains(screen, "file://"+abs) {
		t.Errorf("the screen has no link to %s", abs)
	}
	golden(t, "chart.golden", strings.ReplaceAll(screen, abs, "/tmp/chart.png"))
}

// TestEscapesAreNeutralized feeds escape sequences through every place
// text from the model or the code reaches the screen: none may reach the
// terminal as a sequence.
func TestEscapesAreNeutralized(t *testing.T) {
	const (
		clipboard = "\x1b]52;c;cHduZWQ=\x07"
		title     = "\x1b]0;owned\x1b\\"
		clear     = "\x1b[2J\x1b[H"
		red       = "\x1b[31m"
	)
	evil := clipboard + title + clear + red + "\x9b31m\r\b"
	dir := t.TempDir()
	t.Chdir(dir)
	writeChart(t, "chart.png")
	conv := newScripted(play(Turn{
		Result:   agent.Result{Answer: "answer " + evil, StopReason: agent.Errored, Steps: 2},
		Files:    []File{{Name: "chart.png", Path: "chart.png", Bytes: 1}, {Name: "x" + evil + ".txt", Path: "x" + evil + ".txt"}},
		Warnings: []string{"warning " + evil},
	}, errors.New("failed "+evil),
		agent.StepStarted{Step: 1, MaxSteps: 8},
		agent.ReasoningDelta{Text: "thinking " + evil},
		agent.TextDelta{Text: "text " + evil},
		agent.ToolCall{Step: 1, Code: "print('" + evil + "')"},
		agent.ToolOutput{Step: 1, ExitCode: 1, Stdout: "out " + evil, Stderr: "err " + evil, Notice: "notice " + evil},
		agent.FileSaved{Path: "chart.png", Bytes: 1},
		agent.FileSaved{Path: "x" + evil + ".txt", Bytes: 1},
		agent.StepStarted{Step: 2, MaxSteps: 8},
		agent.ToolCall{Step: 2, Name: "shell"},
		agent.ToolOutput{Step: 2, Error: "tool error " + evil},
		agent.Answer{Text: "answer " + evil},
		agent.Failed{Err: errors.New("failed " + evil)},
	))
	for _, profile := range []termenv.Profile{termenv.TrueColor, termenv.Ascii} {
		m := newTestModel(conv, 100, 200, profile, HalfBlock)
		conv.asked = nil
		m = drive(t, m, askKeys("go")...)
		// Unfold everything, so that every piece of text is drawn.
		m = drive(t, m, tea.KeyMsg{Type: tea.KeyCtrlT}, tea.KeyMsg{Type: tea.KeyCtrlO})
		screen := m.View()
		if bad := foreignEscapes(screen); len(bad) > 0 {
			t.Errorf("profile %v: escape sequences from the model or the code reach the terminal: %v", profile, bad)
		}
		for _, seq := range []string{"\x1b]52", "\x1b]0;", "\x1b[2J", "\x9b"} {
			if strings.Contains(screen, seq) {
				t.Errorf("profile %v: the screen contains %q", profile, seq)
			}
		}
		for _, shown := range []string{"out ^[]52;c;cHduZWQ=", "err ^[]52", "thinking ^[]52", "answer ^[]52", "notice ^[]52", "tool error ^[]52"} {
			if !strings.Contains(stripStyles(screen), shown) {
				t.Errorf("profile %v: the neutralized text %q is not shown:\n%s", profile, shown, stripStyles(screen))
			}
		}
	}
}

func stripStyles(s string) string { return terpSequences.ReplaceAllString(s, "") }

// foldedTurn runs long code whose long output was cut by terp in the
// middle, then answers.
func foldedTurn() turnFunc {
	var code, out strings.Builder
	for i := 1; i <= 30; i++ {
		fmt.Fprintf(&code, "x%d = %d\n", i, i)
	}
	code.WriteString("print('done')")
	for i := 1; i <= 40; i++ {
		fmt.Fprintf(&out, "row %d\n", i)
		if i == 10 {
			out.WriteString("[... 12345 bytes omitted ...]\n")
		}
	}
	out.WriteString("total: 42\n")
	return play(Turn{Result: agent.Result{Answer: "42.", StopReason: agent.Answered, Steps: 2}}, nil,
		agent.StepStarted{Step: 1, MaxSteps: 8},
		agent.ToolCall{Step: 1, ID: "call_1", Name: "run_python", Code: code.String()},
		agent.ToolOutput{Step: 1, ID: "call_1", Stdout: out.String(), Duration: 300 * time.Millisecond},
		agent.StepStarted{Step: 2, MaxSteps: 8},
		agent.Answer{Text: "42."},
	)
}

// TestScreenFoldedOutput folds long code to its first lines and long output
// to its last, where the result is, each with the count of what it hides
// (and, for output, what terp cut from it); ctrl+o shows everything.
func TestScreenFoldedOutput(t *testing.T) {
	m := newTestModel(newScripted(foldedTurn()), 80, 60, termenv.ANSI256, HalfBlock)
	m = drive(t, m, askKeys("Sum it up.")...)
	view := m.View()
	golden(t, "fold.golden", view)
	plain := ansi.Strip(view)
	for _, want := range []string{
		"x20 = 20", "… 11 more lines · ctrl+o shows all",
		"… 22 earlier lines, 12345 bytes cut by terp · ctrl+o shows all", "row 22", "total: 42",
	} {
		if !strings.Contains(plain, want) {
			t.Errorf("folded screen lacks %q:\n%s", want, plain)
		}
	}
	for _, gone := range []string{"x21 = 21", "row 21\n", "bytes omitted"} {
		if strings.Contains(plain, gone) {
			t.Errorf("folded screen shows %q:\n%s", gone, plain)
		}
	}
	m = newTestModel(newScripted(foldedTurn()), 80, 200, termenv.ANSI256, HalfBlock)
	m = drive(t, m, append(askKeys("Sum it up."), tea.KeyMsg{Type: tea.KeyCtrlO})...)
	plain = ansi.Strip(m.View())
	for _, want := range []string{"x30 = 30", "row 1\n", "12345 bytes omitted", "total: 42"} {
		if !strings.Contains(plain, want) {
			t.Errorf("unfolded screen lacks %q:\n%s", want, plain)
		}
	}
}

// runningTurn runs code that prints a few lines, a progress bar and a
// warning, and is still running.
func runningTurn() turnFunc {
	events := []agent.Event{
		agent.StepStarted{Step: 1, MaxSteps: 8},
		agent.ToolCall{Step: 1, ID: "call_1", Name: "run_python", Code: "for epoch in range(10):\n    train(epoch)"},
	}
	for i := 1; i <= 7; i++ {
		events = append(events, agent.OutputDelta{Step: 1, ID: "call_1", Stream: "stdout", Text: fmt.Sprintf("epoch %d loss %.2f\n", i, 1/float64(i))})
	}
	events = append(events,
		agent.OutputDelta{Step: 1, ID: "call_1", Stream: "stderr", Text: "UserWarning: slow\n"},
		agent.OutputDelta{Step: 1, ID: "call_1", Stream: "stderr", Text: "\r 10%|#"},
		agent.OutputDelta{Step: 1, ID: "call_1", Stream: "stderr", Text: "\r 40%|####"},
	)
	return play(Turn{}, nil, events...)
}

// TestScreenRunningStep shows the last lines of the output of code that is
// still running, under its code and above the time it has run.
func TestScreenRunningStep(t *testing.T) {
	m := newTestModel(newScripted(runningTurn()), 80, 24, termenv.ANSI256, HalfBlock)
	m = driveRunning(t, m, askKeys("Train the model")...)
	view := m.View()
	golden(t, "running.golden", view)
	plain := ansi.Strip(view)
	for _, want := range []string{"epoch 4 loss 0.25", "epoch 7 loss 0.14", "UserWarning: slow", " 40%|####", "Running"} {
		if !strings.Contains(plain, want) {
			t.Errorf("the running step lacks %q:\n%s", want, plain)
		}
	}
	for _, gone := range []string{"epoch 3 loss", " 10%"} {
		if strings.Contains(plain, gone) {
			t.Errorf("the running step still shows %q:\n%s", gone, plain)
		}
	}
}

// TestScreenCancelledRun keeps what the code printed before the user
// cancelled it, and says when it stopped.
func TestScreenCancelledRun(t *testing.T) {
	conv := newScripted(play(Turn{Result: agent.Result{StopReason: agent.Cancelled, Steps: 1}}, context.Canceled,
		agent.StepStarted{Step: 1, MaxSteps: 8},
		agent.ToolCall{Step: 1, ID: "call_1", Name: "run_python", Code: "for epoch in range(10):\n    train(epoch)"},
		agent.OutputDelta{Step: 1, ID: "call_1", Stream: "stdout", Text: "epoch 1 loss 1.00\n"},
		agent.ToolOutput{Step: 1, ID: "call_1", ExitCode: 1, Stdout: "epoch 1 loss 1.00\nepoch 2 loss 0.50\n",
			Stderr: "KeyboardInterrupt\n", Stopped: "cancelled by the user after 4.0 s", Duration: 4 * time.Second},
	))
	m := newTestModel(conv, 80, 24, termenv.ANSI256, HalfBlock)
	m = drive(t, m, askKeys("Train the model")...)
	plain := ansi.Strip(m.View())
	for _, want := range []string{"■ cancelled by the user after 4.0 s", "epoch 1 loss 1.00", "epoch 2 loss 0.50", "KeyboardInterrupt", "Cancelled."} {
		if !strings.Contains(plain, want) {
			t.Errorf("the cancelled step lacks %q:\n%s", want, plain)
		}
	}
	if strings.Contains(plain, "exit 1") {
		t.Errorf("the cancelled step reports an exit code:\n%s", plain)
	}
}

// TestLiveOutputIsNeutralized prints escape sequences from code that is
// still running: none may reach the terminal.
func TestLiveOutputIsNeutralized(t *testing.T) {
	evil := "\x1b]52;c;cHduZWQ=\x07\x1b]0;owned\x1b\\\x1b[2J\x9b31m"
	conv := newScripted(play(Turn{}, nil,
		agent.StepStarted{Step: 1, MaxSteps: 8},
		agent.ToolCall{Step: 1, ID: "call_1", Name: "run_python", Code: "print(evil)"},
		agent.OutputDelta{Step: 1, ID: "call_1", Stream: "stdout", Text: "out " + evil + "\n"},
		agent.OutputDelta{Step: 1, ID: "call_1", Stream: "stderr", Text: "err " + evil},
	))
	m := driveRunning(t, newTestModel(conv, 100, 40, termenv.TrueColor, HalfBlock), askKeys("go")...)
	screen := m.View()
	if bad := foreignEscapes(screen); len(bad) > 0 {
		t.Errorf("escape sequences from the running code reach the terminal: %v", bad)
	}
	for _, shown := range []string{"out ^[]52;c;cHduZWQ=", "err ^[]52"} {
		if !strings.Contains(stripStyles(screen), shown) {
			t.Errorf("the neutralized text %q is not shown:\n%s", shown, stripStyles(screen))
		}
	}
}
