package cli

import (
	"fmt"
	"io"
	"strings"

	"github.com/charmbracelet/lipgloss"

	"github.com/terpdev/terp/internal/agent"
	"github.com/terpdev/terp/internal/config"
	"github.com/terpdev/terp/internal/sandbox"
	"github.com/terpdev/terp/internal/sanitize"
)

// progress prints the loop's events for a person watching a terminal: the
// step, the code, an excerpt of its output and the files it saved. The answer
// itself goes to stdout, so `terp ask ... > answer.md` keeps only the answer.
type progress struct {
	w      io.Writer
	styles styles
	// thinking is set while reasoning deltas stream, to end the line after;
	// thought counts the characters of it shown so far.
	thinking bool
	thought  int
}

// styles are every lipgloss style the plain front-end uses.
type styles struct {
	step, code, dim, err, ok lipgloss.Style
}

func newStyles(r *lipgloss.Renderer) styles {
	return styles{
		step: r.NewStyle().Bold(true).Foreground(lipgloss.Color("12")),
		code: r.NewStyle().Foreground(lipgloss.Color("14")),
		dim:  r.NewStyle().Faint(true),
		err:  r.NewStyle().Foreground(lipgloss.Color("9")),
		ok:   r.NewStyle().Foreground(lipgloss.Color("10")),
	}
}

// Progress folds long code to its first lines, which say what it does, and
// long output to its last, where the results and the error usually are.
const (
	codeLines   = 12 // lines of code shown per step
	outputLines = 6  // lines of each output stream shown per step
)

func (p *progress) handle(e agent.Event) {
	s := p.styles
	if _, ok := e.(agent.ReasoningDelta); !ok && p.thinking {
		fmt.Fprintln(p.w)
		p.thinking = false
	}
	switch e := e.(type) {
	case agent.StepStarted:
		fmt.Fprintln(p.w, s.step.Render(fmt.Sprintf("── step %d/%d", e.Step, e.MaxSteps)))
	case agent.ReasoningDelta:
		p.think(e.Text)
	case agent.ToolCall:
		if e.Code != "" {
			fmt.Fprintln(p.w, renderLines(s.code, indent(excerpt(sanitize.Terminal(strings.TrimRight(e.Code, "\n")), codeLines), "  ")))
		}
	case agent.ToolOutput:
		p.output(e)
	case agent.FileSaved:
		fmt.Fprintln(p.w, s.ok.Render(fmt.Sprintf("  saved /work/%s (%s)", sanitize.Terminal(e.Path), config.SizeText(e.Bytes))))
	case agent.Failed:
		fmt.Fprintln(p.w, s.err.Render("  error: "+sanitize.Terminal(e.Err.Error())))
	case agent.Notice:
		fmt.Fprintln(p.w, s.dim.Render("  note: "+sanitize.Terminal(e.Text)))
	}
}

// maxThought is how much of the model's reasoning progress shows per step:
// enough to see what it is doing, not the thousands of tokens a thinking
// model can spend.
const maxThought = 240

func (p *progress) think(text string) {
	if !p.thinking {
		fmt.Fprint(p.w, p.styles.dim.Render("thinking: "))
		p.thinking, p.thought = true, 0
	}
	if p.thought >= maxThought {
		return
	}
	r := []rune(oneLine(sanitize.Terminal(text)))
	if room := maxThought - p.thought; len(r) > room {
		r = append(r[:room], '…')
	}
	p.thought += len(r)
	fmt.Fprint(p.w, p.styles.dim.Render(string(r)))
}

func (p *progress) output(e agent.ToolOutput) {
	s := p.styles
	if e.Error != "" {
		fmt.Fprintln(p.w, s.err.Render("  tool error: "+sanitize.Terminal(e.Error)))
		return
	}
	status := fmt.Sprintf("  exit %d · %s", e.ExitCode, e.Duration.Round(10e6))
	switch {
	case e.TimedOut:
		fmt.Fprintln(p.w, s.err.Render(status+" · timed out"))
	case e.ExitCode != 0:
		fmt.Fprintln(p.w, s.err.Render(status))
	default:
		fmt.Fprintln(p.w, s.dim.Render(status))
	}
	if out := strings.TrimRight(e.Stdout, "\n"); out != "" {
		fmt.Fprintln(p.w, indent(tail(sanitize.Terminal(out), outputLines), "  │ "))
	}
	if out := strings.TrimRight(e.Stderr, "\n"); out != "" {
		fmt.Fprintln(p.w, renderLines(s.err, indent(tail(sanitize.Terminal(out), outputLines), "  │ ")))
	}
	if e.Notice != "" {
		fmt.Fprintln(p.w, renderLines(s.err, indent(sanitize.Terminal(e.Notice), "  ")))
	}
}

// renderLines styles each line on its own: lipgloss pads a multi-line block
// to its widest line, which wraps every line of long code on a narrow
// terminal.
func renderLines(st lipgloss.Style, s string) string {
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		lines[i] = st.Render(l)
	}
	return strings.Join(lines, "\n")
}

// excerpt keeps the first n lines of s and says how many were left out.
func excerpt(s string, n int) string {
	lines := strings.Split(s, "\n")
	if len(lines) <= n {
		return s
	}
	return strings.Join(lines[:n], "\n") + fmt.Sprintf("\n… %d more lines", len(lines)-n)
}

// tail keeps the last n lines of s and says how many earlier lines it left
// out, and how many bytes terp had already cut among them, so that a short
// tail is not taken for the whole output.
func tail(s string, n int) string {
	lines := strings.Split(s, "\n")
	if len(lines) <= n {
		return s
	}
	hidden := len(lines) - n
	fold := fmt.Sprintf("… %d earlier lines", hidden)
	for _, l := range lines[:hidden] {
		if cut, ok := sandbox.Omitted(l); ok {
			fold += fmt.Sprintf(", %d bytes cut by terp", cut)
		}
	}
	return fold + "\n" + strings.Join(lines[hidden:], "\n")
}

func indent(s, prefix string) string {
	return prefix + strings.ReplaceAll(s, "\n", "\n"+prefix)
}

func oneLine(s string) string { return strings.ReplaceAll(s, "\n", " ") }
