package local

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"

	"github.com/terpdev/terp/internal/egress"
)

// egressProxy is a running allowlist proxy and the Unix socket it serves,
// which every command of the sandbox gets bound at egress.SocketPath.
type egressProxy struct {
	proxy  *egress.Proxy
	socket string // host path
	tmpDir string // set when the socket had to live outside the sandbox dir
}

// maxSocketPath is the longest path a Unix socket address holds on Linux
// (sun_path is 108 bytes, with the terminating NUL).
const maxSocketPath = 107

// startEgress serves the allowlist proxy for one sandbox. The socket lives in
// the sandbox's private directory, or, when that path is too long for a
// socket address, in a private temporary directory.
func startEgress(dir string, allow []string, opts []egress.Option) (*egressProxy, error) {
	p, err := egress.New(allow, opts...)
	if err != nil {
		return nil, fmt.Errorf("network allowlist: %w", err)
	}
	e := &egressProxy{proxy: p, socket: filepath.Join(dir, "egress.sock")}
	if len(e.socket) > maxSocketPath {
		if e.tmpDir, err = os.MkdirTemp("", "terp-egress-"); err != nil {
			return nil, err
		}
		e.socket = filepath.Join(e.tmpDir, "egress.sock")
	}
	_ = os.Remove(e.socket) // left by a terp that was killed
	l, err := net.Listen("unix", e.socket)
	if err != nil {
		e.removeFiles()
		return nil, fmt.Errorf("network allowlist: %w", err)
	}
	go func() {
		if err := p.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
			_ = l.Close()
		}
	}()
	return e, nil
}

// close stops the proxy, cutting open connections, and removes the socket.
// A nil proxy (no allowlist) is a no-op.
func (e *egressProxy) close() {
	if e == nil {
		return
	}
	_ = e.proxy.Close()
	e.removeFiles()
}

func (e *egressProxy) removeFiles() {
	_ = os.Remove(e.socket)
	if e.tmpDir != "" {
		_ = os.RemoveAll(e.tmpDir)
	}
}
