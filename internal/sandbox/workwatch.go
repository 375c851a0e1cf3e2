package sandbox

import (
	"fmt"
	"sync"
	"time"
)

// WorkWatch keeps WorkDir under Limits.WorkBytes for a backend whose /work
// has no size limit of its own: while commands run it measures /work once
// per interval and stops them when it has grown past the limit. Only growth
// is stopped, and not growth a command that has just started may owe to the
// one before it, so a command that deletes files to get back under the
// limit runs. The interval grows with the cost of a measurement. A backend
// fills in the fields once and calls Started for every command it starts.
type WorkWatch struct {
	Limit       int64 // no watch when 0
	MinInterval time.Duration
	MaxInterval time.Duration
	// Measure returns what /work holds on disk.
	Measure func() int64
	// Running reports whether any command still runs. It is never called
	// with the watch's own lock held, so it may take the backend's.
	Running func() bool
	// Stop stops every running command, each with why.
	Stop func(why string)

	mu       sync.Mutex
	watching bool // run is running
	started  bool // a command started since run last looked
}

// Started tells the watch a command started, and starts watching if it is
// not. The caller may hold its own locks. A nil watch watches nothing.
func (w *WorkWatch) Started() {
	if w == nil || w.Limit <= 0 {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.started = true
	if !w.watching {
		w.watching = true
		go w.run()
	}
}

func (w *WorkWatch) run() {
	prev := w.Measure()
	interval := w.MinInterval
	for {
		time.Sleep(interval)
		running := w.Running()
		w.mu.Lock()
		started := w.started
		w.started = false
		if !running && !started {
			w.watching = false
			w.mu.Unlock()
			return
		}
		w.mu.Unlock()
		start := time.Now()
		used := w.Measure()
		interval = min(max(20*time.Since(start), w.MinInterval), w.MaxInterval)
		if used > w.Limit && used > prev && !started {
			w.Stop(workFullReason(used, w.Limit))
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
