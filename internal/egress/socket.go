package egress

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
)

// MaxSocketPath is the longest path a Unix socket address holds on Linux
// (sun_path is 108 bytes, with the terminating NUL).
const MaxSocketPath = 107

// Socket is a Proxy serving on a Unix socket, which a backend binds into its
// sandbox at SocketPath.
type Socket struct {
	proxy *Proxy
	path  string
}

// ServeSocket serves a proxy for the allow patterns on a Unix socket at
// path, replacing a stale socket a killed terp left there. The socket is
// open to every user (0666): the sandbox's user differs from terp's under
// Docker, and connecting is all a socket allows. The directory's
// permissions decide who reaches it on the host.
func ServeSocket(path string, allow []string, opts ...Option) (*Socket, error) {
	if len(path) > MaxSocketPath {
		return nil, fmt.Errorf("egress socket path %s is longer than %d bytes", path, MaxSocketPath)
	}
	p, err := New(allow, opts...)
	if err != nil {
		return nil, err
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("egress socket: %w", err)
	}
	var lc net.ListenConfig
	l, err := lc.Listen(context.Background(), "unix", path)
	if err != nil {
		return nil, fmt.Errorf("egress socket: %w", err)
	}
	if err := os.Chmod(path, 0o666); err != nil {
		_ = l.Close()
		return nil, fmt.Errorf("egress socket: %w", err)
	}
	go func() {
		if err := p.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
			_ = l.Close()
		}
	}()
	return &Socket{proxy: p, path: path}, nil
}

// Path is the socket's host path.
func (s *Socket) Path() string { return s.path }

// Close stops the proxy, cutting open tunnels, and removes the socket. A nil
// Socket (a sandbox without the allowlist) is a no-op.
func (s *Socket) Close() {
	if s == nil {
		return
	}
	_ = s.proxy.Close()
	_ = os.Remove(s.path)
}
