package tui

import (
	"os"
	"strings"
	"testing"

	"github.com/charmbracelet/x/ansi"
	"github.com/muesli/termenv"
)

func TestParseCommand(t *testing.T) {
	tests := []struct {
		line, name, arg, err string
	}{
		{"/upload data.csv", "/upload", "data.csv", ""},
		{"/ls", "/files", "", ""},
		{"/?", "/help", "", ""},
		{"/q", "/quit", "", ""},
		{"/resume", "/resume", "", ""},
		{"/resume 3f9c", "/resume", "3f9c", ""},
		{"/model", "/model", "", ""},
		{"/upload", "", "", "/upload needs path: /upload PATH"},
		{"/steps", "", "", "/steps needs n: /steps N"},
		{"/frobnicate x", "", "", "unknown command /frobnicate: /help lists the commands"},
	}
	for _, tt := range tests {
		c, arg, err := ParseCommand(tt.line)
		switch {
		case tt.err != "":
			if err == nil || err.Error() != tt.err {
				t.Errorf("%q: error %v, want %q", tt.line, err, tt.err)
			}
		case err != nil || c.Name != tt.name || arg != tt.arg:
			t.Errorf("%q = %s %q %v, want %s %q", tt.line, c.Name, arg, err, tt.name, tt.arg)
		}
	}
	if _, err := StepsArg("zero"); err == nil {
		t.Error("StepsArg(zero) passed")
	}
}

// Every command is in the chat's /help and in the README, which a user
// reads first; the line-mode chat prints the same table (internal/cli).
func TestEveryCommandIsDocumented(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	help := helpText()
	for _, c := range Commands {
		if !strings.Contains(help, c.Name) {
			t.Errorf("/help lacks %s", c.Name)
		}
		if !strings.Contains(string(readme), "`"+strings.TrimSpace(c.Name+" "+c.Args)+"`") {
			t.Errorf("README.md lacks `%s`", strings.TrimSpace(c.Name+" "+c.Args))
		}
	}
}

// A chat that goes on with a stored conversation shows its last exchanges,
// with how many came before them.
func TestContinuedChatShowsTheEarlierTranscript(t *testing.T) {
	conv := newScripted()
	conv.info.Earlier = 12
	conv.info.Past = []Exchange{
		{Question: "which month grew the most?", Answer: "December, by 14%."},
		{Question: "and the quarter?", Answer: ""},
	}
	m := newTestModel(conv, 80, 40, termenv.ANSI256, HalfBlock)
	screen := ansi.Strip(m.transcript.view())
	for _, want := range []string{"… 10 earlier questions", "which month grew the most?", "December, by 14%.", "and the quarter?", "after 12 questions"} {
		if !strings.Contains(screen, want) {
			t.Errorf("the transcript lacks %q:\n%s", want, screen)
		}
	}
}
