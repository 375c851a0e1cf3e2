package export

import (
	"fmt"
	"io"
	"path"
	"strings"
)

// Asset is a file a Markdown export links to, written beside it.
type Asset struct {
	// Path is where it goes, relative to the Markdown file.
	Path string
	Data []byte
}

// WriteMarkdown writes d as Markdown for an issue or a wiki: each question,
// each run's code and output in fenced blocks, its charts as image links
// into the directory assets (relative to the Markdown file), and each
// answer. It returns the images to write there. The model's text keeps its
// Markdown, but not its HTML: a < is written as &lt;, so no tag of its
// reaches a renderer that would pass it on.
func WriteMarkdown(w io.Writer, d *Doc, assets string) ([]Asset, error) {
	var b strings.Builder
	title := d.Title
	if strings.TrimSpace(title) == "" {
		title = "terp conversation " + d.ID
	}
	fmt.Fprintf(&b, "# %s\n\n", mdInline(title))
	meta := []string{"terp conversation " + d.ID}
	if d.Model != "" {
		meta = append(meta, mdInline(d.Model))
	}
	if !d.Created.IsZero() {
		meta = append(meta, d.Created.UTC().Format("2006-01-02 15:04 UTC"))
	}
	if len(d.Inputs) > 0 {
		meta = append(meta, "uploads: "+codeList(d.Inputs))
	}
	fmt.Fprintf(&b, "_%s_\n", strings.Join(meta, " · "))

	var out []Asset
	written := map[string]string{} // image name, its path
	for i, t := range d.Turns {
		if len(d.Turns) > 1 {
			fmt.Fprintf(&b, "\n## Question %d\n", i+1)
		} else {
			b.WriteString("\n## Question\n")
		}
		if t.Question != "" {
			fmt.Fprintf(&b, "\n%s\n", quoted(t.Question))
		}
		for _, n := range t.Notes {
			fmt.Fprintf(&b, "\n_(%s)_\n", mdInline(n))
		}
		for j, st := range t.Steps {
			fmt.Fprintf(&b, "\n### Step %d\n", j+1)
			if st.Said != "" {
				fmt.Fprintf(&b, "\n%s\n", text(st.Said))
			}
			fmt.Fprintf(&b, "\n%s", fenced("python", st.Code))
			if st.Error != "" {
				fmt.Fprintf(&b, "\nThe call could not run: %s\n", mdInline(st.Error))
			}
			if out := st.Printed(); out != "" {
				fmt.Fprintf(&b, "\n%s", fenced("text", out))
			}
			if st.Stderr != "" {
				fmt.Fprintf(&b, "\nstderr:\n\n%s", fenced("text", st.Stderr))
			}
			if status := runStatus(st); status != "" {
				fmt.Fprintf(&b, "\n%s\n", status)
			}
			if st.Note != "" {
				fmt.Fprintf(&b, "\n_%s_\n", mdInline(st.Note))
			}
			for _, img := range st.Images {
				p, ok := written[img.Name]
				if !ok {
					p = path.Join(assets, img.Name)
					written[img.Name] = p
					out = append(out, Asset{Path: p, Data: img.Data})
				}
				fmt.Fprintf(&b, "\n![%s](%s)\n", mdInline(img.Name), linkPath(p))
			}
			if others := notImages(st); len(others) > 0 {
				fmt.Fprintf(&b, "\nSaved %s.\n", codeList(others))
			}
		}
		if t.Answer != "" {
			fmt.Fprintf(&b, "\n### Answer\n\n%s\n", text(t.Answer))
		}
	}
	if len(d.Saved) > 0 {
		fmt.Fprintf(&b, "\n## Files the code saved\n\n")
		for _, f := range d.Saved {
			fmt.Fprintf(&b, "- %s\n", codeList([]string{"/work/" + f}))
		}
	}
	_, err := io.WriteString(w, b.String())
	return out, err
}

// runStatus says how a run ended, when not well.
func runStatus(st Step) string {
	switch {
	case st.TimedOut:
		return fmt.Sprintf("Stopped: the run timed out (exit status %d).", st.ExitCode)
	case st.ExitCode != 0:
		return fmt.Sprintf("Exit status %d.", st.ExitCode)
	}
	return ""
}

// notImages are the files a step saved that it shows no image of.
func notImages(st Step) []string {
	shown := map[string]bool{}
	for _, img := range st.Images {
		shown[img.Name] = true
	}
	var out []string
	for _, f := range st.Saved {
		if !shown[f] {
			out = append(out, f)
		}
	}
	return out
}

// fenced is s in a fenced code block of lang, the fence longer than any
// run of backticks in s.
func fenced(lang, s string) string {
	fence := "```"
	for strings.Contains(s, fence) {
		fence += "`"
	}
	return fence + lang + "\n" + strings.TrimRight(s, "\n") + "\n" + fence + "\n"
}

// text is the model's prose: its Markdown kept, its HTML disarmed.
func text(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;").Replace(strings.TrimSpace(s))
}

// quoted is the user's question as a block quote.
func quoted(s string) string {
	lines := strings.Split(text(s), "\n")
	for i, l := range lines {
		lines[i] = strings.TrimRight("> "+l, " ")
	}
	return strings.Join(lines, "\n")
}

// mdInline is text for one line: a heading, an alt text, a note.
func mdInline(s string) string {
	return strings.NewReplacer("\n", " ", "\r", " ", "[", "\\[", "]", "\\]", "*", "\\*", "_", "\\_", "`", "\\`").Replace(text(s))
}

// codeList is names as code spans, joined with commas.
func codeList(names []string) string {
	out := make([]string, len(names))
	for i, n := range names {
		tick := "`"
		for strings.Contains(n, tick) {
			tick += "`"
		}
		pad := ""
		if strings.HasPrefix(n, "`") || strings.HasSuffix(n, "`") {
			pad = " "
		}
		out[i] = tick + pad + strings.ReplaceAll(n, "\n", " ") + pad + tick
	}
	return strings.Join(out, ", ")
}

// linkPath is a relative path as a link destination: in angle brackets,
// which allow spaces, with what would end them escaped.
func linkPath(p string) string {
	return "<" + strings.NewReplacer("<", "%3C", ">", "%3E", "\n", "%0A").Replace(p) + ">"
}
