package cli

import (
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/charmbracelet/lipgloss"
	"github.com/charmbracelet/x/ansi"
	"github.com/muesli/termenv"
	"golang.org/x/term"

	"github.com/terpdev/terp/internal/batch"
)

// batchDisplay shows a batch's progress. The runner never calls started and
// done at the same time; warnings, the writer sessions print their warnings
// to, may be written from any goroutine.
type batchDisplay interface {
	started(batch.Run)
	done(batch.Result)
	warnings() io.Writer
	close()
}

// newBatchDisplay picks how progress is shown: JSON lines for --json; a
// live bar for a person at a terminal; otherwise (a pipe, a CI log) one
// plain line per finished run.
func newBatchDisplay(f *Factory, opts *batchOptions, total int, withModel, withRun bool) batchDisplay {
	warn := &lockedWriter{w: f.IO.ErrOut}
	switch {
	case opts.json:
		return &jsonDisplay{w: f.IO.Out, warn: warn}
	case f.IO.StderrTTY && !isCI(f.Getenv):
		return newBarDisplay(f, total, withModel, withRun)
	}
	r := lipgloss.NewRenderer(f.IO.Out, termenv.WithEnvironment(environ{f.Getenv}))
	return &lineDisplay{w: f.IO.Out, warn: warn, styles: newStyles(r), total: total, withModel: withModel, withRun: withRun}
}

// isCI tells whether a CI system runs terp: they set CI (GitHub Actions,
// GitLab, CircleCI, Buildkite, Travis...), and a live bar would only fill
// their logs with redraws.
func isCI(getenv func(string) string) bool {
	v := strings.ToLower(getenv("CI"))
	return v != "" && v != "false" && v != "0"
}

// runLine describes a finished run in one line: its verdict, name, cost,
// and why it did not pass.
func runLine(st styles, r batch.Result, withModel, withRun bool) string {
	verdict := st.ok.Render("PASS ")
	switch r.Status {
	case batch.Failed:
		verdict = st.err.Render("FAIL ")
	case batch.Errored:
		verdict = st.err.Render("ERROR")
	}
	// The reasons of a run that did not pass are told once, in the
	// summary's "Not passed" list.
	return fmt.Sprintf("%s %s %s", verdict, batch.Label(r, withModel, withRun),
		st.dim.Render(fmt.Sprintf("(%s, %s)", stepCount(r.Steps), r.Duration().Round(100*time.Millisecond))))
}

// stepCount says "1 step" or "n steps".
func stepCount(n int) string {
	if n == 1 {
		return "1 step"
	}
	return fmt.Sprintf("%d steps", n)
}

// lineDisplay prints one line per finished run, for logs.
type lineDisplay struct {
	w         io.Writer
	warn      io.Writer
	styles    styles
	total     int
	finished  int
	withModel bool
	withRun   bool
}

func (d *lineDisplay) started(batch.Run) {}

func (d *lineDisplay) done(r batch.Result) {
	d.finished++
	width := len(fmt.Sprint(d.total))
	fmt.Fprintf(d.w, "[%*d/%d] %s\n", width, d.finished, d.total, runLine(d.styles, r, d.withModel, d.withRun))
}

func (d *lineDisplay) warnings() io.Writer { return d.warn }

// close leaves a blank line between the runs and the summary.
func (d *lineDisplay) close() {
	if d.finished > 0 {
		fmt.Fprintln(d.w)
	}
}

// jsonDisplay prints each finished run's result as a JSON line on stdout.
type jsonDisplay struct {
	w    io.Writer
	warn io.Writer
}

func (d *jsonDisplay) started(batch.Run) {}

func (d *jsonDisplay) done(r batch.Result) {
	if err := batch.WriteLines(d.w, []batch.Result{r}); err != nil {
		fmt.Fprintln(d.warn, "warning: "+err.Error())
	}
}

func (d *jsonDisplay) warnings() io.Writer { return d.warn }
func (d *jsonDisplay) close()              {}

// barDisplay keeps a progress bar on the last line of a terminal, with the
// counts so far and the time taken; runs that do not pass, and warnings, are
// printed above it as they come.
type barDisplay struct {
	w         io.Writer
	styles    styles
	total     int
	withModel bool
	withRun   bool
	start     time.Time
	width     func() int

	mu                                sync.Mutex
	finished, passed, failed, errored int
	running                           int
	closed                            bool
	stop                              chan struct{}
	stopped                           chan struct{}
}

func newBarDisplay(f *Factory, total int, withModel, withRun bool) *barDisplay {
	r := lipgloss.NewRenderer(f.IO.ErrOut, termenv.WithEnvironment(environ{f.Getenv}))
	d := &barDisplay{
		w:      f.IO.ErrOut,
		styles: newStyles(r),
		total:  total, withModel: withModel, withRun: withRun,
		start: time.Now(),
		width: func() int { return terminalWidth(f.IO.ErrOut) },
		stop:  make(chan struct{}), stopped: make(chan struct{}),
	}
	go d.tick()
	d.mu.Lock()
	d.draw()
	d.mu.Unlock()
	return d
}

// terminalWidth is w's width in columns when it is a terminal, else 80.
func terminalWidth(w io.Writer) int {
	if fh, ok := w.(*os.File); ok {
		if cols, _, err := term.GetSize(int(fh.Fd())); err == nil && cols > 0 {
			return cols
		}
	}
	return 80
}

// tick redraws every second, so the clock moves while runs take long.
func (d *barDisplay) tick() {
	defer close(d.stopped)
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-d.stop:
			return
		case <-t.C:
			d.mu.Lock()
			d.draw()
			d.mu.Unlock()
		}
	}
}

// draw replaces the last line with the bar and the counts. It is called with
// mu held.
func (d *barDisplay) draw() {
	if d.closed {
		return
	}
	frac := 0.0
	if d.total > 0 {
		frac = float64(d.finished) / float64(d.total)
	}
	s := d.styles
	status := fmt.Sprintf(" %d/%d  %s  %s  %s  %s",
		d.finished, d.total,
		s.ok.Render(fmt.Sprintf("%d passed", d.passed)),
		failStyle(s, d.failed).Render(fmt.Sprintf("%d failed", d.failed)),
		failStyle(s, d.errored).Render(fmt.Sprintf("%d errored", d.errored)),
		s.dim.Render(fmt.Sprintf("%d running · %s", d.running, time.Since(d.start).Round(time.Second))))
	line := ansi.Truncate(d.renderBar(frac)+status, d.width()-1, "…")
	fmt.Fprint(d.w, "\r"+line+"\x1b[K")
}

// barWidth is the bar's length in cells.
const barWidth = 24

// renderBar draws frac of the bar filled. It is drawn by hand: bubbles'
// progress bar needs a module (harmonica, for its animation) that terp does
// not otherwise use.
func (d *barDisplay) renderBar(frac float64) string {
	full := min(int(frac*barWidth+0.5), barWidth)
	return d.styles.ok.Render(strings.Repeat("█", full)) + d.styles.dim.Render(strings.Repeat("░", barWidth-full))
}

func failStyle(s styles, n int) lipgloss.Style {
	if n > 0 {
		return s.err
	}
	return s.dim
}

// clear empties the bar's line, for text to go above it. It is called with
// mu held.
func (d *barDisplay) clear() {
	if !d.closed {
		fmt.Fprint(d.w, "\r\x1b[K")
	}
}

func (d *barDisplay) started(batch.Run) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.running++
	d.draw()
}

func (d *barDisplay) done(r batch.Result) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.running--
	d.finished++
	switch r.Status {
	case batch.Passed:
		d.passed++
	case batch.Failed:
		d.failed++
	default:
		d.errored++
	}
	if r.Status != batch.Passed {
		d.clear()
		fmt.Fprintln(d.w, runLine(d.styles, r, d.withModel, d.withRun))
	}
	d.draw()
}

// Write prints a warning above the bar.
func (d *barDisplay) Write(p []byte) (int, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.clear()
	n, err := d.w.Write(p)
	d.draw()
	return n, err
}

func (d *barDisplay) warnings() io.Writer { return d }

func (d *barDisplay) close() {
	close(d.stop)
	<-d.stopped
	d.mu.Lock()
	defer d.mu.Unlock()
	d.clear()
	d.closed = true
}

// lockedWriter lets several goroutines write whole lines to one writer.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
