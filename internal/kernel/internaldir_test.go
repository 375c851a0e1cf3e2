package kernel

import (
	"context"
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/terpdev/terp/internal/sandbox"
)

// sabotages are what code can do to terp's own directory in /work, which
// it owns like the rest of /work.
var sabotages = []struct{ name, code string }{
	{"replaced by a file", "shutil.rmtree(d)\nopen(d, 'w').write('mine')"},
	{"replaced by a symlink to /tmp", "shutil.rmtree(d)\nos.symlink('/tmp', d)"},
	{"replaced by a symlink to /etc", "shutil.rmtree(d)\nos.symlink('/etc', d)"},
	{"replaced by a dangling symlink", "shutil.rmtree(d)\nos.symlink('/nonexistent', d)"},
	{"replaced by a symlink into /work", "shutil.rmtree(d)\nos.makedirs('/work/mine')\n" +
		"for n in ('main.py', 'worker.py', 'notebook.py'):\n    open('/work/mine/' + n, 'w').write('mine')\nos.symlink('mine', d)"},
	{"removed", "shutil.rmtree(d)"},
	{"made read-only", "for n in os.listdir(d):\n    os.chmod(os.path.join(d, n), 0o555)\nos.chmod(d, 0o555)"},
	{"its files replaced by directories", "for n in ('worker.py', 'notebook.py', 'main.py'):\n    p = os.path.join(d, n)\n" +
		"    if os.path.lexists(p):\n        os.remove(p)\n    os.makedirs(os.path.join(p, 'sub'))"},
}

const sabotagePrelude = "import os, shutil\nd = '/work/.terp'\n"

// TestInternalDirRepaired breaks /work/.terp in every way the code can, in
// both modes, and checks that the next step works all the same: terp puts
// its directory back before it writes there, and never writes through a
// link the code planted.
func TestInternalDirRepaired(t *testing.T) {
	t.Parallel()
	// Each case has a sandbox of its own, so that none starts from what an
	// earlier one left.
	t.Run("kernel", func(t *testing.T) {
		t.Parallel()
		for _, tt := range sabotages {
			t.Run(tt.name, func(t *testing.T) {
				sbx := newSandbox(t)
				k := startKernel(t, sbx, Options{})
				// The worker exits after the damage, so terp must write its
				// source again to start the next one.
				res, err := k.Run(context.Background(), sabotagePrelude+tt.code+"\nos._exit(3)", time.Minute)
				if err != nil || res.ExitCode != 3 || !strings.Contains(res.Notice, "restarted") {
					t.Errorf("the damaging run: %+v, %v; want exit 3 and the restart notice", res, err)
				}
				wantOK(t, run(t, k, "print('next')\n!echo notebook"), "next\nnotebook\n")
				wantInternalDir(t, sbx, "worker.py")
				wantInternalDir(t, sbx, "notebook.py")
				wantMineKept(t, sbx)
			})
		}
	})
	t.Run("script", func(t *testing.T) {
		t.Parallel()
		for _, tt := range sabotages {
			t.Run(tt.name, func(t *testing.T) {
				sbx := newSandbox(t)
				s := startKernel(t, sbx, Options{Fresh: true})
				if _, err := s.Run(context.Background(), "pass", time.Minute); err != nil {
					t.Fatal(err)
				}
				res, err := s.Run(context.Background(), sabotagePrelude+tt.code, time.Minute)
				if err != nil || res.ExitCode != 0 {
					t.Errorf("the damaging run: %+v, %v", res, err)
				}
				res, err = s.Run(context.Background(), "print('next')", time.Minute)
				if err != nil || res.ExitCode != 0 || res.Stdout != "next\n" {
					t.Errorf("the next run: %+v, %v; want it to print next", res, err)
				}
				wantInternalDir(t, sbx, "main.py")
				wantMineKept(t, sbx)
			})
		}
	})
}

// wantMineKept fails if terp wrote its files through a link into the
// code's own /work/mine.
func wantMineKept(t testing.TB, sbx sandbox.Sandbox) {
	t.Helper()
	for _, n := range []string{"main.py", "worker.py", "notebook.py"} {
		rc, err := sbx.ReadFile(context.Background(), "/work/mine/"+n)
		if err != nil {
			continue // not this case
		}
		b, _ := io.ReadAll(rc)
		rc.Close()
		if string(b) != "mine" {
			t.Errorf("terp wrote its %s through the link, over /work/mine/%s", n, n)
		}
	}
}

// wantInternalDir fails unless /work/.terp is a directory holding file.
func wantInternalDir(t testing.TB, sbx sandbox.Sandbox, file string) {
	t.Helper()
	files, err := sbx.List(context.Background(), "/work/"+InternalDir)
	if err != nil {
		t.Fatalf("/work/%s: %v", InternalDir, err)
	}
	if !slices.ContainsFunc(files, func(f sandbox.FileInfo) bool { return f.Path == file }) {
		t.Errorf("/work/%s lacks %s: %v", InternalDir, file, files)
	}
}
