package local

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/terpdev/terp/internal/sandbox"
	"github.com/terpdev/terp/internal/terptest"
)

func TestFilesRoundTrip(t *testing.T) {
	t.Parallel()
	s := newSandbox(t, sandbox.Options{})
	writeFile(t, s, "a.csv", "a\n1\n")
	writeFile(t, s, "/work/sub/b.csv", "b\n2\n")
	writeFile(t, s, "sub/deeper/c.txt", "c")
	writeFile(t, s, "a.csv", "a\n1\n2\n") // replaces

	// The code can read and change what terp wrote, and terp can read what
	// the code wrote: the uid inside maps to terp's.
	code := `
print(open("/work/a.csv").read(), end="")
with open("/work/sub/b.csv", "a") as f:
    f.write("3\n")
import os
os.makedirs("/work/out", exist_ok=True)
open("/work/out/result.txt", "w").write("42")
`
	res := runPython(t, s, "main.py", code, sandbox.ExecOptions{})
	if res.ExitCode != 0 || res.Stdout != "a\n1\n2\n" {
		t.Fatalf("exit %d, stdout %q, stderr %q", res.ExitCode, res.Stdout, res.Stderr)
	}
	if got := readFile(t, s, "sub/b.csv"); got != "b\n2\n3\n" {
		t.Errorf("sub/b.csv = %q", got)
	}
	if got := readFile(t, s, "/work/out/result.txt"); got != "42" {
		t.Errorf("out/result.txt = %q", got)
	}

	files, err := s.List(t.Context(), "")
	if err != nil {
		t.Fatal(err)
	}
	var paths []string
	for _, f := range files {
		paths = append(paths, f.Path)
		if f.ModTime.IsZero() || !f.Mode.IsRegular() || time.Since(f.ModTime) > time.Minute {
			t.Errorf("%s: mode %v, mtime %v", f.Path, f.Mode, f.ModTime)
		}
		if f.Path == "out/result.txt" && f.Size != 2 {
			t.Errorf("out/result.txt: size %d, want 2", f.Size)
		}
	}
	want := []string{"a.csv", "main.py", "out/result.txt", "sub/b.csv", "sub/deeper/c.txt"}
	if !slices.Equal(paths, want) {
		t.Errorf("List(\"\") = %v, want %v", paths, want)
	}

	files, err = s.List(t.Context(), "/work/sub")
	if err != nil {
		t.Fatal(err)
	}
	paths = paths[:0]
	for _, f := range files {
		paths = append(paths, f.Path)
	}
	if want := []string{"b.csv", "deeper/c.txt"}; !slices.Equal(paths, want) {
		t.Errorf("List(\"/work/sub\") = %v, want %v", paths, want)
	}
}

func TestFilesPathTraversal(t *testing.T) {
	t.Parallel()
	s := newSandbox(t, sandbox.Options{})
	for _, p := range []string{
		"../escape.txt",
		"sub/../../escape.txt",
		"/etc/passwd",
		"/work/../escape.txt",
		"/workshop/a.txt",
		"/",
	} {
		if err := s.WriteFile(t.Context(), p, strings.NewReader("x")); !errors.Is(err, errOutsideWork) {
			t.Errorf("WriteFile(%q) = %v, want an error about leaving /work", p, err)
		}
		if _, err := s.ReadFile(t.Context(), p); !errors.Is(err, errOutsideWork) {
			t.Errorf("ReadFile(%q) = %v, want an error about leaving /work", p, err)
		}
		if _, err := s.List(t.Context(), p); !errors.Is(err, errOutsideWork) {
			t.Errorf("List(%q) = %v, want an error about leaving /work", p, err)
		}
	}
	if _, err := os.Stat(filepath.Join(s.dir, "escape.txt")); err == nil {
		t.Error("a write escaped the work directory")
	}
	for _, p := range []string{"", "/work", "."} {
		if _, err := s.ReadFile(t.Context(), p); err == nil {
			t.Errorf("ReadFile(%q) succeeded on the work directory", p)
		}
	}
}

// TestFilesSymlinkEscape plays hostile code: it plants symlinks to host
// paths (which do not exist inside the sandbox but do on the host, where
// terp reads), to / and to a FIFO, and checks that terp neither reads, nor
// writes, nor walks through them.
func TestFilesSymlinkEscape(t *testing.T) {
	t.Parallel()
	s := newSandbox(t, sandbox.Options{})
	hostDir := terptest.TempDir(t)
	target := filepath.Join(hostDir, "host-secret.txt")
	if err := os.WriteFile(target, []byte("host secret"), 0o644); err != nil {
		t.Fatal(err)
	}
	writeFile(t, s, "real.txt", "real")

	code := `
import os
os.symlink(` + pyString(target) + `, "/work/secret")
os.symlink(` + pyString(target) + `, "/work/overwrite")
os.symlink("/", "/work/rootlink")
os.symlink("..", "/work/up")
os.symlink("real.txt", "/work/inside")
os.mkdir("/work/d")
os.symlink(` + pyString(hostDir) + `, "/work/d/hostdir")
os.mkfifo("/work/fifo")
print("planted")
`
	if res := runPython(t, s, "main.py", code, sandbox.ExecOptions{}); res.Stdout != "planted\n" {
		t.Fatalf("stdout %q, stderr %q", res.Stdout, res.Stderr)
	}

	for _, p := range []string{
		"secret", "inside", "fifo", "d",
		"rootlink" + target, "up/etc/passwd", "d/hostdir/host-secret.txt",
	} {
		done := make(chan error, 1)
		go func() {
			rc, err := s.ReadFile(t.Context(), p)
			if err == nil {
				rc.Close()
			}
			done <- err
		}()
		select {
		case err := <-done:
			if err == nil {
				t.Errorf("ReadFile(%q) succeeded", p)
			}
			t.Logf("ReadFile(%q): %v", p, err)
		case <-time.After(5 * time.Second):
			t.Fatalf("ReadFile(%q) hangs", p)
		}
	}

	// Writing through a symlink replaces the link; the host file is intact.
	writeFile(t, s, "overwrite", "pwned?")
	if err := s.WriteFile(t.Context(), "rootlink"+target, strings.NewReader("pwned?")); err == nil {
		t.Errorf("WriteFile through a symlink to / succeeded")
	}
	if err := s.WriteFile(t.Context(), "d/hostdir/host-secret.txt", strings.NewReader("pwned?")); err == nil {
		t.Errorf("WriteFile through a symlinked directory succeeded")
	}
	if data, _ := os.ReadFile(target); string(data) != "host secret" {
		t.Errorf("the host file now holds %q", data)
	}
	if fi, err := os.Lstat(filepath.Join(s.HostDir(), "overwrite")); err != nil || !fi.Mode().IsRegular() {
		t.Errorf("overwrite is not a regular file after WriteFile: %v, %v", fi, err)
	}

	files, err := s.List(t.Context(), "")
	if err != nil {
		t.Fatal(err)
	}
	var paths []string
	for _, f := range files {
		paths = append(paths, f.Path)
	}
	if want := []string{"main.py", "overwrite", "real.txt"}; !slices.Equal(paths, want) {
		t.Errorf("List = %v, want only the regular files %v", paths, want)
	}
	for _, dir := range []string{"rootlink", "up", "d/hostdir"} {
		if files, err := s.List(t.Context(), dir); err == nil {
			t.Errorf("List(%q) followed a symlink: %d files", dir, len(files))
		}
	}
}

// pyString quotes s as a Python string literal (Go's quoting is a subset for
// the paths used here).
func pyString(s string) string { return `"` + strings.ReplaceAll(s, `"`, `\"`) + `"` }

// TestListKeepsTheNewest: past its bound List returns the most recently
// modified files and says how many there were.
func TestListKeepsTheNewest(t *testing.T) {
	t.Parallel()
	b, err := New(Config{Root: testBackend.Root()})
	if err != nil {
		t.Fatal(err)
	}
	b.maxList = 10
	sb, err := b.Create(t.Context(), sandbox.Options{})
	if err != nil {
		t.Fatal(err)
	}
	s := sb.(*Sandbox)
	t.Cleanup(func() { _ = s.Close(context.Background()) })
	res := runPython(t, s, "make.py", `import os
for i in range(30):
    open(f"/work/old{i:02d}", "w").write("x")
    os.utime(f"/work/old{i:02d}", (1e9 + i, 1e9 + i))
open("/work/new.csv", "w").write("a")`, sandbox.ExecOptions{})
	if res.ExitCode != 0 {
		t.Fatal(res.Stderr)
	}
	files, err := s.List(t.Context(), "")
	var cut *sandbox.TruncatedError
	if !errors.As(err, &cut) || cut.Total != 32 || cut.Listed != 10 || len(files) != 10 {
		t.Fatalf("List = %d files, %v; want 10 of 32 (old*, make.py, new.csv) and a TruncatedError", len(files), err)
	}
	names := map[string]bool{}
	for _, f := range files {
		names[f.Path] = true
	}
	for _, want := range []string{"new.csv", "make.py", "old29", "old22"} {
		if !names[want] {
			t.Errorf("the newest files %v lack %s", names, want)
		}
	}
}
