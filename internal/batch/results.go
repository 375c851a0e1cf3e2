package batch

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sync"

	"github.com/terpdev/terp/internal/fsext"
)

// ResultsFile is the --out file: one Result per line. Lines are appended as
// runs finish, each with one write to the file, so a terp that is killed
// leaves every result that finished before it; Finish then rewrites the file
// in plan order, so a completed (or interrupted, but not killed) batch gives
// the same file whatever order the runs finished in.
type ResultsFile struct {
	path string
	mu   sync.Mutex
	f    *os.File
}

// CreateResults creates, or empties, the results file at path.
func CreateResults(path string) (*ResultsFile, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	return &ResultsFile{path: path, f: f}, nil
}

// Append writes one result as a line.
func (w *ResultsFile) Append(r Result) error {
	var line bytes.Buffer
	if err := WriteLines(&line, []Result{r}); err != nil {
		return err
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	_, err := w.f.Write(line.Bytes())
	return err
}

// Finish replaces the file with results, in plan order, atomically: a
// temporary file renamed over it.
func (w *ResultsFile) Finish(results []Result) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.f.Close()
	sorted := append([]Result(nil), results...)
	Sort(sorted)
	err := fsext.WriteFile(w.path, 0o644, func(out io.Writer) error { return WriteLines(out, sorted) })
	if err != nil {
		return fmt.Errorf("write %s: %w", w.path, err)
	}
	return nil
}

// WriteLines writes results as JSON Lines. An answer's <, > and & stay as
// they are, for people who read the file.
func WriteLines(w io.Writer, results []Result) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	for _, r := range results {
		if err := enc.Encode(r); err != nil {
			return err
		}
	}
	return nil
}
