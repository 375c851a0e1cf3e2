package memory

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"strings"
	"sync"
	"time"

	"github.com/terpdev/terp/internal/sandbox"
)

// errOutsideWork is wrapped by every error for a path that is not under
// /work, the only directory a memory sandbox has.
var errOutsideWork = errors.New("path is outside " + sandbox.WorkDir)

// errRemoved is a closed sandbox's answer to everything.
var errRemoved = errors.New("the sandbox is closed")

// errWorkFull is a command's write that would grow /work past
// Limits.WorkBytes.
var errWorkFull = errors.New("no space left in " + sandbox.WorkDir)

// workPath turns p into a path relative to /work ("." for /work itself),
// resolving a relative p against dir, an absolute directory. /mnt/data is
// /work under its other name, as in the real backends. It refuses anything
// outside /work, ".." escapes included, as the real backends do.
func workPath(dir, p string) (string, error) {
	abs := p
	if !path.IsAbs(abs) {
		abs = path.Join(dir, abs)
	}
	rest, ok := strings.CutPrefix(path.Clean(sandbox.WorkName(abs)), sandbox.WorkDir)
	if !ok || (rest != "" && rest[0] != '/') {
		return "", fmt.Errorf("%q: %w", p, errOutsideWork)
	}
	if rest = strings.TrimPrefix(rest, "/"); rest == "" {
		return ".", nil
	}
	return rest, nil
}

// filePath is workPath for something that must be a file, not /work.
func filePath(dir, p string) (string, error) {
	rel, err := workPath(dir, p)
	if err == nil && rel == "." {
		err = fmt.Errorf("%q is the work directory, not a file", p)
	}
	return rel, err
}

// tree is a sandbox's /work: directories and regular files, by path
// relative to /work. A file's bytes are never changed in place, only
// replaced, so a reader keeps what it opened.
type tree struct {
	mu      sync.Mutex
	removed bool
	nodes   map[string]*node // /work itself is not in it
	used    int64            // bytes the files hold, for Limits.WorkBytes
	last    time.Time        // the latest ModTime given
}

type node struct {
	dir  bool
	data []byte
	mod  time.Time
}

func newTree() *tree { return &tree{nodes: make(map[string]*node)} }

// stamp is a ModTime later than every one before it, so that "most
// recently modified" (sandbox.Newest) is the order files were written in
// even when the clock has not moved between two writes.
func (t *tree) stamp() time.Time {
	now := time.Now().Round(0)
	if !now.After(t.last) {
		now = t.last.Add(time.Nanosecond)
	}
	t.last = now
	return now
}

func (t *tree) remove() {
	t.mu.Lock()
	t.removed, t.nodes, t.used = true, nil, 0
	t.mu.Unlock()
}

// parentsOK fails when something on the way to rel is a file.
func (t *tree) parentsOK(rel string) error {
	for d := path.Dir(rel); d != "."; d = path.Dir(d) {
		if n := t.nodes[d]; n != nil && !n.dir {
			return fmt.Errorf("%s/%s is a file, not a directory", sandbox.WorkDir, d)
		}
	}
	return nil
}

// mkdirs makes rel and its parents directories; parentsOK has passed.
func (t *tree) mkdirs(rel string) {
	for d := rel; d != "."; d = path.Dir(d) {
		if t.nodes[d] == nil {
			t.nodes[d] = &node{dir: true, mod: t.stamp()}
		}
	}
}

// write makes rel a file holding data, which the caller gives up, making
// its parents. limit, when positive, refuses growth past that many bytes
// in all.
func (t *tree) write(rel string, data []byte, limit int64) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.removed {
		return errRemoved
	}
	if err := t.parentsOK(rel); err != nil {
		return err
	}
	old := t.nodes[rel]
	if old != nil && old.dir {
		return fmt.Errorf("%s/%s is a directory", sandbox.WorkDir, rel)
	}
	grow := int64(len(data))
	if old != nil {
		grow -= int64(len(old.data))
	}
	if limit > 0 && grow > 0 && t.used+grow > limit {
		return errWorkFull
	}
	t.mkdirs(path.Dir(rel))
	t.nodes[rel] = &node{data: data, mod: t.stamp()}
	t.used += grow
	return nil
}

// read returns rel's bytes, which the caller must not change.
func (t *tree) read(rel string) ([]byte, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.removed {
		return nil, errRemoved
	}
	n := t.nodes[rel]
	switch {
	case n == nil:
		return nil, &fs.PathError{Op: "read", Path: path.Join(sandbox.WorkDir, rel), Err: fs.ErrNotExist}
	case n.dir:
		return nil, fmt.Errorf("%s/%s is a directory", sandbox.WorkDir, rel)
	}
	return n.data, nil
}

func (t *tree) mkdirAll(rel string) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.removed {
		return errRemoved
	}
	if rel == "." {
		return nil
	}
	if err := t.parentsOK(path.Join(rel, "x")); err != nil {
		return err
	}
	t.mkdirs(rel)
	return nil
}

// removeAll removes rel, and everything in it if it is a directory.
func (t *tree) removeAll(rel string) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.removed {
		return errRemoved
	}
	if rel == "." {
		return fmt.Errorf("%s itself cannot be removed", sandbox.WorkDir)
	}
	for p, n := range t.nodes {
		if p == rel || strings.HasPrefix(p, rel+"/") {
			t.used -= int64(len(n.data))
			delete(t.nodes, p)
		}
	}
	return nil
}

// isDir reports whether rel is a directory; /work always is.
func (t *tree) isDir(rel string) (bool, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.removed {
		return false, errRemoved
	}
	n := t.nodes[rel]
	return rel == "." || (n != nil && n.dir), nil
}

// list returns the regular files under rel with paths relative to it: past
// limit, the most recently modified, with a *sandbox.TruncatedError.
func (t *tree) list(rel string, limit int) ([]sandbox.FileInfo, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.removed {
		return nil, errRemoved
	}
	prefix := ""
	if rel != "." {
		n := t.nodes[rel]
		switch {
		case n == nil:
			return nil, &fs.PathError{Op: "list", Path: path.Join(sandbox.WorkDir, rel), Err: fs.ErrNotExist}
		case !n.dir:
			return nil, fmt.Errorf("%s/%s is not a directory", sandbox.WorkDir, rel)
		}
		prefix = rel + "/"
	}
	files := sandbox.NewNewest(limit)
	for p, n := range t.nodes {
		sub, ok := strings.CutPrefix(p, prefix)
		if !ok || n.dir {
			continue
		}
		files.Add(sandbox.FileInfo{Path: sub, Size: int64(len(n.data)), Mode: 0o644, ModTime: n.mod})
	}
	return files.Files()
}

// FS is the sandbox's /work as one running command sees it. Relative paths
// are resolved against the command's working directory; nothing outside
// /work exists. Once the command has ended (it returned, timed out, or was
// killed, paused or closed) every method fails: whatever goroutine a
// program left behind can no longer touch the sandbox, as nothing a real
// command forks outlives it.
type FS struct {
	files *tree
	dir   string
	run   *run
	limit int64 // Limits.WorkBytes
}

// ReadFile returns a copy of the file at name.
func (f *FS) ReadFile(name string) ([]byte, error) {
	var data []byte
	err := f.do(name, func(rel string) error {
		d, err := f.files.read(rel)
		data = append([]byte(nil), d...)
		return err
	})
	return data, err
}

// WriteFile makes the file at name hold data, making its parent
// directories. A write that would grow /work past Limits.WorkBytes fails
// and stops the command, as the real backends stop code that fills /work.
func (f *FS) WriteFile(name string, data []byte) error {
	err := f.do(name, func(rel string) error {
		if rel == "." {
			return fmt.Errorf("%s is a directory", sandbox.WorkDir)
		}
		return f.files.write(rel, bytes.Clone(data), f.limit)
	})
	if errors.Is(err, errWorkFull) {
		f.run.stopFor(fmt.Sprintf("%s would grow past the sandbox's %d-byte limit (max_work_size), so terp stopped the code",
			sandbox.WorkDir, f.limit))
	}
	return err
}

// MkdirAll makes the directory name and its parents.
func (f *FS) MkdirAll(name string) error {
	return f.do(name, f.files.mkdirAll)
}

// RemoveAll removes name and, if it is a directory, all it holds. A name
// that does not exist is not an error.
func (f *FS) RemoveAll(name string) error {
	return f.do(name, f.files.removeAll)
}

// List returns the regular files under dir, as Sandbox.List does.
func (f *FS) List(dir string) ([]sandbox.FileInfo, error) {
	var files []sandbox.FileInfo
	err := f.do(dir, func(rel string) error {
		var err error
		files, err = f.files.list(rel, 0)
		return err
	})
	return files, err
}

// do runs op on name's path under /work while the command runs.
func (f *FS) do(name string, op func(rel string) error) error {
	rel, err := workPath(f.dir, name)
	if err != nil {
		return err
	}
	return f.run.gate.do(func() error { return op(rel) })
}
