package local

import (
	"context"
	"io"

	"github.com/terpdev/terp/internal/sandbox"
)

// Files are read and written on the host, directly in the sandbox's work
// directory: no sandbox has to start to move a CSV in or a PNG out. The
// code may have left symlinks there; sandbox.WorkFiles resolves every path
// inside the work directory only and opens regular files only.

// errOutsideWork is wrapped by every error for a path that is not under
// /work.
var errOutsideWork = sandbox.ErrOutsideWork

// workPath turns a sandbox path into one relative to the work directory.
func workPath(p string) (string, error) { return sandbox.WorkPath(p) }

// files is the sandbox's work directory as sandbox.WorkFiles, whose new
// files and directories go to the code's uid.
func (s *Sandbox) files() sandbox.WorkFiles {
	return sandbox.WorkFiles{Dir: s.work, Chown: s.chownNew, MaxList: s.b.maxList}
}

// WriteFile creates or replaces the file at p with r's bytes, creating
// parent directories, through a temporary file renamed into place.
func (s *Sandbox) WriteFile(ctx context.Context, p string, r io.Reader) error {
	return s.files().WriteFile(ctx, p, r)
}

// ReadFile opens the regular file at p under /work.
func (s *Sandbox) ReadFile(ctx context.Context, p string) (io.ReadCloser, error) {
	return s.files().ReadFile(ctx, p)
}

// List walks dir (under /work, "" for /work itself) and returns its regular
// files; see sandbox.WorkFiles.List.
func (s *Sandbox) List(ctx context.Context, dir string) ([]sandbox.FileInfo, error) {
	return s.files().List(ctx, dir)
}
