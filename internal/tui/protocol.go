package tui

import "strings"

// Protocol is how the chat draws images in the terminal.
type Protocol string

// The ways to draw an image. HalfBlock works in every terminal with colour:
// each cell shows two pixels, the upper half block "▀" in the colour of the
// top one on a background of the bottom one.
const (
	Kitty     Protocol = "kitty"
	ITerm2    Protocol = "iterm2"
	Sixel     Protocol = "sixel"
	HalfBlock Protocol = "halfblock"
	NoImages  Protocol = "none"
)

// DetectProtocol returns the protocol setting names (the image_protocol
// configuration), or for "auto" the best one the terminal is known to
// support, from its environment: terminals do not all answer queries, and
// a query would race with the UI for the input. Inside tmux it is the
// half-block preview, which tmux passes through unchanged.
func DetectProtocol(setting string, getenv func(string) string) Protocol {
	if setting != "" && setting != "auto" {
		return Protocol(setting)
	}
	term, program := getenv("TERM"), getenv("TERM_PROGRAM")
	switch {
	case getenv("TMUX") != "" || strings.HasPrefix(term, "screen") || strings.HasPrefix(term, "tmux"):
		return HalfBlock
	case getenv("KITTY_WINDOW_ID") != "" || term == "xterm-kitty" || program == "WezTerm" || program == "ghostty":
		return Kitty
	case program == "iTerm.app":
		return ITerm2
	}
	return HalfBlock
}
