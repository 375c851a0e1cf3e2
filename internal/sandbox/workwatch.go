package sandbox

import (
	"fmt"
	"time"
)

// WorkWatch is the rule by which a backend without a size-limited /work
// keeps it under Limits.WorkBytes: while commands run, measure /work once
// per interval and stop them when it has grown past the limit. Only growth
// is stopped, and not growth a command that has just started may owe to
// the one before it, so a command that deletes files to get back under the
// limit runs. The interval grows with the cost of a measurement.
type WorkWatch struct {
	Limit       int64
	MinInterval time.Duration
	MaxInterval time.Duration
	// Measure returns what /work holds on disk.
	Measure func() int64
	// Poll reports whether commands still run, and whether one started
	// since the last call; the watch ends when none runs.
	Poll func() (running, started bool)
	// Stop stops every running command, each with why.
	Stop func(why string)
}

// Run watches until Poll says nothing runs.
func (w WorkWatch) Run() {
	prev := w.Measure()
	interval := w.MinInterval
	for {
		time.Sleep(interval)
		running, started := w.Poll()
		if !running {
			return
		}
		start := time.Now()
		used := w.Measure()
		interval = min(max(20*time.Since(start), w.MinInterval), w.MaxInterval)
		if used > w.Limit && used > prev && !started {
			w.Stop(WorkFullReason(used, w.Limit))
		}
		prev = used
	}
}

// WorkFullReason tells the model what happened and what it can do.
func WorkFullReason(used, limit int64) string {
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
