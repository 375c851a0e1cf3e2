package cli

import (
	"bytes"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/charmbracelet/lipgloss"

	"github.com/terpdev/terp/internal/agent"
)

var update = flag.Bool("update", false, "rewrite golden files under testdata")

// golden compares got with testdata/name, or rewrites it with -update.
func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if got != string(want) {
		t.Errorf("output differs from %s (go test -update rewrites it):\n--- got\n%s\n--- want\n%s", path, got, want)
	}
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
	golden(t, "progress.golden", out)
}
