package tui

import (
	"io"

	"github.com/charmbracelet/bubbles/textarea"
	"github.com/charmbracelet/lipgloss"
	"github.com/muesli/termenv"
)

// theme holds every style the chat draws with, so the look of terp can be
// changed in one place: the lipgloss styles, and the glamour and chroma
// styles that match them. It is built once from the renderer of the output,
// which knows the colour profile (NO_COLOR gives the plain one) and whether
// the background is dark.
type theme struct {
	// profile is the colour profile of the terminal; images and code
	// highlighting are encoded for it.
	profile termenv.Profile
	// markdown names the glamour style for answers; code names the chroma
	// style for the model's Python and codeFormat its terminal formatter
	// ("" when there is no colour).
	markdown, code, codeFormat string

	question  lipgloss.Style // the user's question
	rule      lipgloss.Style // the line that opens each step
	dim       lipgloss.Style // secondary text: timings, hints
	thinking  lipgloss.Style // the model's reasoning
	codeLabel lipgloss.Style // "python" above a code block
	gutter    lipgloss.Style // the bar left of code and output
	stdout    lipgloss.Style
	stderr    lipgloss.Style // standard error, styled as an error
	ok        lipgloss.Style // exit 0
	failed    lipgloss.Style // a non-zero exit, a timeout, an error
	notice    lipgloss.Style // the kernel's notice about the session
	file      lipgloss.Style // a file the code saved
	link      lipgloss.Style // a downloaded file's path
	info      lipgloss.Style // terp's own messages in the transcript
	spinner   lipgloss.Style
	prompt    lipgloss.Style // the input's prompt
	input     textarea.Style // the input itself
	cursor    lipgloss.Style // the input's cursor

	statusBar   lipgloss.Style // the line of facts at the bottom
	statusKey   lipgloss.Style // the model's name in it
	statusInfo  lipgloss.Style // a message on the notice line
	statusError lipgloss.Style // an error on the notice line
	hint        lipgloss.Style // key hints on the notice line
}

// newTheme builds the styles for the terminal r draws on.
func newTheme(r *lipgloss.Renderer) theme {
	profile := r.ColorProfile()
	dark := r.HasDarkBackground()
	colourless := profile == termenv.Ascii
	if colourless {
		// NO_COLOR takes the colours away, not bold, faint or reverse
		// video, which still set the parts apart and show the cursor.
		r = lipgloss.NewRenderer(io.Discard)
		r.SetColorProfile(termenv.ANSI)
		r.SetHasDarkBackground(dark)
	}
	c := func(light, dark string) lipgloss.TerminalColor {
		if colourless {
			return lipgloss.NoColor{}
		}
		return lipgloss.AdaptiveColor{Light: light, Dark: dark}
	}
	t := theme{
		profile:  profile,
		markdown: "dark",
		code:     "monokai",

		question:  r.NewStyle().Bold(true).Foreground(c("#1d4ed8", "#93c5fd")),
		rule:      r.NewStyle().Foreground(c("#9ca3af", "#4b5563")),
		dim:       r.NewStyle().Faint(true),
		thinking:  r.NewStyle().Faint(true).Italic(true),
		codeLabel: r.NewStyle().Foreground(c("#6b7280", "#9ca3af")),
		gutter:    r.NewStyle().Foreground(c("#9ca3af", "#4b5563")),
		stdout:    r.NewStyle(),
		stderr:    r.NewStyle().Foreground(c("#b91c1c", "#f87171")),
		ok:        r.NewStyle().Foreground(c("#15803d", "#4ade80")),
		failed:    r.NewStyle().Foreground(c("#b91c1c", "#f87171")).Bold(true),
		notice:    r.NewStyle().Foreground(c("#a16207", "#facc15")),
		file:      r.NewStyle().Foreground(c("#0e7490", "#67e8f9")),
		link:      r.NewStyle().Underline(true).UnderlineSpaces(true).Foreground(c("#0e7490", "#67e8f9")),
		info:      r.NewStyle().Foreground(c("#4b5563", "#d1d5db")),
		spinner:   r.NewStyle().Foreground(c("#7c3aed", "#c4b5fd")),
		prompt:    r.NewStyle().Bold(true).Foreground(c("#7c3aed", "#c4b5fd")),

		statusBar:   r.NewStyle().Foreground(c("#111827", "#e5e7eb")).Background(c("#e5e7eb", "#374151")),
		statusKey:   r.NewStyle().Bold(true).Foreground(c("#111827", "#ffffff")).Background(c("#c4b5fd", "#6d28d9")),
		statusInfo:  r.NewStyle().Foreground(c("#0e7490", "#67e8f9")),
		statusError: r.NewStyle().Foreground(c("#b91c1c", "#f87171")).Bold(true),
		hint:        r.NewStyle().Faint(true),
	}
	t.cursor = r.NewStyle()
	t.input = textarea.Style{
		Base:        r.NewStyle(),
		CursorLine:  r.NewStyle(),
		Placeholder: r.NewStyle().Faint(true),
		Prompt:      t.prompt,
		Text:        r.NewStyle(),
		EndOfBuffer: r.NewStyle(),
	}
	if !dark {
		t.markdown, t.code = "light", "github"
	}
	switch profile {
	case termenv.TrueColor:
		t.codeFormat = "terminal16m"
	case termenv.ANSI256:
		t.codeFormat = "terminal256"
	case termenv.ANSI:
		t.codeFormat = "terminal16"
	default:
		// NO_COLOR, or a terminal without colour: reverse video keeps
		// the status bar apart from the input.
		t.markdown = "notty"
		t.stderr = r.NewStyle().Italic(true)
		t.statusBar = r.NewStyle().Reverse(true)
		t.statusKey = r.NewStyle().Reverse(true).Bold(true)
	}
	return t
}
