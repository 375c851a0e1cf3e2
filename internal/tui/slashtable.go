package tui

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// Command is one slash command, as the chat UI and the line-mode chat both
// offer it: one table gives both their names, aliases, arguments, help text
// and argument checks, and each front-end carries out the command its own
// way.
type Command struct {
	Name    string   // "/upload"
	Aliases []string // other names for it ("/ls" for "/files")
	// Args is the argument as the help shows it: "" for none, "PATH" for a
	// required one, "[ID]" for an optional one.
	Args string
	Help string
}

// Commands is every slash command, in the order help lists them.
var Commands = []Command{
	{Name: "/upload", Args: "PATH", Help: "copy a file from this machine to /work"},
	{Name: "/files", Aliases: []string{"/ls"}, Help: "list the files in /work"},
	{Name: "/download", Args: "NAME", Help: "copy /work/NAME to the output directory"},
	{Name: "/export", Args: "[FILE]", Help: "write this conversation as a notebook (FILE.ipynb), a web page (.html) or Markdown (.md); alone, ID.html in the output directory"},
	{Name: "/new", Help: "start a new conversation in a new sandbox"},
	{Name: "/resume", Args: "[ID]", Help: "go on with a stored conversation; alone, list them"},
	{Name: "/model", Args: "[NAME]", Help: "switch the model for the next questions; alone, show it"},
	{Name: "/steps", Args: "N", Help: "set the step cap for the next questions"},
	{Name: "/help", Aliases: []string{"/?"}, Help: "show this help"},
	{Name: "/quit", Aliases: []string{"/exit", "/q"}, Help: "leave terp (also ctrl+d on an empty line, or the end of the input)"},
}

// ParseCommand reads a line that starts with "/": the command it names (by
// its Name, whatever alias was typed) and its argument, or an error that
// says what is wrong (an unknown command, a missing argument) and what to
// type instead.
func ParseCommand(line string) (Command, string, error) {
	name, arg, _ := strings.Cut(strings.TrimSpace(line), " ")
	arg = strings.TrimSpace(arg)
	for _, c := range Commands {
		if c.Name != name && !slices.Contains(c.Aliases, name) {
			continue
		}
		if c.Args != "" && !strings.HasPrefix(c.Args, "[") && arg == "" {
			return c, "", fmt.Errorf("%s needs %s: %s %s", c.Name, strings.ToLower(c.Args), c.Name, c.Args)
		}
		return c, arg, nil
	}
	return Command{}, "", fmt.Errorf("unknown command %s: /help lists the commands", name)
}

// StepsArg reads /steps's argument.
func StepsArg(arg string) (int, error) {
	n, err := strconv.Atoi(arg)
	if err != nil || n < 1 {
		return 0, fmt.Errorf("/steps needs a whole number from 1 up, not %q", arg)
	}
	return n, nil
}

// CommandsHelp lists the commands, one a line, for either front-end's help.
func CommandsHelp() string {
	var b strings.Builder
	for _, c := range Commands {
		fmt.Fprintf(&b, "  %-16s %s\n", strings.TrimSpace(c.Name+" "+c.Args), c.Help)
	}
	return b.String()
}
