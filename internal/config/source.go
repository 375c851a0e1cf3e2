package config

import (
	"os"
	"strconv"
	"strings"
)

// SourceKind says which layer of the precedence order a value came from.
type SourceKind int

// The layers, lowest precedence first.
const (
	KindDefault SourceKind = iota
	KindFile
	KindEnv
	KindFlag
)

// Source records where a value came from, so "terp config show" can answer the
// question users ask when a setting surprises them: why is it this?
type Source struct {
	Kind SourceKind
	Name string // the file path, the variable name, or the flag with its dashes ("--model")
	Line int    // the line in the file, when Kind is KindFile
	// Preset names the provider whose preset filled the value in, where
	// the provider was set (see applyPreset).
	Preset string
}

// FromFile is the source of a value read from line of the config file at path.
func FromFile(path string, line int) Source { return Source{Kind: KindFile, Name: path, Line: line} }

// FromEnv is the source of a value read from an environment variable.
func FromEnv(name string) Source { return Source{Kind: KindEnv, Name: name} }

// FromFlag is the source of a value given on the command line. The name may be given
// with or without its leading dashes.
func FromFlag(name string) Source {
	if !strings.HasPrefix(name, "-") {
		name = "--" + name
	}
	return Source{Kind: KindFlag, Name: name}
}

// String reads like "default", "file ~/.config/terp/config.toml:4", "env TERP_MODEL" or
// "flag --model".
func (s Source) String() string {
	if s.Preset != "" {
		p := s
		p.Preset = ""
		return p.String() + " (provider " + s.Preset + ")"
	}
	switch s.Kind {
	case KindFile:
		return "file " + s.location()
	case KindEnv:
		return "env " + s.Name
	case KindFlag:
		return "flag " + s.Name
	default:
		return "default"
	}
}

// location is where an editor or a user should look: "path:line" for the file, the bare
// variable or flag name otherwise.
func (s Source) location() string {
	if s.Kind != KindFile {
		return s.Name
	}
	p := tildify(s.Name)
	if s.Line > 0 {
		p += ":" + strconv.Itoa(s.Line)
	}
	return p
}

// tildify shortens a path under the home directory to "~/...", as users write it.
func tildify(path string) string {
	home, err := os.UserHomeDir()
	if err != nil || home == "" || home == "/" {
		return path
	}
	if path == home {
		return "~"
	}
	if rest, ok := strings.CutPrefix(path, home+string(os.PathSeparator)); ok {
		return "~/" + rest
	}
	return path
}
