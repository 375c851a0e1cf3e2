package export

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"
	"sync"
)

// WriteNotebook writes d as a Jupyter notebook (nbformat 4.5) that runs
// again, top to bottom, in a directory that holds copies of the uploads at
// their paths relative to /work: that directory stands in for /work, and
// string literals in the code that begin with /work/ are made relative to
// it. Each run is a code cell with the outputs terp recorded (cut in the
// middle where they were long); what the user and the model wrote are
// Markdown cells, with any HTML in them shown as text.
func WriteNotebook(w io.Writer, d *Doc) error {
	nb := &notebookWriter{kernel: d.ExecMode != "script"}
	nb.steps(d)
	nb.cells = append([]any{nb.intro(d)}, nb.cells...)
	if len(d.Inputs) > 0 {
		nb.cells = append(nb.cells[:1], append([]any{nb.setup(d.Inputs)}, nb.cells[1:]...)...)
	}
	for i, c := range nb.cells {
		id := fmt.Sprintf("cell-%d", i+1)
		switch c := c.(type) {
		case *textCell:
			c.ID = id
		case *codeCell:
			c.ID = id
		}
	}
	doc := map[string]any{
		"nbformat":       4,
		"nbformat_minor": 5,
		"metadata": map[string]any{
			"kernelspec":    map[string]any{"name": "python3", "display_name": "Python 3 (ipykernel)", "language": "python"},
			"language_info": map[string]any{"name": "python"},
			"terp":          map[string]any{"id": d.ID, "model": d.Model, "exec_mode": d.ExecMode},
		},
		"cells": nb.cells,
	}
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", " ")
	return enc.Encode(doc)
}

// textCell is a Markdown or a raw cell.
type textCell struct {
	ID       string         `json:"id"`
	CellType string         `json:"cell_type"`
	Metadata map[string]any `json:"metadata"`
	Source   []string       `json:"source"`
}

// codeCell is a code cell; a nil ExecutionCount is JSON's null, which
// nbformat requires to be there.
type codeCell struct {
	ID             string           `json:"id"`
	CellType       string           `json:"cell_type"`
	ExecutionCount *int             `json:"execution_count"`
	Metadata       map[string]any   `json:"metadata"`
	Outputs        []map[string]any `json:"outputs"`
	Source         []string         `json:"source"`
}

// notebookWriter gathers the cells of the turns, and what the intro must
// say about them.
type notebookWriter struct {
	kernel    bool // the runs shared one Python session
	cells     []any
	count     int  // the last execution count given
	rewritten bool // some code had /work/ paths made relative
}

func (nb *notebookWriter) markdown(text string) {
	nb.cells = append(nb.cells, &textCell{CellType: "markdown", Metadata: map[string]any{}, Source: lines(text)})
}

func (nb *notebookWriter) steps(d *Doc) {
	for ti, t := range d.Turns {
		if t.Question != "" || len(t.Notes) > 0 {
			var q strings.Builder
			fmt.Fprintf(&q, "## Question %d\n", ti+1)
			if t.Question != "" {
				q.WriteString("\n" + quoteBlock(markdown(t.Question)) + "\n")
			}
			for _, n := range t.Notes {
				q.WriteString("\n*(" + plain(n) + ")*\n")
			}
			nb.markdown(strings.TrimSuffix(q.String(), "\n"))
		}
		for _, st := range t.Steps {
			if st.Said != "" {
				nb.markdown(markdown(st.Said))
			}
			nb.step(st)
		}
		if t.Answer != "" {
			nb.markdown("**Answer**\n\n" + markdown(t.Answer))
		}
	}
}

// step adds the cells of one run: its code with its outputs, or, for a call
// that never ran, the arguments as a raw cell, which Jupyter does not run.
func (nb *notebookWriter) step(st Step) {
	if st.Error != "" {
		nb.markdown("*This call could not run: " + plain(st.Error) + "*")
		nb.cells = append(nb.cells, &textCell{CellType: "raw", Metadata: map[string]any{}, Source: lines(st.Code)})
		return
	}
	code, changed := relativeWork(st.Code)
	nb.rewritten = nb.rewritten || changed
	c := &codeCell{CellType: "code", Metadata: map[string]any{}, Source: lines(code)}
	if nb.kernel {
		nb.count++
		n := nb.count
		c.ExecutionCount = &n
	}
	c.Outputs = outputs(st, c.ExecutionCount)
	meta := map[string]any{"exit_code": st.ExitCode}
	if st.TimedOut {
		meta["timed_out"] = true
	}
	if len(st.Saved) > 0 {
		meta["saved"] = st.Saved
	}
	c.Metadata["terp"] = meta
	nb.cells = append(nb.cells, c)
	switch {
	case st.Note != "":
		nb.markdown("*terp: " + plain(st.Note) + "*")
	case st.TimedOut:
		nb.markdown("*terp: the run timed out and was stopped.*")
	}
}

// outputs are a run's outputs as Jupyter records them: stdout, stderr,
// the images it saved, the value of its last expression (numbered count,
// as its cell), and last the exception a failed run ended with.
func outputs(st Step, count *int) []map[string]any {
	out := []map[string]any{}
	stream := func(name, text string) {
		if text != "" {
			out = append(out, map[string]any{"output_type": "stream", "name": name, "text": lines(text)})
		}
	}
	stream("stdout", st.Stdout)
	stderr, exc := st.Stderr, map[string]any(nil)
	if st.ExitCode != 0 {
		if before, tb, ename, evalue, ok := splitTraceback(st.Stderr); ok {
			stderr = before
			exc = map[string]any{"output_type": "error", "ename": ename, "evalue": evalue, "traceback": tb}
		}
	}
	stream("stderr", stderr)
	for _, img := range st.Images {
		data := map[string]any{"text/plain": []string{"<" + img.Name + ">"}}
		if img.Type == "image/svg+xml" {
			data[img.Type] = lines(string(img.Data))
		} else {
			data[img.Type] = base64.StdEncoding.EncodeToString(img.Data)
		}
		out = append(out, map[string]any{"output_type": "display_data", "data": data, "metadata": map[string]any{"terp": map[string]any{"file": img.Name}}})
	}
	if st.Value != "" {
		out = append(out, map[string]any{"output_type": "execute_result", "execution_count": count,
			"data": map[string]any{"text/plain": lines(st.Value)}, "metadata": map[string]any{}})
	}
	if exc != nil {
		out = append(out, exc)
	}
	return out
}

// intro is the first cell: what the conversation was, and what the
// notebook needs to run again.
func (nb *notebookWriter) intro(d *Doc) *textCell {
	var b strings.Builder
	title := d.Title
	if title == "" {
		title = "terp conversation " + d.ID
	}
	b.WriteString("# " + plain(strings.Join(strings.Fields(title), " ")) + "\n\n")
	b.WriteString("A conversation")
	if d.Model != "" {
		b.WriteString(" with " + plain(d.Model))
	}
	if !d.Created.IsZero() {
		b.WriteString(" on " + d.Created.UTC().Format("2 January 2006 at 15:04 UTC"))
	}
	b.WriteString(", exported from terp")
	if d.ID != "" {
		b.WriteString(" (session " + plain(d.ID) + ")")
	}
	b.WriteString(".\n\n")
	if len(d.Inputs) > 0 {
		names := make([]string, len(d.Inputs))
		for i, in := range d.Inputs {
			names[i] = plain(in)
		}
		b.WriteString("This notebook runs next to copies of: " + strings.Join(names, ", ") +
			". Put them in the notebook's directory, at these paths.\n\n")
	}
	if nb.kernel {
		b.WriteString("terp ran the code in /work, in one Python session for the whole conversation, as the cells here share one.")
	} else {
		b.WriteString("terp ran each piece of code in /work as a Python process of its own, so each cell stands alone.")
	}
	b.WriteString(" Below each cell are the outputs terp recorded, cut in the middle where they were long.")
	if nb.rewritten {
		b.WriteString("\n\nThe notebook's directory stands in for /work: string literals in the code that began with /work/ " +
			"were made relative to it ('/work/sales.csv' is now 'sales.csv', '/work' is '.').")
	}
	if len(d.Warnings) > 0 {
		b.WriteString("\n\nNot in this notebook:\n")
		for _, w := range d.Warnings {
			b.WriteString("\n- " + plain(w))
		}
	}
	return &textCell{CellType: "markdown", Metadata: map[string]any{}, Source: lines(b.String())}
}

// setup is a code cell that stops the notebook at the top when the uploads
// are not next to it, rather than at the first cell that reads one.
func (nb *notebookWriter) setup(inputs []string) *codeCell {
	quoted := make([]string, len(inputs))
	for i, in := range inputs {
		quoted[i] = strconv.Quote(in)
	}
	code := "# terp ran this conversation's code in /work, next to the uploads: here the\n" +
		"# notebook's directory stands in for /work, and must hold copies of them.\n" +
		"import os\n\n" +
		"missing = [f for f in [" + strings.Join(quoted, ", ") + "] if not os.path.exists(f)]\n" +
		"if missing:\n" +
		"    raise FileNotFoundError(\"copy these next to the notebook (in \" + os.getcwd() + \"): \" + \", \".join(missing))"
	return &codeCell{CellType: "code", Metadata: map[string]any{"terp": map[string]any{"setup": true}}, Outputs: []map[string]any{}, Source: lines(code)}
}

// lines splits s as nbformat stores text: each line keeps its newline.
func lines(s string) []string {
	out := strings.SplitAfter(s, "\n")
	if out[len(out)-1] == "" {
		out = out[:len(out)-1]
	}
	return out
}

// exceptionLine is the last line of a Python traceback: the exception's
// name, and its message when it has one.
var exceptionLine = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`^([A-Za-z_][A-Za-z0-9_.]*)(?:: (.*))?$`)
})

// splitTraceback finds the Python traceback a failed run's stderr ends
// with. before is what was printed ahead of it (warnings); tb is its lines;
// ename and evalue are read from its last line ("ZeroDivisionError:
// division by zero"). A syntax error has no "Traceback" header: its
// traceback starts at its `File "..."` line.
func splitTraceback(stderr string) (before string, tb []string, ename, evalue string, ok bool) {
	all := strings.Split(strings.TrimRight(stderr, "\n"), "\n")
	start, syntax := -1, false
	for i, l := range all {
		if l == "Traceback (most recent call last):" {
			start = i
			break
		}
	}
	if start < 0 {
		for i, l := range all {
			if strings.HasPrefix(l, `  File "`) {
				start, syntax = i, true
				break
			}
		}
	}
	if start < 0 {
		return "", nil, "", "", false
	}
	// The exception's line is the last unindented one; a message of
	// several lines runs on after it.
	for i := len(all) - 1; i > start; i-- {
		m := exceptionLine().FindStringSubmatch(all[i])
		if m == nil {
			if strings.HasPrefix(all[i], " ") {
				break
			}
			continue
		}
		if syntax && !strings.HasSuffix(m[1], "Error") {
			return "", nil, "", "", false
		}
		ename, evalue = m[1], m[2]
		if i+1 < len(all) {
			evalue = strings.Join(append([]string{evalue}, all[i+1:]...), "\n")
		}
		before = strings.Join(all[:start], "\n")
		if before != "" {
			before += "\n"
		}
		return before, all[start:], ename, evalue, true
	}
	return "", nil, "", "", false
}

// relativeWork makes the Python string literals in code that begin with
// /work relative: '/work/sales.csv' becomes 'sales.csv', '/work' '.', and
// '/work/' './'. Only a literal's start is looked at, so that a shell
// command or a message that mentions /work is left as written; comments
// are skipped. It reports whether it changed anything.
func relativeWork(code string) (string, bool) {
	var b strings.Builder
	changed := false
	for i := 0; i < len(code); {
		c := code[i]
		switch {
		case c == '#':
			end := strings.IndexByte(code[i:], '\n')
			if end < 0 {
				end = len(code) - i
			}
			b.WriteString(code[i : i+end])
			i += end
		case c == '\'' || c == '"':
			n, ch := literal(&b, code[i:])
			changed = changed || ch
			i += n
		case c == '_' || c >= 0x80 || 'a' <= c|0x20 && c|0x20 <= 'z' || '0' <= c && c <= '9':
			j := i
			for j < len(code) && (code[j] == '_' || code[j] >= 0x80 || 'a' <= code[j]|0x20 && code[j]|0x20 <= 'z' || '0' <= code[j] && code[j] <= '9') {
				j++
			}
			b.WriteString(code[i:j])
			i = j
			// A prefix (r, b, f, rb, ...) is written as the word it is;
			// the quote after it starts the literal next time round.
		default:
			b.WriteByte(c)
			i++
		}
	}
	return b.String(), changed
}

// literal writes the string literal at the start of s to b, relative to
// /work when it begins with it, and returns its length in s. A literal
// left open (the code does not compile) is written as it is.
func literal(b *strings.Builder, s string) (int, bool) {
	delim := s[:1]
	if strings.HasPrefix(s, strings.Repeat(delim, 3)) {
		delim = strings.Repeat(delim, 3)
	}
	end := -1
	for k := len(delim); k < len(s); k++ {
		if s[k] == '\\' {
			k++
			continue
		}
		if len(delim) == 1 && s[k] == '\n' {
			break
		}
		if strings.HasPrefix(s[k:], delim) {
			end = k
			break
		}
	}
	if end < 0 {
		n := len(s)
		if len(delim) == 1 {
			if nl := strings.IndexByte(s, '\n'); nl >= 0 {
				n = nl
			}
		}
		b.WriteString(s[:n])
		return n, false
	}
	body := s[len(delim):end]
	rel, ok := workRelative(body)
	if !ok {
		b.WriteString(s[:end+len(delim)])
		return end + len(delim), false
	}
	b.WriteString(delim + rel + delim)
	return end + len(delim), true
}

// workRelative is the path p, a literal's body, relative to /work, when it
// starts with /work.
func workRelative(p string) (string, bool) {
	switch {
	case p == "/work":
		return ".", true
	case strings.HasPrefix(p, "/work/"):
		rest := strings.TrimLeft(p[len("/work/"):], "/")
		if rest == "" {
			return "./", true
		}
		return rest, true
	}
	return "", false
}

// quoteBlock makes Markdown a block quote, every line of it, so that
// nothing in it (a fence) ends the quote early.
func quoteBlock(md string) string {
	ls := strings.Split(md, "\n")
	for i, l := range ls {
		if l == "" {
			ls[i] = ">"
		} else {
			ls[i] = "> " + l
		}
	}
	return strings.Join(ls, "\n")
}

// htmlEscaper writes the three characters that would let text be read as
// HTML as entities, which Markdown shows as the characters.
var htmlEscaper = strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;")

// plainEscaper also escapes what Markdown would read as markup in text that
// is no Markdown of anybody's: a file name, an error, terp's note.
var plainEscaper = strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;",
	`\`, `\\`, "`", "\\`", "*", `\*`, "_", `\_`, "[", `\[`, "]", `\]`, "$", `\$`, "|", `\|`, "~", `\~`, "\n", " ")

// plain is text for a Markdown cell that shows as written, on one line.
func plain(s string) string { return plainEscaper.Replace(s) }

// fenceOpen is a fenced code block's first line, at the start of a line:
// Markdown renderers agree on that one whatever came before it. An
// indented fence (in a list) is not taken for one, so what follows it is
// escaped: shown with its entities in the worst case, never as HTML.
var fenceOpen = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile("^(`{3,}|~{3,})(.*)$")
})

// markdown keeps the Markdown the user or the model wrote, but escapes `<`,
// `>` and `&` outside code, so that no HTML of theirs is rendered: Jupyter
// renders raw HTML in Markdown cells, sanitized, and the notebook should
// not depend on that. Code (fenced blocks, and code spans within a line) is
// left as written, as Markdown shows it literally anyway. Wherever this
// and a renderer might disagree on what is code, this takes it for text.
func markdown(s string) string {
	ls := strings.Split(s, "\n")
	fence := ""
	for i, l := range ls {
		if fence != "" {
			if closesFence(l, fence) {
				fence = ""
			}
			continue
		}
		if m := fenceOpen().FindStringSubmatch(l); m != nil && (m[1][0] == '~' || !strings.Contains(m[2], "`")) {
			fence = m[1]
			continue
		}
		ls[i] = escapeLine(l)
	}
	return strings.Join(ls, "\n")
}

// closesFence reports whether l may close a block opened with fence, by
// any renderer's rule (the open fence, then fence characters or spaces), so
// that no text after it is left unescaped.
func closesFence(l, fence string) bool {
	t := strings.TrimLeft(l, " ")
	if len(l)-len(t) > 3 || !strings.HasPrefix(t, fence) {
		return false
	}
	return strings.Trim(t, "`~ \t") == ""
}

// escapeLine escapes a line outside its code spans: a run of backticks
// not escaped by a backslash, up to the next run as long, with no `|` in
// between (a table's cells are split at `|` before code spans are found).
func escapeLine(l string) string {
	var b strings.Builder
	text := 0 // start of the text not yet written
	for i := 0; i < len(l); {
		if l[i] != '`' {
			i++
			continue
		}
		n := run(l, i)
		if backslashes(l, i)%2 == 1 {
			i += n
			continue
		}
		end := -1
		for k := i + n; k < len(l); {
			if l[k] != '`' {
				k++
				continue
			}
			if m := run(l, k); m != n {
				k += m
				continue
			}
			end = k
			break
		}
		if end < 0 || strings.Contains(l[i:end], "|") {
			i += n
			continue
		}
		b.WriteString(htmlEscaper.Replace(l[text:i]))
		b.WriteString(l[i : end+n])
		i = end + n
		text = i
	}
	b.WriteString(htmlEscaper.Replace(l[text:]))
	return b.String()
}

// run is the length of the run of backticks at l[i].
func run(l string, i int) int {
	n := 0
	for i+n < len(l) && l[i+n] == '`' {
		n++
	}
	return n
}

// backslashes counts the backslashes just before l[i].
func backslashes(l string, i int) int {
	n := 0
	for i-n > 0 && l[i-n-1] == '\\' {
		n++
	}
	return n
}
