package config

import (
	"fmt"
	"io"
	"text/tabwriter"
	"unicode/utf8"
)

// Row is one setting as "terp config show" prints it. Value is the text form a flag or
// an environment variable would take, so it can be pasted back; secrets are masked.
type Row struct {
	Key    string `json:"key"`
	Value  string `json:"value"`
	Source string `json:"source"`
	Env    string `json:"env,omitempty"`
}

// Report is everything "terp config show" prints, shaped for --json as well as text.
type Report struct {
	Path     string   `json:"path"`
	Exists   bool     `json:"exists"`
	Keys     []Row    `json:"keys"`
	Warnings []string `json:"warnings,omitempty"`
	// Profiles are the model profiles that apply to the configured model,
	// most authoritative first.
	Profiles []ProfileRow `json:"profiles,omitempty"`
}

// ProfileRow is a model profile as "terp config show" prints it.
type ProfileRow struct {
	Pattern  string `json:"pattern"`
	Settings string `json:"settings"`
	Source   string `json:"source"`
}

// Report lists every setting with its value and origin. The API key row shows the key
// actually in use, wherever it was found, and never in full.
func (c *Config) Report() Report {
	r := Report{Path: c.path, Exists: c.fileExists, Warnings: c.Warnings()}
	for _, f := range fields {
		row := Row{Key: f.Name, Value: f.bind(c).String(), Source: c.sources[f.Name].String(), Env: f.Env}
		if f.secret {
			key, from := c.APIKey()
			row.Value = Mask(key)
			switch {
			case key == "":
				row.Source = "none"
			case from == c.APIKeyEnv && c.apiKey == "":
				row.Source = FromEnv(from).String()
			}
		}
		r.Keys = append(r.Keys, row)
	}
	for _, p := range c.matching(c.Model) {
		r.Profiles = append(r.Profiles, ProfileRow{Pattern: p.Pattern, Settings: p.settings(), Source: p.source()})
	}
	return r
}

// Show writes the Report as an aligned table, the config file first because "which file
// did it read?" is the first question when a setting surprises.
func (c *Config) Show(w io.Writer) error {
	r := c.Report()
	state := "found"
	if !r.Exists {
		state = "not found, using defaults"
	}
	path := tildify(r.Path)
	if path == "" {
		path = "(no home directory)"
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "config file: %s (%s)\n\n", path, state)
	fmt.Fprintln(tw, "KEY\tVALUE\tSOURCE")
	for _, row := range r.Keys {
		v := row.Value
		if v == "" {
			v = `""`
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\n", row.Key, v, row.Source)
	}
	if len(r.Profiles) > 0 {
		fmt.Fprintf(tw, "\nmodel profiles for %s:\n", c.Model)
		for _, p := range r.Profiles {
			fmt.Fprintf(tw, "%s\t%s\t%s\n", p.Pattern, p.Settings, p.Source)
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if key, _ := c.APIKey(); key == "" {
		fmt.Fprintf(w, "\nNo API key: set %s if the server needs one.\n", c.APIKeyHint())
	}
	for _, warn := range r.Warnings {
		if _, err := fmt.Fprintf(w, "\nwarning: %s\n", warn); err != nil {
			return err
		}
	}
	return nil
}

// Mask hides a key while leaving enough to tell two keys apart: "sk-a…f3c9". A short key
// shows only its last two characters, since a prefix and suffix of four would reveal most
// of it, and a key of four characters or fewer shows nothing. An empty key is "(not set)".
func Mask(key string) string {
	if key == "" {
		return "(not set)"
	}
	r := []rune(key)
	if utf8.RuneCountInString(key) < 12 {
		if len(r) <= 4 {
			return "…"
		}
		return "…" + string(r[len(r)-2:])
	}
	return string(r[:4]) + "…" + string(r[len(r)-4:])
}
