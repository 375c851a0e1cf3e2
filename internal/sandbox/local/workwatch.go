package local

import (
	"io/fs"
	"os"
	"syscall"
	"time"

	"github.com/terpdev/terp/internal/sandbox"
)

// /work lives on the host's disk, beside terp's own store, so code that
// fills it could leave terp unable to save the conversation. RLIMIT_FSIZE
// bounds one file; Limits.WorkBytes bounds them all. A plain directory has
// no size limit of its own (a loop-mounted filesystem or a project quota
// would need root and a prepared filesystem), so while any command runs a
// sandbox.WorkWatch measures /work, as du would, and stops the sandbox's
// commands when it has grown past the limit. The watch costs one walk of
// /work per interval, and the interval grows with the walk's cost, so a
// /work of many files costs a small share of a core; code writing fast can
// overshoot the limit by what it writes in two intervals.

// newWorkWatch makes the sandbox's watch; track tells it of every command.
func (s *Sandbox) newWorkWatch() *sandbox.WorkWatch {
	return &sandbox.WorkWatch{
		Limit:       s.meta.Limits.WorkBytes,
		MinInterval: 100 * time.Millisecond,
		MaxInterval: 5 * time.Second,
		Measure:     s.workUsage,
		Running: func() bool {
			s.mu.Lock()
			defer s.mu.Unlock()
			return len(s.procs) > 0 && s.state == sandbox.Running
		},
		Stop: func(why string) {
			for _, p := range s.running() {
				p.stopFor(why)
			}
		},
	}
}

// workUsage is the disk /work takes: the blocks its files and directories
// hold, each hard-linked file once. Entries the walk cannot read are
// skipped.
func (s *Sandbox) workUsage() int64 {
	root, err := os.OpenRoot(s.work)
	if err != nil {
		return 0
	}
	defer root.Close()
	type inode struct{ dev, ino uint64 }
	seen := make(map[inode]bool)
	var total int64
	_ = fs.WalkDir(root.FS(), ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return nil
		}
		st, ok := info.Sys().(*syscall.Stat_t)
		if !ok {
			return nil
		}
		if st.Nlink > 1 && !info.IsDir() {
			k := inode{st.Dev, st.Ino}
			if seen[k] {
				return nil
			}
			seen[k] = true
		}
		total += st.Blocks * 512
		return nil
	})
	return total
}
