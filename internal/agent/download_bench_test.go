package agent

import (
	"context"
	"crypto/rand"
	"io"
	"os"
	"path/filepath"
	"testing"
)

// BenchmarkDownloadCopy measures the copiers of downloads against io.Copy,
// what Download used before it kept holes: on a dense file (the common
// case, where skipping zeros must cost little) and on a 90 MiB sparse one
// (the case they exist for). copySparse is what streams from Docker and
// cpuos get; copyHoles is what host files from the local backend get.
//
//	go test ./internal/agent/ -run '^$' -bench DownloadCopy -benchtime 20x
func BenchmarkDownloadCopy(b *testing.B) {
	dir := b.TempDir()
	dense := filepath.Join(dir, "dense.bin")
	data := make([]byte, 64<<20)
	_, _ = rand.Read(data)
	if err := os.WriteFile(dense, data, 0o644); err != nil {
		b.Fatal(err)
	}
	sparse := filepath.Join(dir, "sparse.bin")
	f, err := os.Create(sparse)
	if err != nil {
		b.Fatal(err)
	}
	_, _ = f.WriteAt([]byte("x"), 90<<20)
	f.Close()

	copiers := []struct {
		name string
		copy func(dst *os.File, src *os.File) error
	}{
		{"io.Copy", func(dst, src *os.File) error { _, err := io.Copy(dst, src); return err }},
		{"copySparse", func(dst, src *os.File) error {
			_, _, err := copySparse(dst, struct{ io.Reader }{src}, 1<<30, -1)
			return err
		}},
		{"copyHoles", func(dst, src *os.File) error {
			_, _, err := copyHoles(context.Background(), dst, src, 1<<30, -1)
			return err
		}},
	}
	for _, file := range []string{dense, sparse} {
		for _, c := range copiers {
			b.Run(filepath.Base(file)+"/"+c.name, func(b *testing.B) {
				fi, _ := os.Stat(file)
				b.SetBytes(fi.Size())
				for b.Loop() {
					src, err := os.Open(file)
					if err != nil {
						b.Fatal(err)
					}
					dst, err := os.Create(filepath.Join(dir, "out"))
					if err != nil {
						b.Fatal(err)
					}
					if err := c.copy(dst, src); err != nil {
						b.Fatal(err)
					}
					src.Close()
					dst.Close()
				}
			})
		}
	}
}
