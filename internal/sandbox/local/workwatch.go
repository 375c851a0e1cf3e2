package local

import (
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

// workUsage is the disk /work takes; see sandbox.WorkUsage.
func (s *Sandbox) workUsage() int64 { return sandbox.WorkUsage(s.work) }
