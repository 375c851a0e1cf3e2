package agent_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/terpdev/terp/internal/agent"
	"github.com/terpdev/terp/internal/sandbox"
)

// makeSparse has the code in sbx write files the way the report did:
// a seek far past the start, then one byte, so each file is 90 MiB long and
// takes a few kilobytes of disk.
func makeSparse(t *testing.T, sbx sandbox.Sandbox, names ...string) {
	t.Helper()
	code := "import sys\nfor n in sys.argv[1:]:\n    f = open(n, 'wb'); f.write(b'head'); f.seek(90 << 20); f.write(b'x'); f.close()\n"
	res, err := sbx.Exec(t.Context(), append([]string{"python3", "-c", code}, names...), sandbox.ExecOptions{Timeout: time.Minute})
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("make sparse files: %v %+v", err, res)
	}
}

// onDisk is what the host file p takes on disk, in bytes.
func onDisk(t *testing.T, p string) int64 {
	t.Helper()
	var st syscall.Stat_t
	if err := syscall.Stat(p, &st); err != nil {
		t.Fatal(err)
	}
	return st.Blocks * 512
}

func TestDownloadKeepsHoles(t *testing.T) {
	sbx := newSandbox(t)
	makeSparse(t, sbx, "sparse.bin")
	dir := t.TempDir()
	p, n, err := agent.Download(context.Background(), sbx, "sparse.bin", dir, 100<<20)
	if err != nil || n != 90<<20+1 {
		t.Fatalf("Download = %s, %d, %v", p, n, err)
	}
	if used := onDisk(t, p); used > 1<<20 {
		t.Errorf("the 90 MiB sparse file takes %d bytes on the host, want its holes kept (a few KiB)", used)
	}
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	fi, _ := f.Stat()
	head, mid, tail := make([]byte, 4), make([]byte, 4), make([]byte, 1)
	_, _ = f.ReadAt(head, 0)
	_, _ = f.ReadAt(mid, 45<<20)
	_, _ = f.ReadAt(tail, 90<<20)
	if fi.Size() != 90<<20+1 || string(head) != "head" || string(mid) != "\x00\x00\x00\x00" || string(tail) != "x" {
		t.Errorf("downloaded file: size %d, head %q, middle %q, last byte %q; want the sandbox's bytes", fi.Size(), head, mid, tail)
	}
}

// The temporary name must fit in NAME_MAX even when the real name uses all
// of it.
func TestDownloadLongestName(t *testing.T) {
	sbx := newSandbox(t)
	name := strings.Repeat("n", 251) + ".csv"
	if err := sbx.WriteFile(context.Background(), "/work/"+name, strings.NewReader("a,b\n")); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	p, n, err := agent.Download(context.Background(), sbx, name, dir, 1<<20)
	if err != nil || n != 4 || p != filepath.Join(dir, name) {
		t.Fatalf("Download of a 255-byte name = %s, %d, %v", p, n, err)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Errorf("output directory holds %d entries, want only the file", len(entries))
	}
}

// A download never replaces a file already in the output directory: it
// takes the first free numbered name, and a copy identical to the file
// there is not kept twice.
func TestDownloadKeepsTheFileAlreadyThere(t *testing.T) {
	sbx := newSandbox(t)
	long := strings.Repeat("n", 251) + ".csv"
	tests := []struct{ name, next string }{
		{"chart.png", "chart-1.png"},
		{"archive.tar.gz", "archive-1.tar.gz"},
		{"data.v2.csv", "data.v2-1.csv"},
		{".env", ".env-1"},
		{"Makefile", "Makefile-1"},
		{"plots/a.png", "plots/a-1.png"},
		{long, strings.Repeat("n", 249) + "-1.csv"},
	}
	for _, tt := range tests {
		t.Run(tt.name[:min(len(tt.name), 20)], func(t *testing.T) {
			dir := t.TempDir()
			if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, tt.name)), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, tt.name), []byte("the user's"), 0o644); err != nil {
				t.Fatal(err)
			}
			if err := sbx.WriteFile(t.Context(), "/work/"+tt.name, strings.NewReader("the model's")); err != nil {
				t.Fatal(err)
			}
			p, _, err := agent.Download(t.Context(), sbx, tt.name, dir, 1<<20)
			if err != nil || p != filepath.Join(dir, tt.next) {
				t.Fatalf("Download = %s, %v; want %s", p, err, filepath.Join(dir, tt.next))
			}
			if b, _ := os.ReadFile(filepath.Join(dir, tt.name)); string(b) != "the user's" {
				t.Errorf("the file already there now holds %q", b)
			}
			if b, _ := os.ReadFile(p); string(b) != "the model's" {
				t.Errorf("the download holds %q", b)
			}
			// The same bytes again: the copy already made is the answer.
			if again, _, err := agent.Download(t.Context(), sbx, tt.name, dir, 1<<20); err != nil || again != p {
				t.Errorf("second Download = %s, %v; want %s again", again, err, p)
			}
			entries, _ := os.ReadDir(filepath.Dir(p))
			if len(entries) != 2 {
				t.Errorf("%s holds %d entries, want the two files and no temporary one", filepath.Dir(p), len(entries))
			}
		})
	}
}

// A link the code or anyone planted under the name is a name taken, never
// a way to write elsewhere.
func TestDownloadDoesNotWriteThroughALink(t *testing.T) {
	sbx := newSandbox(t)
	dir, elsewhere := t.TempDir(), filepath.Join(t.TempDir(), "target")
	if err := os.Symlink(elsewhere, filepath.Join(dir, "out.txt")); err != nil {
		t.Fatal(err)
	}
	if err := sbx.WriteFile(t.Context(), "/work/out.txt", strings.NewReader("x")); err != nil {
		t.Fatal(err)
	}
	p, _, err := agent.Download(t.Context(), sbx, "out.txt", dir, 1<<20)
	if err != nil || p != filepath.Join(dir, "out-1.txt") {
		t.Fatalf("Download = %s, %v", p, err)
	}
	if _, err := os.Lstat(elsewhere); err == nil {
		t.Error("the download went through the link")
	}
}
