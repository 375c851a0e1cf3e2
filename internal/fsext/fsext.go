// Package fsext holds what terp needs of the file system that the standard
// library lacks.
package fsext

import (
	"io"
	"os"
	"path/filepath"
)

// WriteFile replaces path with what write writes, atomically: into a
// temporary file beside it, synced, given perm and renamed over it, and the
// rename synced. A crash or an error at any moment leaves the old file or
// the new one whole, never a mix, and no temporary file behind.
func WriteFile(path string, perm os.FileMode, write func(io.Writer) error) error {
	dir := filepath.Dir(path)
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name()) // fails harmlessly after the rename
	err = write(tmp)
	if err == nil {
		err = tmp.Sync()
	}
	if err == nil {
		err = tmp.Chmod(perm)
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err == nil {
		err = SyncDir(dir)
	}
	return err
}

// SyncDir makes the renames and removals in dir durable.
func SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
