package sandbox

import (
	"container/heap"
	"errors"
	"fmt"
	"slices"
)

// MaxListEntries bounds what List returns, because the code can create files
// faster than anyone wants to read their names, and a listing is held in
// memory. Past it a backend keeps the most recently modified files, so a file
// the last step saved is listed however many older ones /work holds, and
// returns them with a *TruncatedError.
const MaxListEntries = 100_000

// ErrListTruncated is wrapped by the error List returns beside a listing cut
// to MaxListEntries.
var ErrListTruncated = errors.New("listing cut")

// TruncatedError is List's error when the directory holds more regular
// files than it returns. The files List returned are still good.
type TruncatedError struct {
	Listed, Total int
}

func (e *TruncatedError) Error() string {
	return fmt.Sprintf("%d files, of which the %d most recently modified are listed", e.Total, e.Listed)
}

func (e *TruncatedError) Is(target error) bool { return target == ErrListTruncated }

// Newest collects a listing and keeps only the limit most recently modified
// files, in bounded memory. Backends walk into it.
type Newest struct {
	limit int
	total int
	h     byAge
}

// NewNewest keeps up to limit files; 0 means MaxListEntries.
func NewNewest(limit int) *Newest {
	if limit <= 0 {
		limit = MaxListEntries
	}
	return &Newest{limit: limit}
}

// Add offers one file.
func (n *Newest) Add(f FileInfo) {
	n.total++
	if len(n.h) < n.limit {
		heap.Push(&n.h, f)
		return
	}
	if f.ModTime.After(n.h[0].ModTime) {
		n.h[0] = f
		heap.Fix(&n.h, 0)
	}
}

// Files returns what was kept, in the order a walk visits them (by path,
// directory by directory), and a *TruncatedError when files were left out.
func (n *Newest) Files() ([]FileInfo, error) {
	files := []FileInfo(n.h)
	slices.SortFunc(files, func(a, b FileInfo) int { return comparePaths(a.Path, b.Path) })
	if n.total > len(files) {
		return files, &TruncatedError{Listed: len(files), Total: n.total}
	}
	return files, nil
}

// comparePaths orders paths as a walk visits them: "/" sorts before any
// other byte, so a directory's entries stay together.
func comparePaths(a, b string) int {
	for i := 0; i < len(a) && i < len(b); i++ {
		ca, cb := a[i], b[i]
		switch {
		case ca == cb:
			continue
		case ca == '/':
			return -1
		case cb == '/':
			return 1
		case ca < cb:
			return -1
		default:
			return 1
		}
	}
	return len(a) - len(b)
}

// byAge is a min-heap on ModTime: the oldest kept file is the first to go.
type byAge []FileInfo

func (h byAge) Len() int           { return len(h) }
func (h byAge) Less(i, j int) bool { return h[i].ModTime.Before(h[j].ModTime) }
func (h byAge) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *byAge) Push(x any)        { *h = append(*h, x.(FileInfo)) }
func (h *byAge) Pop() any {
	old := *h
	f := old[len(old)-1]
	*h = old[:len(old)-1]
	return f
}
