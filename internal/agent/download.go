package agent

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"

	"github.com/terpdev/terp/internal/sandbox"
)

// ErrTooLarge is returned by Download for a file over the size cap.
var ErrTooLarge = errors.New("file is over the download size cap")

// Download copies the sandbox file rel (relative to /work) to the same
// relative path under dir and returns the host path. The name comes from code
// the model wrote, so it is resolved through os.Root: no "..", absolute path
// or symlink planted in dir can lead the write outside it. The file is written
// to a temporary name and renamed, so an interrupted download never leaves a
// half file under the real name. Files over maxBytes are refused.
func Download(ctx context.Context, sbx sandbox.Sandbox, rel string, dir string, maxBytes int64) (string, int64, error) {
	if !filepath.IsLocal(filepath.FromSlash(rel)) {
		return "", 0, fmt.Errorf("download %q: not a path inside %s", rel, sandbox.WorkDir)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", 0, err
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return "", 0, err
	}
	defer root.Close()

	src, err := sbx.ReadFile(ctx, path.Join(sandbox.WorkDir, rel))
	if err != nil {
		return "", 0, fmt.Errorf("download %s: %w", rel, err)
	}
	defer src.Close()

	local := filepath.FromSlash(rel)
	if d := filepath.Dir(local); d != "." {
		if err := root.MkdirAll(d, 0o755); err != nil {
			return "", 0, fmt.Errorf("download %s: %w", rel, err)
		}
	}
	tmp := local + ".terp-partial"
	dst, err := root.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return "", 0, fmt.Errorf("download %s: %w", rel, err)
	}
	n, err := io.Copy(dst, io.LimitReader(src, maxBytes+1))
	if cerr := dst.Close(); err == nil {
		err = cerr
	}
	if err == nil && n > maxBytes {
		err = fmt.Errorf("%s: %w (%d bytes)", rel, ErrTooLarge, maxBytes)
	}
	if err == nil {
		err = root.Rename(tmp, local)
	}
	if err != nil {
		_ = root.Remove(tmp)
		return "", 0, err
	}
	return filepath.Join(dir, local), n, nil
}
