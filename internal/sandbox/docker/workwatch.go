package docker

import (
	"bytes"
	"context"
	"strconv"
	"strings"
	"time"

	"github.com/terpdev/terp/internal/sandbox"
)

// /work is a Docker volume, which the local driver cannot size on most
// filesystems, and it lives on the daemon's disk, often terp's own. So, as
// the local backend does, a sandbox.WorkWatch measures it while commands
// run (du in the container, as the code's user) and stops them when it has
// grown past Limits.WorkBytes. A measurement is one exec, so the watch
// looks once a second, or every two when an exec is slow.

// newWorkWatch makes the sandbox's watch; track tells it of every command.
func (s *Sandbox) newWorkWatch(limit int64) *sandbox.WorkWatch {
	return &sandbox.WorkWatch{
		Limit:       limit,
		MinInterval: time.Second,
		// A measurement's cost here is mostly the daemon's, and an exec
		// that is slow under load is no reason to look less often.
		MaxInterval: 2 * time.Second,
		Measure:     s.workUsage,
		Running: func() bool {
			s.mu.Lock()
			defer s.mu.Unlock()
			return len(s.runs) > 0 && s.state == sandbox.Running
		},
		Stop: func(why string) {
			s.mu.Lock()
			runs := s.runList()
			s.mu.Unlock()
			for _, e := range runs {
				go e.stopFor(why)
			}
		},
	}
}

// workUsage is what /work holds on disk, as du counts it, or 0 when it
// cannot be measured.
func (s *Sandbox) workUsage() int64 {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var out bytes.Buffer
	// du exits 1 for a directory it cannot read but still prints the total.
	_, err := s.b.simpleExec(ctx, s.containerID, s.b.cfg.User, []string{"du", "-s", "-B1", "-x", sandbox.WorkDir}, nil, &out)
	if err != nil {
		return 0
	}
	for line := range strings.Lines(out.String()) {
		if f := strings.Fields(line); len(f) == 2 && f[1] == sandbox.WorkDir {
			n, _ := strconv.ParseInt(f[0], 10, 64)
			return n
		}
	}
	return 0
}
