package pod

import (
	"context"
	"io"

	"github.com/terpdev/terp/internal/sandbox"
)

// WriteFile creates or replaces the file at p under /work; see
// sandbox.WorkFiles.
func (s *Sandbox) WriteFile(ctx context.Context, p string, r io.Reader) error {
	f, err := s.files()
	if err != nil {
		return err
	}
	return f.WriteFile(ctx, p, r)
}

// ReadFile opens the regular file at p under /work.
func (s *Sandbox) ReadFile(ctx context.Context, p string) (io.ReadCloser, error) {
	f, err := s.files()
	if err != nil {
		return nil, err
	}
	return f.ReadFile(ctx, p)
}

// List returns the regular files under dir; see sandbox.WorkFiles.List.
func (s *Sandbox) List(ctx context.Context, dir string) ([]sandbox.FileInfo, error) {
	f, err := s.files()
	if err != nil {
		return nil, err
	}
	return f.List(ctx, dir)
}
