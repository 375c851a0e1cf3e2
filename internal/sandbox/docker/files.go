package docker

import (
	"archive/tar"
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"strings"
	"time"

	"github.com/terpdev/terp/internal/sandbox"
)

// Files move as tar streams through the Engine API's archive endpoint
// (docker cp). /work is a volume, so the daemon writes into it even though
// the container's root is read-only, and what it writes is what the code
// sees: copying into a tmpfs would land in the image's directory under the
// mount instead. Entries carry the sandbox user's uid and gid, so the code
// owns what terp uploads.

// workPath cleans p and makes sure it names something under WorkDir (or
// DataDir, its other name).
func workPath(p string) (string, error) {
	p = sandbox.WorkName(p)
	if !path.IsAbs(p) {
		p = path.Join(sandbox.WorkDir, p)
	}
	p = path.Clean(p)
	if p != sandbox.WorkDir && !strings.HasPrefix(p, sandbox.WorkDir+"/") {
		return "", fmt.Errorf("%s is outside %s", p, sandbox.WorkDir)
	}
	return p, nil
}

// WriteFile creates or replaces p, and its missing parent directories, with
// r's bytes. A reader of unknown length is spooled to a temporary file
// first, because a tar header states the size before the content.
func (s *Sandbox) WriteFile(ctx context.Context, p string, r io.Reader) error {
	p, err := workPath(p)
	if err != nil {
		return fmt.Errorf("write file: %w", err)
	}
	if p == sandbox.WorkDir {
		return fmt.Errorf("write file: %s is a directory", p)
	}
	if err := s.usableErr(); err != nil {
		return err
	}
	size, body, cleanup, err := sized(r)
	if err != nil {
		return fmt.Errorf("write file %s: %w", p, err)
	}
	defer cleanup()

	// Unpack where the file's directory is if it exists, so that its mode
	// (the code's business) is left alone; otherwise from WorkDir with the
	// missing directories in the archive.
	dest := path.Dir(p)
	st, err := s.b.eng.ContainerStatPath(ctx, s.containerID, dest)
	switch {
	case err != nil && !isNotFound(err):
		return fmt.Errorf("write file %s: %w", p, s.execError(ctx, err))
	case err != nil:
		dest = sandbox.WorkDir
	case st.Mode&fs.ModeSymlink != 0 || st.LinkTarget != "":
		// The code made the directory a link (/work/.terp to /work/mine):
		// terp's file would land over the code's, or a user's.
		return fmt.Errorf("write file %s: %s is a symlink, and terp writes through no link", p, dest)
	}
	rel := strings.TrimPrefix(strings.TrimPrefix(p, dest), "/")

	pr, pw := io.Pipe()
	go func() {
		pw.CloseWithError(s.writeTar(pw, rel, size, body))
	}()
	err = s.b.eng.CopyToContainer(ctx, s.containerID, dest, pr)
	pr.CloseWithError(errors.New("copy ended"))
	if err != nil {
		return fmt.Errorf("write file %s: %w", p, s.execError(ctx, err))
	}
	return nil
}

// writeTar writes an archive holding the directories of rel and then rel
// itself, all owned by the sandbox's user.
func (s *Sandbox) writeTar(w io.Writer, rel string, size int64, body io.Reader) error {
	tw := tar.NewWriter(w)
	now := time.Now()
	dirs := strings.Split(rel, "/")
	for i := 1; i < len(dirs); i++ {
		if err := tw.WriteHeader(&tar.Header{
			Typeflag: tar.TypeDir, Name: strings.Join(dirs[:i], "/") + "/", Mode: 0o755,
			Uid: s.b.uid, Gid: s.b.gid, ModTime: now,
		}); err != nil {
			return err
		}
	}
	if err := tw.WriteHeader(&tar.Header{
		Typeflag: tar.TypeReg, Name: rel, Mode: 0o644, Size: size,
		Uid: s.b.uid, Gid: s.b.gid, ModTime: now,
	}); err != nil {
		return err
	}
	if n, err := io.Copy(tw, body); err != nil {
		return err
	} else if n != size {
		return fmt.Errorf("the reader gave %d bytes, not %d", n, size)
	}
	return tw.Close()
}

// sized returns r's length and a reader for its content, spooling r to a
// temporary file when its length is not known up front.
func sized(r io.Reader) (int64, io.Reader, func(), error) {
	nop := func() {}
	switch v := r.(type) {
	case *bytes.Reader:
		return int64(v.Len()), v, nop, nil
	case *strings.Reader:
		return int64(v.Len()), v, nop, nil
	case *bytes.Buffer:
		return int64(v.Len()), v, nop, nil
	case *os.File:
		if fi, err := v.Stat(); err == nil && fi.Mode().IsRegular() {
			if off, err := v.Seek(0, io.SeekCurrent); err == nil {
				return fi.Size() - off, v, nop, nil
			}
		}
	}
	f, err := os.CreateTemp("", "terp-upload-*")
	if err != nil {
		return 0, nil, nop, err
	}
	cleanup := func() { f.Close(); os.Remove(f.Name()) }
	n, err := io.Copy(f, r)
	if err == nil {
		_, err = f.Seek(0, io.SeekStart)
	}
	if err != nil {
		cleanup()
		return 0, nil, nop, err
	}
	return n, f, cleanup, nil
}

// ReadFile opens p for reading, following symbolic links inside the
// container (they cannot point outside it). The caller closes it. A missing
// file is an error wrapping fs.ErrNotExist.
func (s *Sandbox) ReadFile(ctx context.Context, p string) (io.ReadCloser, error) {
	p, err := workPath(p)
	if err != nil {
		return nil, fmt.Errorf("read file: %w", err)
	}
	for range 8 {
		content, err := s.b.eng.CopyFromContainer(ctx, s.containerID, p)
		if isNotFound(err) {
			return nil, fmt.Errorf("read file %s: %w", p, fs.ErrNotExist)
		}
		if err != nil {
			return nil, fmt.Errorf("read file %s: %w", p, s.execError(ctx, err))
		}
		tr := tar.NewReader(content)
		h, err := tr.Next()
		if err != nil {
			content.Close()
			return nil, fmt.Errorf("read file %s: %w", p, err)
		}
		switch h.Typeflag {
		case tar.TypeReg:
			return &tarFile{Reader: bufio.NewReaderSize(tr, 64<<10), c: content}, nil
		case tar.TypeSymlink:
			content.Close()
			target := h.Linkname
			if !path.IsAbs(target) {
				target = path.Join(path.Dir(p), target)
			}
			p = path.Clean(target)
			continue
		case tar.TypeDir:
			content.Close()
			return nil, fmt.Errorf("read file %s: is a directory", p)
		default:
			content.Close()
			return nil, fmt.Errorf("read file %s: not a regular file", p)
		}
	}
	return nil, fmt.Errorf("read file %s: too many symbolic links", p)
}

// tarFile is the one file of an archive being read from the daemon.
type tarFile struct {
	*bufio.Reader
	c io.Closer
}

func (f *tarFile) Close() error { return f.c.Close() }

// List walks dir and returns its regular files. It runs list.py in the
// container: reading the tree through the archive endpoint would stream
// every file's content too.
func (s *Sandbox) List(ctx context.Context, dir string) ([]sandbox.FileInfo, error) {
	dir, err := workPath(dir)
	if err != nil {
		return nil, fmt.Errorf("list: %w", err)
	}
	if err := s.usableErr(); err != nil {
		return nil, err
	}
	// The listing is read as it streams, into a bounded set: /work may hold
	// millions of files.
	out := &listWriter{files: sandbox.NewNewest(0)}
	code, err := s.b.simpleExec(ctx, s.containerID, s.b.cfg.User, []string{"python3", "-I", "-S", "-c", listPy, dir}, nil, out)
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", dir, s.execError(ctx, err))
	}
	switch code {
	case 0:
	case 3:
		return nil, fmt.Errorf("list %s: %w", dir, fs.ErrNotExist)
	case 4:
		return nil, fmt.Errorf("list %s: not a directory", dir)
	default:
		return nil, fmt.Errorf("list %s: exit %d: %s", dir, code, strings.TrimSpace(string(out.partial)))
	}
	if out.err != nil {
		return nil, fmt.Errorf("list %s: %w", dir, out.err)
	}
	return out.files.Files()
}

// listWriter takes list.py's output, one JSON object a line, into files.
type listWriter struct {
	files   *sandbox.Newest
	partial []byte // a line not yet ended
	err     error  // the first line that did not decode
}

func (w *listWriter) Write(p []byte) (int, error) {
	n := len(p)
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			if len(w.partial)+len(p) > 64<<10 {
				w.err = errors.New("list.py wrote a line over 64 KiB")
				return n, nil
			}
			w.partial = append(w.partial, p...)
			break
		}
		line := append(w.partial, p[:i]...)
		w.partial = w.partial[:0]
		p = p[i+1:]
		var f struct {
			Path  string `json:"path"`
			Size  int64  `json:"size"`
			Mode  uint32 `json:"mode"`
			MTime int64  `json:"mtime"`
		}
		if err := json.Unmarshal(line, &f); err != nil {
			if w.err == nil {
				w.err = fmt.Errorf("%q: %w", line, err)
			}
			continue
		}
		w.files.Add(sandbox.FileInfo{
			Path: f.Path, Size: f.Size, Mode: fs.FileMode(f.Mode & 0o777), ModTime: time.Unix(0, f.MTime),
		})
	}
	return n, nil
}
