package cli

import (
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/charmbracelet/bubbles/spinner"
	"github.com/charmbracelet/lipgloss"
	"github.com/charmbracelet/x/ansi"
	"golang.org/x/term"

	"github.com/terpdev/terp/internal/agent"
	"github.com/terpdev/terp/internal/config"
	"github.com/terpdev/terp/internal/sandbox"
	"github.com/terpdev/terp/internal/sanitize"
	"github.com/terpdev/terp/internal/tui"
)

// progress prints the loop's events for a person watching a terminal: the
// step, the code, an excerpt of its output and the files it saved. The answer
// itself goes to stdout, so `terp ask ... > answer.md` keeps only the answer.
//
// It is live on a terminal (newProgress): at the bottom, a spinner with the
// time taken while the model thinks and while code runs, and above it the
// last lines the running code printed, redrawn in place. Everything else is
// printed above that area and never changes, so the scrollback reads like
// the plain output: when a run's result arrives its live lines give way to
// the usual excerpt.
type progress struct {
	w      io.Writer
	styles styles
	// live draws the area at the bottom; every is how often it is redrawn
	// (0: only as events come, for tests); width is the terminal's.
	live  bool
	every time.Duration
	width func() int
	now   func() time.Time

	// mu guards what follows: events and the ticker both draw.
	mu sync.Mutex
	// thought is the start of the model's reasoning, printed as one line
	// when it ends; cut says there was more. glimpse is its latest part,
	// for the spinner.
	thought []rune
	cut     bool
	glimpse string
	// activity is what the spinner says ("thinking", "running"; "" for no
	// spinner) and since when; output is what the running code printed.
	activity string
	since    time.Time
	output   tui.Tail
	drawn    int // lines the live area takes on screen
	ticking  bool
	stop     chan struct{}
	stopped  chan struct{}
}

// newProgress returns the progress for w, live when w is a terminal: the
// redraws are cursor movements, which a buffer that stands for one (in
// tests, StderrTTY without a terminal) must not get.
func newProgress(w io.Writer) *progress {
	fh, ok := w.(*os.File)
	return &progress{
		w: w, styles: newStyles(lipgloss.NewRenderer(w)),
		live: ok && term.IsTerminal(int(fh.Fd())), every: spinner.MiniDot.FPS,
		width: func() int { return terminalWidth(w) },
	}
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
// While code runs, fewer of its last lines show, so the screen stays calm.
const (
	codeLines   = 12 // lines of code shown per step
	outputLines = 6  // lines of each output stream shown per step
	liveLines   = 4  // lines of output shown while the code runs
)

func (p *progress) handle(e agent.Event) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.startTicking()
	switch e := e.(type) {
	case agent.ReasoningDelta:
		p.think(e.Text)
		return
	case agent.OutputDelta:
		if p.activity == "running" {
			p.output.Add(e)
		}
		return
	case agent.TextDelta, agent.CodeDelta, agent.UsageUpdated:
		// The answer goes to stdout whole, the code with its ToolCall;
		// the spinner goes on.
		return
	}
	var b strings.Builder
	p.erase(&b)
	p.endThought(&b)
	s := p.styles
	switch e := e.(type) {
	case agent.StepStarted:
		fmt.Fprintln(&b, s.step.Render(fmt.Sprintf("── step %d/%d", e.Step, e.MaxSteps)))
		p.begin("thinking")
	case agent.ToolCall:
		if e.Code != "" {
			fmt.Fprintln(&b, renderLines(s.code, indent(excerpt(sanitize.Terminal(strings.TrimRight(e.Code, "\n")), codeLines), "  ")))
		}
		p.begin("running")
	case agent.ToolOutput:
		p.result(&b, e)
		p.begin("")
	case agent.FileSaved:
		fmt.Fprintln(&b, s.ok.Render(fmt.Sprintf("  saved /work/%s (%s)", sanitize.Terminal(e.Path), config.SizeText(e.Bytes))))
	case agent.Failed:
		// The error itself is printed once, where the command ends (ask's
		// exit, the line-mode chat's loop).
		p.begin("")
	case agent.Notice:
		fmt.Fprintln(&b, s.dim.Render("  note: "+sanitize.Terminal(e.Text)))
	case agent.Answer:
		p.begin("")
	}
	p.draw(&b)
	_, _ = io.WriteString(p.w, b.String())
}

// begin starts the spinner on what ("" stops it) and forgets the output of
// the last run.
func (p *progress) begin(what string) {
	p.activity, p.since = what, p.clock()
	p.output = tui.Tail{}
}

func (p *progress) clock() time.Time {
	if p.now != nil {
		return p.now()
	}
	return time.Now()
}

// maxThought is how much of the model's reasoning progress shows per step:
// enough to see what it is doing, not the thousands of tokens a thinking
// model can spend.
const maxThought = 240

func (p *progress) think(text string) {
	r := []rune(oneLine(sanitize.Terminal(text)))
	room := maxThought - len(p.thought)
	if len(r) > room {
		r, p.cut = r[:room], true
	}
	p.thought = append(p.thought, r...)
	if p.live {
		g := []rune(p.glimpse + oneLine(sanitize.Terminal(text)))
		p.glimpse = string(g[max(len(g)-maxThought, 0):])
	}
}

// endThought prints the reasoning that streamed since the last event.
func (p *progress) endThought(b *strings.Builder) {
	if len(p.thought) == 0 && !p.cut {
		return
	}
	text := string(p.thought)
	if p.cut {
		text += "…"
	}
	fmt.Fprintln(b, p.styles.dim.Render("thinking: "+text))
	p.thought, p.cut, p.glimpse = nil, false, ""
}

// startTicking starts the redraws of a live progress, once. It is called
// with mu held.
func (p *progress) startTicking() {
	if !p.live || p.every <= 0 || p.ticking {
		return
	}
	p.ticking = true
	p.stop, p.stopped = make(chan struct{}), make(chan struct{})
	go func() {
		defer close(p.stopped)
		t := time.NewTicker(p.every)
		defer t.Stop()
		for {
			select {
			case <-p.stop:
				return
			case <-t.C:
				p.redraw()
			}
		}
	}()
}

// redraw draws the live area again: the spinner moves, the clock and the
// output go on.
func (p *progress) redraw() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.drawn == 0 && p.activity == "" {
		return
	}
	var b strings.Builder
	p.erase(&b)
	p.draw(&b)
	_, _ = io.WriteString(p.w, b.String())
}

// close stops the redraws and leaves the screen as plain output: no
// spinner, and the reasoning of a turn that ended while the model thought.
func (p *progress) close() {
	p.mu.Lock()
	ticking := p.ticking
	p.ticking = false
	p.mu.Unlock()
	if ticking {
		close(p.stop)
		<-p.stopped
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	var b strings.Builder
	p.erase(&b)
	p.endThought(&b)
	p.activity = ""
	_, _ = io.WriteString(p.w, b.String())
}

// erase removes the live area; the cursor is at the end of its last line,
// and goes to the start of its first.
func (p *progress) erase(b *strings.Builder) {
	if p.drawn == 0 {
		return
	}
	b.WriteString("\r")
	if p.drawn > 1 {
		fmt.Fprintf(b, "\x1b[%dA", p.drawn-1)
	}
	b.WriteString("\x1b[J")
	p.drawn = 0
}

// draw draws the live area where the cursor is, at the start of a line:
// the last lines of the running code's output, then the spinner. Each line
// is cut to the terminal's width, so none wraps and erase knows how many
// to take back.
func (p *progress) draw(b *strings.Builder) {
	if !p.live || p.activity == "" {
		return
	}
	s := p.styles
	width := 80
	if p.width != nil {
		width = p.width()
	}
	width = max(width-1, 10)
	var lines []string
	for _, l := range p.output.Last(liveLines) {
		text := ansi.Truncate("  │ "+sanitize.Terminal(strings.ReplaceAll(l.Text, "\t", "    ")), width, "…")
		if l.Stderr {
			text = s.err.Render(text)
		}
		lines = append(lines, text)
	}
	took := p.clock().Sub(p.since)
	frames := spinner.MiniDot.Frames
	status := fmt.Sprintf("  %s %s %s", frames[max(int(took/spinner.MiniDot.FPS), 0)%len(frames)], p.activity, elapsed(took))
	line := s.step.Render(status)
	if p.activity == "thinking" && p.glimpse != "" {
		room := width - ansi.StringWidth(status) - 3
		g := strings.TrimSpace(p.glimpse)
		if w := ansi.StringWidth(g); w > room {
			g = "…" + ansi.TruncateLeft(g, w-room+1, "")
		}
		if room > 1 && g != "" {
			line += s.dim.Render(" · " + g)
		}
	}
	lines = append(lines, line)
	b.WriteString(strings.Join(lines, "\n"))
	p.drawn = len(lines)
}

// elapsed shows the time a wait has taken, to a tenth of a second.
func elapsed(d time.Duration) string {
	if d < time.Minute {
		return fmt.Sprintf("%.1fs", max(d, 0).Seconds())
	}
	return d.Round(time.Second).String()
}

// result prints a run's result: how it ended and the end of its output.
func (p *progress) result(b *strings.Builder, e agent.ToolOutput) {
	s := p.styles
	if e.Error != "" {
		fmt.Fprintln(b, s.err.Render("  tool error: "+sanitize.Terminal(e.Error)))
		return
	}
	status := fmt.Sprintf("  exit %d · %s", e.ExitCode, e.Duration.Round(10e6))
	switch {
	case e.Stopped != "":
		fmt.Fprintln(b, s.err.Render("  "+e.Stopped))
	case e.TimedOut:
		fmt.Fprintln(b, s.err.Render(status+" · timed out"))
	case e.ExitCode != 0:
		fmt.Fprintln(b, s.err.Render(status))
	default:
		fmt.Fprintln(b, s.dim.Render(status))
	}
	if out := strings.TrimRight(e.Stdout, "\n"); out != "" {
		fmt.Fprintln(b, indent(tail(sanitize.Terminal(out), outputLines), "  │ "))
	}
	if out := strings.TrimRight(e.Stderr, "\n"); out != "" {
		fmt.Fprintln(b, renderLines(s.err, indent(tail(sanitize.Terminal(out), outputLines), "  │ ")))
	}
	if e.Notice != "" {
		fmt.Fprintln(b, renderLines(s.err, indent(sanitize.Terminal(e.Notice), "  ")))
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
