package docker

import (
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/terpdev/terp/internal/egress"
	"github.com/terpdev/terp/internal/sandbox"
)

// The allowlist mode on Docker: the container keeps NetworkMode "none", and
// the proxy's Unix socket reaches it through a bind mount of a host
// directory at /run/terp. The directory, not the socket, is bound, so that a
// later terp that resumes the sandbox can serve a new socket at the same
// place. The bridge inside (egress.Wrap) is started by the first command and
// shared by the rest, as they share the container's network namespace.
// A bind mount names a path on the daemon's machine, so the mode needs a
// daemon on this one.

// Labels that keep a sandbox's egress policy for Resume.
const (
	labelNetwork = "dev.terp.network"       // sandbox.NetworkMode
	labelAllow   = "dev.terp.network.allow" // the allowlist, comma-separated
)

// egressDir is the host directory bound at /run/terp for sandbox id.
func (b *Backend) egressDir(id string) string {
	return filepath.Join(b.cfg.EgressDir, id)
}

// checkNetwork refuses a network policy that cannot work, before anything
// is created: an unknown mode, a bad allowlist, or the allowlist mode with a
// daemon elsewhere.
func (b *Backend) checkNetwork(n sandbox.Network) error {
	if err := egress.Check(n); err != nil {
		return fmt.Errorf("docker sandbox: %w", err)
	}
	if n.Mode != sandbox.NetworkAllowlist {
		return nil
	}
	if host := b.eng.Host(); !strings.HasPrefix(host, "unix://") {
		return fmt.Errorf("docker sandbox: --network allowlist needs a Docker daemon on this machine (DOCKER_HOST is %s): "+
			"terp's proxy reaches the container through a Unix socket; use --network none or full, or the local sandbox", host)
	}
	return nil
}

// startEgress serves the proxy for sandbox id in its directory, made if
// missing (open to the container's user, which is not terp's).
func (b *Backend) startEgress(id string, allow []string) (*egress.Socket, error) {
	dir := b.egressDir(id)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("docker sandbox: %w", err)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		return nil, fmt.Errorf("docker sandbox: %w", err)
	}
	return egress.ServeSocket(filepath.Join(dir, path.Base(egress.SocketPath)), allow, b.cfg.EgressOptions...)
}

// egressMount binds the sandbox's socket directory where the bridge looks.
func (b *Backend) egressMount(id string) mount {
	return mount{Type: "bind", Source: b.egressDir(id), Target: path.Dir(egress.SocketPath), ReadOnly: true}
}

// removeEgressDir removes what the allowlist mode left on the host for id.
func (b *Backend) removeEgressDir(id string) error {
	if b.cfg.EgressDir == "" {
		return nil
	}
	if err := os.RemoveAll(b.egressDir(id)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}

// networkLabels records n on the container.
func networkLabels(labels map[string]string, n sandbox.Network) {
	if n.Mode == sandbox.NetworkAllowlist {
		labels[labelNetwork] = string(n.Mode)
		labels[labelAllow] = strings.Join(n.Allow, ",")
	}
}

// labeledAllowlist returns the allowlist a container was made with, and
// whether it was made in the allowlist mode.
func labeledAllowlist(labels map[string]string) ([]string, bool) {
	if labels[labelNetwork] != string(sandbox.NetworkAllowlist) {
		return nil, false
	}
	if labels[labelAllow] == "" {
		return nil, true
	}
	return strings.Split(labels[labelAllow], ","), true
}
