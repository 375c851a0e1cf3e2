package agent

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"
	"unicode/utf8"

	"golang.org/x/sys/unix"

	"github.com/terpdev/terp/internal/sandbox"
)

// ErrTooLarge is returned by Download for a file over the size cap.
var ErrTooLarge = errors.New("file is over the download size cap")

// ErrOverTotal is returned by Downloads.Get for a file that would take the
// turn's downloads past their total.
var ErrOverTotal = errors.New("the turn's downloads would go over max_download_total")

// Download copies the sandbox file rel (relative to /work) to the same
// relative path under dir and returns the host path and the file's length.
// It is Downloads.Get for a single file with no total.
func Download(ctx context.Context, sbx sandbox.Sandbox, rel string, dir string, maxBytes int64) (string, int64, error) {
	return NewDownloads(dir, maxBytes, 0).Get(ctx, sbx, rel)
}

// Downloads are one turn's downloads into one directory. Each file is held
// to a size cap, and all of them together to a total counted in the bytes
// they take on the host's disk: the code can write files of any length that
// take no room in the sandbox (a seek and one byte), and the user's disk is
// what the total protects. A file that does not fit is skipped, and the
// skipped files are named in Warning, so that nothing goes missing silently.
type Downloads struct {
	dir      string
	maxFile  int64
	maxTotal int64 // 0: no total
	used     int64
	skipped  []string
}

// NewDownloads returns downloads into dir of files up to maxFile bytes long
// each, taking at most maxTotal bytes of disk in all (0: no total).
func NewDownloads(dir string, maxFile, maxTotal int64) *Downloads {
	return &Downloads{dir: dir, maxFile: maxFile, maxTotal: maxTotal}
}

// Get copies the sandbox file rel (relative to /work) to the same relative
// path under the directory and returns the host path and the file's length.
// A file of that name already there is never overwritten: it may be the
// user's, or an earlier run's result (a second `ask -o out`, a later turn
// that saves chart.png again). The copy then takes the first free numbered
// name, chart-1.png, chart-2.png, and the path returned says which; a copy
// identical to the file already there is dropped and that file's path
// returned, so asking for the same file twice does not pile up copies.
//
// The name comes from code the model wrote, so it is resolved through
// os.Root: no "..", absolute path or symlink planted in the directory can
// lead the write outside it. The file is written to a short temporary name
// in the same directory and then linked to its name, so an interrupted
// download never leaves a half file under the real name, and a name that already uses all of
// NAME_MAX still has a temporary name that fits. Holes in the file stay
// holes on the host (see copySparse). A file over the size cap fails with
// ErrTooLarge; one that would take the downloads past their total fails
// with ErrOverTotal and is remembered for Warning.
func (d *Downloads) Get(ctx context.Context, sbx sandbox.Sandbox, rel string) (string, int64, error) {
	if !filepath.IsLocal(filepath.FromSlash(rel)) {
		return "", 0, fmt.Errorf("download %q: not a path inside %s", rel, sandbox.WorkDir)
	}
	if err := os.MkdirAll(d.dir, 0o755); err != nil {
		return "", 0, err
	}
	root, err := os.OpenRoot(d.dir)
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
	if dir := filepath.Dir(local); dir != "." {
		if err := root.MkdirAll(dir, 0o755); err != nil {
			return "", 0, fmt.Errorf("download %s: %w", rel, err)
		}
	}
	tmp, dst, err := createTemp(root, filepath.Dir(local))
	if err != nil {
		return "", 0, fmt.Errorf("download %s: %w", rel, err)
	}
	budget := int64(-1)
	if d.maxTotal > 0 {
		budget = max(d.maxTotal-d.used, 0)
	}
	var n, used int64
	if f, ok := src.(*os.File); ok {
		n, used, err = copyHoles(ctx, dst, f, d.maxFile, budget)
	} else {
		n, used, err = copySparse(dst, sandbox.ContextReader(ctx, src), d.maxFile, budget)
	}
	if cerr := dst.Close(); err == nil {
		err = cerr
	}
	var placed string
	if err == nil {
		placed, err = place(root, tmp, local)
	}
	switch {
	case err == nil:
		d.used += used
		return filepath.Join(d.dir, placed), n, nil
	case errors.Is(err, ErrTooLarge):
		err = fmt.Errorf("%s: %w (%d bytes)", rel, ErrTooLarge, d.maxFile)
	case errors.Is(err, ErrOverTotal):
		d.skipped = append(d.skipped, rel)
		err = fmt.Errorf("%s: %w (%s)", rel, ErrOverTotal, sizeText(d.maxTotal))
	default:
		err = fmt.Errorf("download %s: %w", rel, err)
	}
	_ = root.Remove(tmp)
	return "", 0, err
}

// maxNumbered is how many numbered names place tries before it gives up.
const maxNumbered = 10000

// place gives the finished temporary file tmp the name local under root, or
// the first free numbered variant of it (see numbered), and returns the name
// it took. A hard link claims a name atomically, failing if anything is
// there, so two terp processes saving into one directory cannot take the
// same name; where the file system has no hard links, a check before a
// rename does, with a window in which another writer could slip in.
func place(root *os.Root, tmp, local string) (string, error) {
	defer func() { _ = root.Remove(tmp) }() // fails harmlessly once it was renamed
	for i := 0; i <= maxNumbered; i++ {
		name := numbered(local, i)
		if same(root, tmp, name) {
			return name, nil
		}
		err := root.Link(tmp, name)
		if err == nil {
			return name, nil
		}
		if errors.Is(err, os.ErrExist) {
			continue
		}
		if _, serr := root.Lstat(name); serr == nil {
			continue
		} else if !errors.Is(serr, os.ErrNotExist) {
			return "", serr
		}
		// No hard links here (vfat, some FUSE file systems).
		return name, root.Rename(tmp, name)
	}
	return "", fmt.Errorf("%s and %d numbered names like it are all taken", local, maxNumbered)
}

// numbered is local with -i before its extension: chart.png, chart-1.png,
// archive.tar.gz, archive-1.tar.gz; i = 0 is local itself. The stem is
// shortened, on a character boundary, where the number would take the name
// past NAME_MAX.
func numbered(local string, i int) string {
	if i == 0 {
		return local
	}
	dir, base := filepath.Split(local)
	stem, ext := base, ""
	if dot := strings.IndexByte(base[1:], '.'); dot >= 0 { // a leading dot is part of the stem
		stem, ext = base[:dot+1], base[dot+1:]
		if e := filepath.Ext(base); e != ext && !strings.HasPrefix(ext, ".tar.") {
			// data.v2.csv: only the last extension moves, data.v2-1.csv.
			stem, ext = strings.TrimSuffix(base, e), e
		}
	}
	suffix := fmt.Sprintf("-%d", i) + ext
	for len(stem)+len(suffix) > nameMax && stem != "" {
		_, size := utf8.DecodeLastRuneInString(stem)
		stem = stem[:len(stem)-size]
	}
	return filepath.Join(dir, stem+suffix)
}

// nameMax is the longest file name Linux file systems take, in bytes.
const nameMax = 255

// same tells whether name under root is a regular file with the same bytes
// as tmp, so the download changes nothing and need not be kept twice.
func same(root *os.Root, tmp, name string) bool {
	fi, err := root.Lstat(name)
	if err != nil || !fi.Mode().IsRegular() {
		return false
	}
	ti, err := root.Lstat(tmp)
	if err != nil || ti.Size() != fi.Size() {
		return false
	}
	a, err := root.Open(tmp)
	if err != nil {
		return false
	}
	defer a.Close()
	b, err := root.Open(name)
	if err != nil {
		return false
	}
	defer b.Close()
	bufA, bufB := make([]byte, copyChunk), make([]byte, copyChunk)
	for {
		na, errA := io.ReadFull(a, bufA)
		nb, errB := io.ReadFull(b, bufB)
		if na != nb || !bytes.Equal(bufA[:na], bufB[:nb]) {
			return false
		}
		if errA == io.EOF || errA == io.ErrUnexpectedEOF {
			return errB == errA
		}
		if errA != nil || errB != nil {
			return false
		}
	}
}

// maxNamed is how many skipped files Warning names; it says how many more
// there are.
const maxNamed = 20

// Warning says which files were skipped because the downloads reached their
// total, and how the user can still get them, or "" when none were. id is
// the conversation, for the command that fetches them later.
func (d *Downloads) Warning(id string) string {
	if len(d.skipped) == 0 {
		return ""
	}
	names := make([]string, 0, min(len(d.skipped), maxNamed))
	for _, s := range d.skipped[:min(len(d.skipped), maxNamed)] {
		names = append(names, path.Join(sandbox.WorkDir, s))
	}
	list := strings.Join(names, ", ")
	if more := len(d.skipped) - len(names); more > 0 {
		list += fmt.Sprintf(" and %s more", commas(more))
	}
	what, it, them := list, "It is", "it"
	if len(d.skipped) > 1 {
		what, it, them = commas(len(d.skipped))+" files ("+list+")", "They are", "them"
	}
	return fmt.Sprintf("skipped %s: this turn's downloads would have gone over max_download_total (%s). "+
		"%s still in the sandbox: raise max_download_total (--max-download-total or TERP_MAX_DOWNLOAD_TOTAL) "+
		"for the next turn, or fetch %s with `terp chat --resume %s` and /download NAME.",
		what, sizeText(d.maxTotal), it, them, id)
}

// createTemp creates a new file with a short random name in dir under
// root. os.CreateTemp cannot work through an os.Root, and a name derived
// from the real one (NAME.partial) is too long for a name that already
// uses all of NAME_MAX.
func createTemp(root *os.Root, dir string) (string, *os.File, error) {
	for range 10 {
		var b [8]byte
		if _, err := rand.Read(b[:]); err != nil {
			return "", nil, err
		}
		name := filepath.Join(dir, ".terp-"+hex.EncodeToString(b[:])+".partial")
		f, err := root.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
		if errors.Is(err, os.ErrExist) {
			continue
		}
		return name, f, err
	}
	return "", nil, errors.New("no free temporary name")
}

// sparseFile is what copySparse writes to: an *os.File.
type sparseFile interface {
	io.WriterAt
	Truncate(size int64) error
}

// blockSize is the granularity of holes: a block of zeros is not written,
// which on every file system terp meets leaves a hole on disk.
const blockSize = 4096

// copyChunk is how much copySparse reads at once.
const copyChunk = 256 << 10

var zeroBlock [blockSize]byte

// copySparse copies src to dst, skipping every whole block of zeros instead
// of writing it, and sets dst's length at the end, so that a file that is
// mostly holes in the sandbox is mostly holes on the host too. It works on
// any reader (a host file, a tar stream from Docker, an HTTP body from
// cpuos), since it looks at the bytes, not at the source's holes. It fails
// with ErrTooLarge once more than limit bytes were read, and with
// ErrOverTotal once the blocks written would take more than budget bytes of
// disk (budget < 0: no budget). It returns the bytes copied and the disk they
// take, counted in whole blocks.
func copySparse(dst sparseFile, src io.Reader, limit, budget int64) (n, used int64, err error) {
	n, used, err = copyAt(dst, src, 0, limit, budget)
	if err == nil {
		err = dst.Truncate(n)
	}
	return n, used, err
}

// copyHoles is copySparse for a host file (the local backend's ReadFile):
// it asks the file system where the data is (SEEK_DATA, SEEK_HOLE) and
// reads only that, so a hole of 90 MiB costs nothing to copy. A file
// system that cannot say reports the whole file as data.
func copyHoles(ctx context.Context, dst sparseFile, src *os.File, limit, budget int64) (n, used int64, err error) {
	fi, err := src.Stat()
	if err != nil {
		return 0, 0, err
	}
	size := fi.Size()
	if size > limit {
		return 0, 0, ErrTooLarge
	}
	for pos := int64(0); pos < size; {
		data, err := src.Seek(pos, unix.SEEK_DATA)
		if errors.Is(err, unix.ENXIO) {
			break // only a hole is left
		}
		if err != nil {
			return 0, used, err
		}
		hole, err := src.Seek(data, unix.SEEK_HOLE)
		if err != nil {
			return 0, used, err
		}
		hole = min(hole, size)
		if data >= hole {
			break
		}
		if _, err := src.Seek(data, io.SeekStart); err != nil {
			return 0, used, err
		}
		left := int64(-1)
		if budget >= 0 {
			left = budget - used
		}
		_, u, err := copyAt(dst, sandbox.ContextReader(ctx, io.LimitReader(src, hole-data)), data, hole, left)
		used += u
		if err != nil {
			return 0, used, err
		}
		pos = hole
	}
	return size, used, dst.Truncate(size)
}

// copyAt is the loop of copySparse: it copies src to dst from offset off,
// and fails once off plus the bytes read passes limit. It returns the bytes
// read and the disk the blocks written take.
func copyAt(dst sparseFile, src io.Reader, off, limit, budget int64) (n, used int64, err error) {
	buf := make([]byte, copyChunk)
	for {
		k, rerr := io.ReadFull(src, buf)
		if off+n+int64(k) > limit {
			return n, used, ErrTooLarge
		}
		chunk := buf[:k]
		for i := 0; i < len(chunk); {
			// Skip the blocks of zeros, then write the run of blocks
			// that follows in one call.
			start := i
			for start < len(chunk) && isZero(chunk[start:min(start+blockSize, len(chunk))]) {
				start += blockSize
			}
			end := start
			for end < len(chunk) && !isZero(chunk[end:min(end+blockSize, len(chunk))]) {
				end += blockSize
			}
			start, end = min(start, len(chunk)), min(end, len(chunk))
			if end > start {
				blocks := (int64(end-start) + blockSize - 1) / blockSize * blockSize
				if budget >= 0 && used+blocks > budget {
					return n, used, ErrOverTotal
				}
				if _, err := dst.WriteAt(chunk[start:end], off+n+int64(start)); err != nil {
					return n, used, err
				}
				used += blocks
			}
			i = end
		}
		n += int64(k)
		switch {
		case rerr == io.EOF || rerr == io.ErrUnexpectedEOF:
			return n, used, nil
		case rerr != nil:
			return n, used, rerr
		}
	}
}

func isZero(b []byte) bool { return bytes.Equal(b, zeroBlock[:len(b)]) }

// sizeText writes a byte count the way the size settings are written.
func sizeText(n int64) string {
	switch {
	case n >= 1<<30 && n%(1<<30) == 0:
		return fmt.Sprintf("%dGiB", n>>30)
	case n >= 1<<30:
		return fmt.Sprintf("%.1fGiB", float64(n)/(1<<30))
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%dMiB", n>>20)
	case n >= 1<<20:
		return fmt.Sprintf("%.1fMiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1fKiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d bytes", n)
}
