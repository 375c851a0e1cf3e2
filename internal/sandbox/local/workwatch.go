package local

import (
	"fmt"
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
// watcher measures /work, as du would, and stops the sandbox's commands
// when it has grown past the limit. The watch costs one walk of /work per
// interval, and the interval grows with the walk's cost, so a /work of
// many files costs a small share of a core; code writing fast can overshoot
// the limit by what it writes in one interval.

const (
	minWatchInterval = 100 * time.Millisecond
	maxWatchInterval = 5 * time.Second
)

// watchWork runs while the sandbox has commands, started by track.
func (s *Sandbox) watchWork() {
	limit := s.meta.Limits.WorkBytes
	prev := s.workUsage()
	interval := minWatchInterval
	for {
		time.Sleep(interval)
		s.mu.Lock()
		if len(s.procs) == 0 || s.state != sandbox.Running {
			s.watching = false
			s.mu.Unlock()
			return
		}
		started := s.started
		s.started = false
		s.mu.Unlock()
		start := time.Now()
		used := s.workUsage()
		interval = min(max(20*time.Since(start), minWatchInterval), maxWatchInterval)
		// Only growth is stopped, and not growth that a command which has
		// just started may owe to the one before it: a command that
		// deletes files to get back under the limit must be able to run.
		if used > limit && used > prev && !started {
			s.stopAllFor(workFullReason(used, limit))
		}
		prev = used
	}
}

// workFullReason tells the model what happened and what it can do.
func workFullReason(used, limit int64) string {
	return fmt.Sprintf("/work grew to %s, past the sandbox's %s limit (max_work_size), so terp stopped the code. "+
		"Delete files you no longer need (os.remove, shutil.rmtree) or write less; the user can raise max_work_size",
		sizeText(used), sizeText(limit))
}

// stopAllFor kills every running command of the sandbox, each remembering
// why.
func (s *Sandbox) stopAllFor(reason string) {
	s.mu.Lock()
	procs := make([]*proc, 0, len(s.procs))
	for p := range s.procs {
		procs = append(procs, p)
	}
	s.mu.Unlock()
	for _, p := range procs {
		p.stopFor(reason)
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

// sizeText writes a byte count the way people read sizes.
func sizeText(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}
