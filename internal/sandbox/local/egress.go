package local

import (
	"os"
	"path/filepath"

	"github.com/terpdev/terp/internal/egress"
)

// egressProxy is a running allowlist proxy, whose socket every command of the
// sandbox gets bound at egress.SocketPath.
type egressProxy struct {
	sock   *egress.Socket
	tmpDir string // set when the socket had to live outside the sandbox dir
}

// path is the socket's host path.
func (e *egressProxy) path() string { return e.sock.Path() }

// startEgress serves the allowlist proxy for one sandbox. The socket lives in
// the sandbox's private directory, or, when that path is too long for a
// socket address, in a private temporary directory.
func startEgress(dir string, allow []string, opts []egress.Option) (*egressProxy, error) {
	e := &egressProxy{}
	path := filepath.Join(dir, "egress.sock")
	if len(path) > egress.MaxSocketPath {
		var err error
		if e.tmpDir, err = os.MkdirTemp("", "terp-egress-"); err != nil {
			return nil, err
		}
		// A sandbox running as a uid of its own must reach the socket.
		if err := os.Chmod(e.tmpDir, 0o711); err != nil {
			e.close()
			return nil, err
		}
		path = filepath.Join(e.tmpDir, "egress.sock")
	}
	sock, err := egress.ServeSocket(path, allow, opts...)
	if err != nil {
		e.close()
		return nil, err
	}
	e.sock = sock
	return e, nil
}

// close stops the proxy and removes its files. A nil proxy (no allowlist) is
// a no-op.
func (e *egressProxy) close() {
	if e == nil {
		return
	}
	e.sock.Close()
	if e.tmpDir != "" {
		_ = os.RemoveAll(e.tmpDir)
	}
}
