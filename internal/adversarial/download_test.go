package adversarial

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/terpdev/terp/internal/agent"
	"github.com/terpdev/terp/internal/sandbox"
)

// plantLinks is code that leaves traps in /work for whoever reads it from
// the host: symlinks to host files and directories (absolute ones resolve on
// the host, where the sandbox's / does not apply), a FIFO that would block a
// reader, and a sparse file over the download cap.
const plantLinks = `import os
os.symlink("/etc/passwd", "/work/x")
os.symlink("/", "/work/d")
os.symlink("../..", "/work/up")
os.symlink(%q, "/work/hostsecret")
os.makedirs("/work/sub", exist_ok=True)
os.symlink("../../..", "/work/sub/escape")
os.mkfifo("/work/fifo")
with open("/work/big.bin", "wb") as f:
    f.truncate(2 << 20)
with open("/work/fine.txt", "w") as f:
    f.write("fine")
print("planted")
`

// TestDownloadTricks checks that agent.Download and the sandbox's ReadFile
// and List, which run on the host, refuse every trap.
func TestDownloadTricks(t *testing.T) {
	t.Parallel()
	sbx := newSandbox(t, sandbox.Options{})
	res := runScript(t, sbx, strings.Replace(plantLinks, "%q", `"`+host.tmpSecret+`"`, 1), 30*time.Second)
	if !strings.Contains(res.Stdout, "planted") {
		t.Fatalf("the traps were not planted: %s %s", res.Stdout, res.Stderr)
	}
	ctx := t.Context()
	traps := []string{"x", "d/etc/passwd", "d/etc/hostname", "up/sandbox.json", "hostsecret",
		"sub/escape/etc/passwd", "fifo", "../sandbox.json", "../../etc/passwd", "/etc/passwd"}

	t.Run("ReadFile", func(t *testing.T) {
		for _, p := range traps {
			full := p
			if !strings.HasPrefix(p, "/") {
				full = sandbox.WorkDir + "/" + p
			}
			done := make(chan error, 1)
			go func() {
				rc, err := sbx.ReadFile(ctx, full)
				if err == nil {
					rc.Close()
				}
				done <- err
			}()
			select {
			case err := <-done:
				if err == nil {
					t.Errorf("ReadFile(%q) succeeded", full)
				}
			case <-time.After(5 * time.Second):
				t.Fatalf("ReadFile(%q) blocked", full)
			}
		}
	})
	t.Run("List", func(t *testing.T) {
		files, err := sbx.List(ctx, sandbox.WorkDir)
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range files {
			switch {
			case f.Path == "fine.txt", f.Path == "big.bin", strings.HasPrefix(f.Path, ".terp/"):
			default:
				t.Errorf("List shows %q (%v)", f.Path, f.Mode)
			}
		}
	})
	t.Run("Download", func(t *testing.T) {
		dir := t.TempDir()
		for _, p := range traps {
			if got, _, err := agent.Download(ctx, sbx, strings.TrimPrefix(p, "/"), dir, 1<<20); err == nil {
				t.Errorf("Download(%q) wrote %s", p, got)
			}
		}
		if _, _, err := agent.Download(ctx, sbx, "big.bin", dir, 1<<20); !errors.Is(err, agent.ErrTooLarge) {
			t.Errorf("Download(big.bin) over the cap: %v, want ErrTooLarge", err)
		}
		if p, n, err := agent.Download(ctx, sbx, "fine.txt", dir, 1<<20); err != nil || n != 4 {
			t.Errorf("Download(fine.txt) after the traps: %s, %d, %v", p, n, err)
		}
		// Only the good file landed, and no partial file was left.
		_ = filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
			if err == nil && !d.IsDir() && filepath.Base(p) != "fine.txt" {
				t.Errorf("the download dir holds %s", p)
			}
			return nil
		})
	})
}
