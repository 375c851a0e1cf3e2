package local

import (
	"fmt"
	"os"
)

// loadFilter compiles the seccomp filter once per Backend, or says why the
// sandbox runs without one. A bubblewrap without --seccomp (older than any
// distribution ships today) still gets a sandbox, with the namespaces,
// capabilities and limits doing the work alone; `terp doctor` says so.
func loadFilter(f bwrapFeatures) ([]byte, string) {
	if !f.seccomp {
		return nil, "this bubblewrap has no --seccomp option"
	}
	filter, err := seccompFilter()
	if err != nil {
		return nil, err.Error()
	}
	return filter, ""
}

// Seccomp says whether commands run under terp's seccomp filter and, when
// they do not, why.
func (b *Backend) Seccomp() (on bool, why string) {
	return b.filter != nil, b.noFilter
}

// filterPipe returns a pipe holding the compiled filter for one bwrap to read
// on --seccomp, or nil when the filter is off. bwrap reads to end of file, so
// each command needs its own descriptor. The filter (at most 4096
// instructions, 32 KiB) fits in a pipe's buffer, so writing never blocks.
func (b *Backend) filterPipe() (*os.File, error) {
	if b.filter == nil {
		return nil, nil
	}
	r, w, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("seccomp filter: %w", err)
	}
	_, err = w.Write(b.filter)
	if cerr := w.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		r.Close()
		return nil, fmt.Errorf("seccomp filter: %w", err)
	}
	return r, nil
}
