package adversarial

import (
	"errors"
	"io"
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

// sameAsInside fails unless data is what the code in sbx reads at p: a file
// of the sandbox's own, not of the host. It must not hold the host's secret.
func sameAsInside(t *testing.T, sbx sandbox.Sandbox, p string, data []byte) {
	t.Helper()
	if hasSecret(string(data)) {
		t.Errorf("%s holds the host's secret", p)
	}
	res, err := sbx.Exec(t.Context(), []string{"cat", p}, sandbox.ExecOptions{Timeout: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if res.ExitCode != 0 || res.Stdout != string(data) {
		t.Errorf("%s read from the host (%d bytes) is not what the code reads inside (exit %d, %d bytes)", p, len(data), res.ExitCode, len(res.Stdout))
	} else {
		t.Logf("%s resolved inside the sandbox (%d bytes, same as the code sees)", p, len(data))
	}
}

// TestDownloadTricks checks that agent.Download and the sandbox's ReadFile
// and List, which run on the host, refuse every trap.
func TestDownloadTricks(t *testing.T) {
	t.Parallel()
	downloadTricks(t, newSandbox(t, sandbox.Options{}))
}

// TestDownloadTricksDocker sets the same traps in a Docker sandbox, whose
// files come out through the Engine API's archive endpoint.
func TestDownloadTricksDocker(t *testing.T) {
	t.Parallel()
	downloadTricks(t, dockerTarget(t).create(t, sandbox.Options{}))
}

// TestDownloadTricksCPUOS sets them in a cpuos sandbox, whose files cross
// HTTP and are read by the server on its own machine.
func TestDownloadTricksCPUOS(t *testing.T) {
	t.Parallel()
	downloadTricks(t, cpuosTarget(t).create(t, sandbox.Options{}))
}

// downloadTricks plants the traps in sbx and springs them from the host.
// Docker's archive endpoint resolves a link the code planted inside the
// container's own root (the daemon's FollowSymlinkInScope), never the
// host's: there a relative link into the container's /etc may be read, and
// the test checks that what comes out is exactly what the code itself sees.
func downloadTricks(t *testing.T, sbx sandbox.Sandbox) {
	inScope := kindOf(sbx) == onDocker
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
			type read struct {
				data []byte
				err  error
			}
			done := make(chan read, 1)
			go func() {
				rc, err := sbx.ReadFile(ctx, full)
				var data []byte
				if err == nil {
					data, err = io.ReadAll(io.LimitReader(rc, 1<<20))
					rc.Close()
				}
				done <- read{data, err}
			}()
			select {
			case r := <-done:
				if r.err == nil && !inScope {
					t.Errorf("ReadFile(%q) succeeded", full)
				}
				if r.err == nil && inScope {
					sameAsInside(t, sbx, full, r.data)
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
		kept := map[string]bool{}
		for _, p := range traps {
			got, _, err := agent.Download(ctx, sbx, strings.TrimPrefix(p, "/"), dir, 1<<20)
			switch {
			case err == nil && !inScope:
				t.Errorf("Download(%q) wrote %s", p, got)
			case err == nil:
				data, _ := os.ReadFile(got)
				sameAsInside(t, sbx, sandbox.WorkDir+"/"+p, data)
				if rel, rerr := filepath.Rel(dir, got); rerr != nil || strings.HasPrefix(rel, "..") {
					t.Errorf("Download(%q) wrote %s, outside %s", p, got, dir)
				}
				kept[got] = true
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
			if err == nil && !d.IsDir() && filepath.Base(p) != "fine.txt" && !kept[p] {
				t.Errorf("the download dir holds %s", p)
			}
			return nil
		})
	})
}
