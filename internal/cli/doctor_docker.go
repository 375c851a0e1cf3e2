package cli

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/terpdev/terp/internal/config"
	"github.com/terpdev/terp/internal/sandbox/docker"
)

// dockerDoctor is what doctor asks of the docker backend, step by step, so
// that it can say which of daemon, image and libraries is missing.
type dockerDoctor interface {
	Ping(ctx context.Context) (docker.Daemon, error)
	Image() string
	InspectImage(ctx context.Context) error
	Check(ctx context.Context) error
}

// dockerChecks adds the docker backend's own checks when it is the
// configured sandbox: the daemon answers (and which API version it
// speaks), the image is there, and its Python imports numpy, pandas and
// matplotlib. It reports whether the general sandbox check should run; when
// not, it has added that check as skipped.
func dockerChecks(ctx context.Context, r *doctorReport, f *Factory, cfg *config.Config) bool {
	if cfg.Sandbox != "docker" {
		return true
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	names := []string{"docker daemon", "docker image", "docker python"}
	stop := func(failed int, err error) bool {
		r.add(setupFailure(names[failed], err))
		for _, n := range names[failed+1:] {
			r.add(check{Name: n, Status: checkSkip, Detail: "needs the " + names[failed] + " check"})
		}
		r.add(check{Name: "sandbox", Status: checkSkip, Detail: "needs the docker checks"})
		return false
	}
	backend, err := f.NewBackend(cfg)
	if err != nil {
		return stop(0, err)
	}
	d, ok := backend.(dockerDoctor)
	if !ok {
		return true
	}
	daemon, err := d.Ping(ctx)
	if err != nil {
		return stop(0, err)
	}
	r.add(check{Name: names[0], Status: checkOK,
		Detail: fmt.Sprintf("Docker %s at %s answers; API version %s negotiated", daemon.Version, daemon.Host, daemon.APIVersion)})
	if err := d.InspectImage(ctx); err != nil {
		return stop(1, err)
	}
	r.add(check{Name: names[1], Status: checkOK, Detail: d.Image() + " is on the Docker host"})
	if err := d.Check(ctx); err != nil {
		return stop(2, err)
	}
	r.add(check{Name: names[2], Status: checkOK, Detail: "python3 in " + d.Image() + " imports numpy, pandas and matplotlib"})
	return true
}

// setupFailure is the check for a backend's error, with its fix when it
// says one.
func setupFailure(name string, err error) check {
	c := check{Name: name, Status: checkFail, Detail: err.Error()}
	var se *docker.SetupError
	if errors.As(err, &se) {
		c.Detail, c.Fix = se.Problem, se.Fix
		if se.Err != nil {
			c.Detail += ": " + se.Err.Error()
		}
	}
	return c
}
