package tui

import (
	"fmt"
	"net/url"
	"path/filepath"
	"strings"
	"time"

	"github.com/charmbracelet/lipgloss"
	"github.com/charmbracelet/x/ansi"

	"github.com/terpdev/terp/internal/agent"
	"github.com/terpdev/terp/internal/config"
	"github.com/terpdev/terp/internal/sandbox"
	"github.com/terpdev/terp/internal/sanitize"
)

// step is one model request and the code it ran, as the loop reports them.
type step struct {
	n, max  int
	started time.Time
	// running is set while the turn is on this step.
	running bool
	// reasoning streams first; thought is when something else began.
	reasoning string
	thought   time.Time
	// text is what the model wrote besides code; when the step ends the
	// turn, the answer entry shows it instead.
	text     string
	answered bool
	calls    []*call
}

// call is one run of code.
type call struct {
	code    string
	started time.Time
	// live is what the code printed so far, shown until out arrives, and
	// after it if it never does.
	live Tail
	out  *agent.ToolOutput
	// stopped is set when the turn ended before the run did.
	stopped bool
	files   []*savedFile
}

// savedFile is a file the code saved; after the turn it is downloaded,
// and shown when it is an image.
type savedFile struct {
	name  string
	bytes int64
	// path and abs are set once it is downloaded; problem when that
	// failed.
	path, abs string
	problem   string
	pic       *picture
}

// outputLines and codeLines are how much of a run's output and of its code
// show until ctrl+o unfolds them: output keeps its last lines, where the
// results and the error usually are; code keeps its first, since it reads
// from the top.
const (
	outputLines = 20
	codeLines   = 20
)

// liveLines is how much of the output of code still running shows: enough
// to see it move, little enough that the step does not jump about.
const liveLines = 6

func (s *step) render(rc *renderContext) block {
	t := rc.theme
	var b block
	b.add(t.rule.Render(rule(fmt.Sprintf("step %d/%d", s.n, s.max), rc.width)))
	s.renderThoughts(&b, rc)
	if s.text != "" && !s.answered {
		if s.running && len(s.calls) == 0 {
			// Still streaming: Markdown is drawn once the text is whole,
			// so the layout does not jump with every token.
			b.add(wrap(sanitize.Terminal(s.text), rc.width-2)...)
		} else {
			b.add(rc.markdown.render(s.text, rc.width)...)
		}
	}
	if s.running && s.reasoning == "" && s.text == "" && len(s.calls) == 0 {
		b.add(rc.waiting("Waiting for the model", s.started))
	}
	for i, c := range s.calls {
		c.render(&b, rc, s.running && i == len(s.calls)-1)
	}
	b.add("")
	return b
}

func (s *step) renderThoughts(b *block, rc *renderContext) {
	if s.reasoning == "" {
		return
	}
	t := rc.theme
	thinking := s.running && s.thought.IsZero()
	hint := t.dim.Render("ctrl+t shows")
	if rc.thoughts {
		hint = t.dim.Render("ctrl+t hides")
	}
	switch {
	case thinking:
		b.add(rc.waiting("Thinking", s.started) + " " + hint)
	case s.thought.IsZero():
		b.add(t.thinking.Render(fold(rc.thoughts)+" Thought") + " " + hint)
	default:
		b.add(t.thinking.Render(fold(rc.thoughts)+" Thought for "+durationText(s.thought.Sub(s.started))) + " " + hint)
	}
	text := sanitize.Terminal(strings.TrimSpace(s.reasoning))
	switch {
	case rc.thoughts:
		for _, l := range wrap(text, rc.width-4) {
			b.add("  " + t.thinking.Render(l))
		}
	case thinking:
		// The end of the last line, as a sign of life.
		last := text[strings.LastIndex(text, "\n")+1:]
		if w, room := ansi.StringWidth(last), rc.width-4; w > room {
			last = "…" + ansi.TruncateLeft(last, w-room+1, "")
		}
		b.add("  " + t.thinking.Render(last))
	}
}

func fold(open bool) string {
	if open {
		return "▾"
	}
	return "▸"
}

func (c *call) render(b *block, rc *renderContext, running bool) {
	t := rc.theme
	if c.code != "" {
		b.add(t.codeLabel.Render("  python"))
		lines := rc.code.render(c.code, rc.width-4)
		more := 0
		if !rc.output && len(lines) > codeLines {
			lines, more = lines[:codeLines], len(lines)-codeLines
		}
		for _, l := range lines {
			b.add(t.gutter.Render("  │ ") + l)
		}
		if more > 0 {
			b.add(t.gutter.Render("  │ ") + t.dim.Render(fmt.Sprintf("… %d more lines · ctrl+o shows all", more)))
		}
	}
	if c.out == nil {
		c.renderLive(b, rc)
		switch {
		case running:
			b.add("  " + rc.waiting("Running", c.started))
		case c.stopped:
			b.add("  " + t.notice.Render("■ stopped"))
		}
		return
	}
	o := c.out
	if o.Error != "" {
		for i, l := range wrap("✗ could not run: "+sanitize.Terminal(o.Error), rc.width-4) {
			if i > 0 {
				l = "  " + l
			}
			b.add("  " + t.failed.Render(l))
		}
		return
	}
	took := " · " + durationText(o.Duration)
	switch {
	case o.Stopped != "":
		b.add("  " + t.notice.Render("■ "+o.Stopped))
	case o.TimedOut:
		b.add("  " + t.failed.Render(fmt.Sprintf("✗ timed out · exit %d%s", o.ExitCode, took)))
	case o.ExitCode != 0:
		b.add("  " + t.failed.Render(fmt.Sprintf("✗ exit %d%s", o.ExitCode, took)))
	default:
		b.add("  " + t.ok.Render("✓ exit 0") + t.dim.Render(took))
	}
	renderOutput(b, rc, o.Stdout, t.stdout)
	renderOutput(b, rc, o.Stderr, t.stderr)
	if o.Notice != "" {
		for _, l := range wrap("! "+sanitize.Terminal(o.Notice), rc.width-4) {
			b.add("  " + t.notice.Render(l))
		}
	}
	for _, f := range c.files {
		f.render(b, rc)
	}
}

// renderLive draws the last lines the running code printed, one screen
// line each.
func (c *call) renderLive(b *block, rc *renderContext) {
	t := rc.theme
	for _, l := range c.live.Last(liveLines) {
		st := t.stdout
		if l.Stderr {
			st = t.stderr
		}
		text := sanitize.Terminal(strings.ReplaceAll(l.Text, "\t", "    "))
		b.add("    " + st.Render(ansi.Truncate(text, rc.width-6, "…")))
	}
}

// renderOutput draws one stream of a run's output, folded to its last
// outputLines lines unless ctrl+o unfolded it. The fold says how many lines
// it hides, and how much terp had cut from them, so a short tail is not
// taken for the whole output.
func renderOutput(b *block, rc *renderContext, text string, st lipgloss.Style) {
	text = strings.TrimRight(sanitize.Terminal(text), "\n")
	if text == "" {
		return
	}
	t := rc.theme
	var lines []string
	cutAt := map[int]int64{} // line index: bytes terp cut there
	for _, l := range strings.Split(strings.ReplaceAll(text, "\t", "    "), "\n") {
		if n, ok := sandbox.Omitted(l); ok {
			cutAt[len(lines)] = n
			lines = append(lines, t.notice.Render(l+" (cut by terp; the model saw the same)"))
			continue
		}
		for _, part := range strings.Split(ansi.Hardwrap(l, rc.width-6, true), "\n") {
			lines = append(lines, st.Render(part))
		}
	}
	if hidden := len(lines) - outputLines; !rc.output && hidden > 0 {
		fold := fmt.Sprintf("… %d earlier lines", hidden)
		for i := range hidden {
			if n, ok := cutAt[i]; ok {
				fold += fmt.Sprintf(", %d bytes cut by terp", n)
			}
		}
		b.add("    " + t.dim.Render(fold+" · ctrl+o shows all"))
		lines = lines[hidden:]
	}
	b.add(indent(lines, "    ")...)
}

func (f *savedFile) render(b *block, rc *renderContext) {
	t := rc.theme
	name := sanitize.Terminal(f.name)
	b.add("  " + t.file.Render("▣ /work/"+name) + t.dim.Render(" · "+config.SizeText(f.bytes)))
	if f.problem != "" {
		for _, l := range wrap("not downloaded: "+sanitize.Terminal(f.problem), rc.width-6) {
			b.add("    " + t.failed.Render(l))
		}
	}
	if f.pic != nil {
		b.addImage(f.pic.render(rc.protocol, rc.theme.profile, min(rc.width-4, 100), max(rc.height-10, 6)), 4)
	}
	if f.path != "" {
		b.add("    " + t.dim.Render("↳ ") + fileLink(t.link.Render(sanitize.Terminal(f.path)), f.abs))
	}
}

// fileLink makes label an OSC 8 hyperlink to the file at abs, so a click
// in the terminal opens it. The URL is percent-encoded: a file name from
// the code cannot end the sequence early.
func fileLink(label, abs string) string {
	if abs == "" {
		return label
	}
	u := url.URL{Scheme: "file", Path: filepath.ToSlash(abs)}
	return ansi.SetHyperlink(u.String()) + label + ansi.ResetHyperlink()
}
