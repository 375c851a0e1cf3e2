package sandbox

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"syscall"
)

// WorkFiles is the file access of a backend whose /work is a directory terp
// reaches directly (Dir): the local backend's work directory on the host,
// and the pod backend's /work inside the pod. Its methods are the
// Sandbox interface's WriteFile, ReadFile and List.
type WorkFiles struct {
	// Dir is where /work is, as terp sees it.
	Dir string
	// Chown, when set, gives what terp creates to the code's uid.
	Chown func(root *os.Root, paths ...string) error
	// MaxList bounds List; 0 means MaxListEntries.
	MaxList int
}

func (w WorkFiles) chown(root *os.Root, paths ...string) error {
	if w.Chown == nil {
		return nil
	}
	return w.Chown(root, paths...)
}

// Files are read and written on the host, directly in the sandbox's work
// directory: no sandbox has to start to move a CSV in or a PNG out. The
// directory belongs to the code, though, and the code may be hostile: it can
// replace /work/out.png with a symlink to /etc/shadow or /work/d with one to
// /, and a host-side os.Open would follow it with terp's privileges. So every
// access goes through an os.Root, which resolves paths inside the work
// directory only, and files are opened only if they are regular files (not
// symlinks, FIFOs that would block, or devices).

// ErrOutsideWork is wrapped by every error for a path that is not under
// /work.
var ErrOutsideWork = errors.New("path is outside " + WorkDir)

// WorkPath turns a sandbox path ("/work/a.csv", "/mnt/data/a.csv", "a.csv",
// "sub/a.csv") into a path relative to the work directory, or fails if it
// leaves /work.
func WorkPath(p string) (string, error) {
	p = WorkName(p)
	rel := p
	if path.IsAbs(p) {
		rest, ok := strings.CutPrefix(path.Clean(p), WorkDir)
		if !ok || (rest != "" && rest[0] != '/') {
			return "", fmt.Errorf("%q: %w", p, ErrOutsideWork)
		}
		rel = strings.TrimPrefix(rest, "/")
		if rel == "" {
			rel = "."
		}
	}
	rel = path.Clean(rel)
	if !filepath.IsLocal(rel) {
		return "", fmt.Errorf("%q: %w", p, ErrOutsideWork)
	}
	return rel, nil
}

// filePath is workPath for something that must be a file, not /work itself.
func filePath(p string) (string, error) {
	rel, err := WorkPath(p)
	if err == nil && rel == "." {
		err = fmt.Errorf("%q is the work directory, not a file", p)
	}
	return rel, err
}

// WriteFile creates or replaces the file at p with r's bytes, creating parent
// directories. It writes a temporary file and renames it into place, so a
// symlink the code left at p is replaced, not followed, and a reader never
// sees half a file.
func (w WorkFiles) WriteFile(ctx context.Context, p string, r io.Reader) (err error) {
	rel, err := filePath(p)
	if err != nil {
		return fmt.Errorf("write %s: %w", p, err)
	}
	defer func() {
		if err != nil {
			err = fmt.Errorf("write %s: %w", p, err)
		}
	}()
	root, err := os.OpenRoot(w.Dir)
	if err != nil {
		return err
	}
	defer root.Close()

	dir := path.Dir(rel)
	if err := noLinkOnPath(root, dir); err != nil {
		return err
	}
	if err := root.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if err := w.chown(root, parents(dir)...); err != nil {
		return err
	}
	suffix := rand.Text()
	tmp := path.Join(dir, ".terp-upload-"+suffix)
	f, err := root.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return err
	}
	_, err = io.Copy(f, ContextReader(ctx, r))
	if err == nil {
		err = w.chown(root, tmp)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = root.Rename(tmp, rel)
	}
	if err != nil {
		_ = root.Remove(tmp)
	}
	return err
}

// noLinkOnPath refuses a directory on the way to a file that is a symlink.
// os.Root keeps a link from leading out of /work, but one inside it (code
// that made /work/.terp a link to /work/mine) would have terp write its
// files over the code's, or a user's. Directories that do not exist yet
// are made by MkdirAll.
func noLinkOnPath(root *os.Root, dir string) error {
	if dir == "." {
		return nil
	}
	parts := strings.Split(dir, "/")
	for i := range parts {
		p := path.Join(parts[:i+1]...)
		fi, err := root.Lstat(p)
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil {
			return err
		}
		if fi.Mode()&fs.ModeSymlink != 0 {
			return fmt.Errorf("%s/%s is a symlink, and terp writes through no link", WorkDir, p)
		}
	}
	return nil
}

// parents lists dir and the directories above it, up to but without the
// work directory itself: "a/b" gives "a" and "a/b".
func parents(dir string) []string {
	var out []string
	for d := dir; d != "." && d != "/"; d = path.Dir(d) {
		out = append(out, d)
	}
	return out
}

// ReadFile opens the file at p, which must be a regular file under /work
// ("/work/a.csv", "a.csv" and "sub/a.csv" are all fine): a symlink
// is refused even if it points inside /work, since whatever the model asked
// for, it did not ask for the target.
func (w WorkFiles) ReadFile(ctx context.Context, p string) (io.ReadCloser, error) {
	rel, err := filePath(p)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", p, err)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	root, err := os.OpenRoot(w.Dir)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", p, err)
	}
	defer root.Close()

	before, err := root.Lstat(rel)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", p, err)
	}
	if !before.Mode().IsRegular() {
		return nil, fmt.Errorf("read %s: %w", p, notRegular(before.Mode()))
	}
	// O_NONBLOCK: if the code swapped in a FIFO since the Lstat, opening it
	// must not hang terp.
	f, err := root.OpenFile(rel, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", p, err)
	}
	after, err := f.Stat()
	if err != nil || !after.Mode().IsRegular() || !os.SameFile(before, after) {
		f.Close()
		return nil, fmt.Errorf("read %s: the file changed while it was opened", p)
	}
	return f, nil
}

func notRegular(m fs.FileMode) error {
	switch {
	case m&fs.ModeSymlink != 0:
		return errors.New("is a symlink; only regular files are read")
	case m.IsDir():
		return errors.New("is a directory")
	default:
		return fmt.Errorf("is not a regular file (%s)", m.Type())
	}
}

// List walks dir (a path under /work, "" for /work itself) and returns its
// regular files, with paths relative to dir: past MaxListEntries,
// the most recently modified, with a *TruncatedError.
// Symlinks are skipped and never followed, so a link to / cannot make terp
// walk the host. Directories the walk cannot read are skipped.
func (w WorkFiles) List(ctx context.Context, dir string) ([]FileInfo, error) {
	if dir == "" {
		dir = WorkDir
	}
	rel, err := WorkPath(dir)
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", dir, err)
	}
	root, err := os.OpenRoot(w.Dir)
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", dir, err)
	}
	defer root.Close()
	if rel != "." {
		fi, err := root.Lstat(rel)
		if err != nil {
			return nil, fmt.Errorf("list %s: %w", dir, err)
		}
		if !fi.IsDir() {
			return nil, fmt.Errorf("list %s: not a directory", dir)
		}
	}
	sub, err := root.OpenRoot(rel)
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", dir, err)
	}
	defer sub.Close()

	files := NewNewest(w.MaxList)
	err = fs.WalkDir(sub.FS(), ".", func(p string, d fs.DirEntry, err error) error {
		if cerr := ctx.Err(); cerr != nil {
			return cerr
		}
		if err != nil {
			if p == "." {
				return err
			}
			return fs.SkipDir
		}
		// The entry type comes from the directory listing, without
		// following links: symlinks are neither regular files nor
		// directories, so they are neither listed nor walked into.
		if !d.Type().IsRegular() {
			return nil
		}
		info, err := d.Info()
		if err != nil || !info.Mode().IsRegular() {
			return nil
		}
		files.Add(FileInfo{
			Path:    p,
			Size:    info.Size(),
			Mode:    info.Mode(),
			ModTime: info.ModTime(),
		})
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", dir, err)
	}
	return files.Files()
}

// WorkUsage is the disk the work directory dir takes: the blocks its files and directories
// hold, each hard-linked file once. Entries the walk cannot read are
// skipped.
func WorkUsage(dir string) int64 {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return 0
	}
	defer root.Close()
	type inode struct{ dev, ino uint64 }
	seen := make(map[inode]bool)
	var total int64
	_ = fs.WalkDir(root.FS(), ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return nil
		}
		st, ok := info.Sys().(*syscall.Stat_t)
		if !ok {
			return nil
		}
		if st.Nlink > 1 && !info.IsDir() {
			k := inode{st.Dev, st.Ino}
			if seen[k] {
				return nil
			}
			seen[k] = true
		}
		total += st.Blocks * 512
		return nil
	})
	return total
}
