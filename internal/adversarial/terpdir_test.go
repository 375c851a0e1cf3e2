package adversarial

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/terpdev/terp/internal/kernel"
)

// TestHostileTerpDir replaces /work/.terp, terp's own directory, with a
// symlink to a directory on the host, which means nothing inside the
// sandbox but everything to terp, which writes its files there from the
// host. terp must neither write through the link nor stop working: it
// removes the link and recreates its directory before the next step, in
// script mode (main.py) and in kernel mode (worker.py, written again for a
// restarted worker).
func TestHostileTerpDir(t *testing.T) {
	t.Parallel()
	for _, mode := range []kernel.Mode{kernel.ModeScript, kernel.ModeKernel} {
		t.Run(string(mode), func(t *testing.T) {
			t.Parallel()
			target := t.TempDir()
			plant := "import os, shutil\nshutil.rmtree('/work/.terp', ignore_errors=True)\nos.symlink(" +
				pyQuote(target) + ", '/work/.terp')\n"
			sbx := newSandbox(t, small)
			k, err := kernel.Start(context.Background(), sbx, kernel.Options{Fresh: mode == kernel.ModeScript})
			if err != nil {
				t.Fatal(err)
			}
			if mode == kernel.ModeKernel {
				// The worker dies after planting, so terp must write its
				// source again.
				plant += "os._exit(3)\n"
			}
			t.Cleanup(func() { _ = k.Close() })

			if _, err := k.Run(t.Context(), "print('first')", 30*time.Second); err != nil {
				t.Fatal(err)
			}
			if _, err := k.Run(t.Context(), plant, 30*time.Second); err != nil {
				t.Errorf("the planting run: %v", err)
			}
			res, err := k.Run(t.Context(), "import os\nprint('next', os.path.islink('/work/.terp'))", 30*time.Second)
			if err != nil || strings.TrimSpace(res.Stdout) != "next False" {
				t.Errorf("the next step: %+v, %v; want it to work in a real /work/.terp", res, err)
			}
			if entries, _ := os.ReadDir(target); len(entries) > 0 {
				t.Errorf("terp wrote through the planted link into the host's %s: %v", target, entries)
			}
		})
	}
}

// pyQuote quotes s as a Python string literal.
func pyQuote(s string) string {
	return "'" + strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(s) + "'"
}
