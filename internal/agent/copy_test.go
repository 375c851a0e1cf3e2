package agent

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// sparseData is n bytes of random data with runs of zeros of every size and
// alignment, and a zero tail, so that a copier that skips zeros wrongly
// loses or shifts bytes.
func sparseData(n int) []byte {
	r := rand.New(rand.NewPCG(1, 2))
	b := make([]byte, n)
	for i := 0; i < n; {
		run := r.IntN(3 * blockSize)
		if r.IntN(2) == 0 {
			for j := i; j < min(i+run, n); j++ {
				b[j] = byte(r.IntN(255) + 1)
			}
		}
		i += run
	}
	clear(b[n-5*blockSize-7:])
	return b
}

// Both copiers must give back the source byte for byte, whatever its zeros,
// and take no disk for whole blocks of zeros.
func TestCopiersKeepEveryByte(t *testing.T) {
	dir := t.TempDir()
	data := sparseData(3<<20 + 123)
	src := filepath.Join(dir, "src")
	if err := os.WriteFile(src, data, 0o644); err != nil {
		t.Fatal(err)
	}
	copiers := map[string]func(dst, src *os.File) (int64, int64, error){
		"stream": func(dst, src *os.File) (int64, int64, error) {
			return copySparse(dst, struct{ io.Reader }{src}, 1<<30, -1)
		},
		"host file": func(dst, src *os.File) (int64, int64, error) {
			return copyHoles(context.Background(), dst, src, 1<<30, -1)
		},
	}
	for name, copyFn := range copiers {
		t.Run(name, func(t *testing.T) {
			in, _ := os.Open(src)
			defer in.Close()
			out, err := os.Create(filepath.Join(dir, "out-"+name))
			if err != nil {
				t.Fatal(err)
			}
			n, used, err := copyFn(out, in)
			out.Close()
			got, _ := os.ReadFile(out.Name())
			if err != nil || n != int64(len(data)) || !bytes.Equal(got, data) {
				t.Fatalf("copy = %d, %v; the copy differs from the source: %v", n, err, !bytes.Equal(got, data))
			}
			var st syscall.Stat_t
			_ = syscall.Stat(out.Name(), &st)
			if used > int64(len(data)) || st.Blocks*512 > used+64<<10 {
				t.Errorf("copy counted %d bytes of disk, takes %d, for %d bytes with many zero blocks", used, st.Blocks*512, len(data))
			}
		})
	}
}

// The size cap and the total are kept by both copiers, and a sparse file
// counts for its data only.
func TestCopiersKeepTheCaps(t *testing.T) {
	dir := t.TempDir()
	sparse := filepath.Join(dir, "sparse")
	f, _ := os.Create(sparse)
	_, _ = f.WriteAt([]byte("x"), 90<<20)
	f.Close()
	for _, c := range []struct {
		name          string
		limit, budget int64
		want          error
	}{
		{"fits", 100 << 20, 8 << 10, nil},
		{"over the size cap", 10 << 20, -1, ErrTooLarge},
		{"over the total", 100 << 20, 100, ErrOverTotal},
	} {
		for _, stream := range []bool{false, true} {
			in, _ := os.Open(sparse)
			out, _ := os.Create(filepath.Join(dir, "out"))
			var err error
			var used int64
			if stream {
				_, used, err = copySparse(out, struct{ io.Reader }{in}, c.limit, c.budget)
			} else {
				_, used, err = copyHoles(context.Background(), out, in, c.limit, c.budget)
			}
			in.Close()
			out.Close()
			if !errors.Is(err, c.want) || (c.want == nil && used != blockSize) {
				t.Errorf("%s (stream %v): %v, %d bytes counted; want %v, one block", c.name, stream, err, used, c.want)
			}
		}
	}
}

// The warning about files past the total names them, a bounded number of
// them, and says how to get them.
func TestDownloadsWarningNamesTheSkipped(t *testing.T) {
	d := NewDownloads(t.TempDir(), 1<<20, 1<<30)
	if w := d.Warning("abc"); w != "" {
		t.Errorf("warning with nothing skipped: %q", w)
	}
	for i := range 25 {
		d.skipped = append(d.skipped, fmt.Sprintf("out/part%02d.bin", i))
	}
	w := d.Warning("abc")
	for _, want := range []string{"25 files", "/work/out/part00.bin", "/work/out/part19.bin", "and 5 more", "1GiB",
		"--max-download-total", "TERP_MAX_DOWNLOAD_TOTAL", "terp chat --resume abc", "/download"} {
		if !strings.Contains(w, want) {
			t.Errorf("warning does not say %q: %s", want, w)
		}
	}
	if strings.Contains(w, "part20") {
		t.Errorf("warning names more than 20 files: %s", w)
	}
}
