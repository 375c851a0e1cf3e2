// Package egress is the allowlist mode of a sandbox's network: an HTTP proxy
// on the host that lets the code reach a few named hosts and nothing else.
//
// The sandbox keeps its own empty network namespace. terp serves a Proxy on
// a Unix socket, the backend binds that socket into the sandbox, and a small
// bridge inside (see Bridge) listens on the sandbox's loopback and forwards
// each connection to the socket; HTTP_PROXY and HTTPS_PROXY point the code's
// libraries (pip, requests, urllib) at the bridge. So no route to the outside
// exists: whatever the code tries, its only way out is a proxy that
//
//   - accepts CONNECT to an allowed name on port 443, and plain HTTP requests
//     for an allowed name on port 80;
//   - resolves names itself, and dials only the addresses it resolved that are
//     public (never loopback, private, link-local or reserved), so neither a
//     DNS answer nor an address literal can point it at the host or its LAN;
//   - refuses everything else with a status line that says why.
//
// The model reads that status line in its own error output, so it can tell
// the user which host to allow. This is the shape of E2B's and Codex's egress
// rules, reached without root: no iptables, no veth, no DNS server inside.
package egress

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Proxy is the host side of the allowlist mode. Its zero value is not usable;
// call New.
type Proxy struct {
	allow *Allowlist
	names []string // the patterns, for messages

	// trusted are address ranges the operator lets the proxy dial although
	// they are not public (WithTrustedRanges).
	trusted []netip.Prefix

	// resolve and dial are net's, replaced only in tests, where no public
	// host is reachable.
	resolve func(ctx context.Context, host string) ([]netip.Addr, error)
	dial    func(ctx context.Context, network, addr string) (net.Conn, error)

	srv     *http.Server
	forward *httputil.ReverseProxy

	mu      sync.Mutex
	tunnels map[net.Conn]struct{}
	closed  bool
}

// dialTimeout bounds how long a connection to an allowed host may take to
// open; the code sees a 502 after it.
const dialTimeout = 15 * time.Second

// Option changes how a Proxy reaches the outside.
type Option func(*Proxy)

// WithNet replaces name resolution and dialling. Tests use it to stand a
// loopback server in for a public host, since no public host is reachable
// there and the proxy (rightly) refuses loopback addresses.
func WithNet(resolve func(ctx context.Context, host string) ([]netip.Addr, error),
	dial func(ctx context.Context, network, addr string) (net.Conn, error)) Option {
	return func(p *Proxy) { p.resolve, p.dial = resolve, dial }
}

// WithTrustedRanges lets the proxy dial the allowed names that resolve into
// ranges, although they are private or reserved: a package mirror, or a
// network whose resolver answers for the registries with an address of its
// own. Names still have to be on the allowlist, and addresses written as
// numbers are still refused.
func WithTrustedRanges(ranges []netip.Prefix) Option {
	return func(p *Proxy) { p.trusted = append([]netip.Prefix(nil), ranges...) }
}

// dialable reports whether the proxy may dial a resolved address.
func (p *Proxy) dialable(a netip.Addr) bool {
	if Public(a) {
		return true
	}
	a = a.Unmap()
	for _, r := range p.trusted {
		if r.Contains(a) {
			return true
		}
	}
	return false
}

// New returns a proxy that lets through the hosts matching patterns (see
// Allowlist); no patterns lets nothing through.
func New(patterns []string, opts ...Option) (*Proxy, error) {
	allow, err := NewAllowlist(patterns)
	if err != nil {
		return nil, err
	}
	var d net.Dialer
	p := &Proxy{
		allow: allow,
		names: append([]string(nil), patterns...),
		resolve: func(ctx context.Context, host string) ([]netip.Addr, error) {
			return net.DefaultResolver.LookupNetIP(ctx, "ip", host)
		},
		dial:    d.DialContext,
		tunnels: make(map[net.Conn]struct{}),
	}
	for _, o := range opts {
		o(p)
	}
	p.forward = &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			r.Out.URL = r.In.URL
			r.Out.Host = r.In.URL.Host
		},
		Transport: &http.Transport{
			Proxy:                 nil, // never the host's own proxy settings
			DialContext:           func(ctx context.Context, _, addr string) (net.Conn, error) { return p.dialAllowed(ctx, addr) },
			MaxIdleConns:          16,
			IdleConnTimeout:       30 * time.Second,
			ResponseHeaderTimeout: 2 * time.Minute,
		},
		ErrorHandler: func(w http.ResponseWriter, _ *http.Request, err error) {
			status := http.StatusBadGateway
			var d *deniedError
			if errors.As(err, &d) {
				status = http.StatusForbidden
			}
			http.Error(w, "terp egress proxy: "+err.Error(), status)
		},
	}
	p.srv = &http.Server{Handler: p, ReadHeaderTimeout: 30 * time.Second}
	return p, nil
}

// Serve answers connections on l until Close. Like http.Server.Serve it
// returns http.ErrServerClosed after Close.
func (p *Proxy) Serve(l net.Listener) error { return p.srv.Serve(l) }

// Close stops the proxy and cuts every open tunnel, so that nothing the code
// opened outlives its sandbox being paused or closed.
func (p *Proxy) Close() error {
	p.mu.Lock()
	p.closed = true
	for c := range p.tunnels {
		_ = c.Close()
	}
	p.mu.Unlock()
	err := p.srv.Close()
	p.forward.Transport.(*http.Transport).CloseIdleConnections()
	return err
}

// deniedError is a request the policy refuses, as opposed to one that failed.
type deniedError struct{ reason string }

func (e *deniedError) Error() string { return e.reason }

// check applies the name and port rules to a request for hostport.
func (p *Proxy) check(host string, port int, wantPort int, scheme string) error {
	if _, err := netip.ParseAddr(host); err == nil {
		return &deniedError{fmt.Sprintf("%s is an address; only allowed host names are reachable (%s)", host, strings.Join(p.names, ", "))}
	}
	if !p.allow.Allows(host) {
		return &deniedError{fmt.Sprintf("%s is not in the sandbox's allowlist (%s); the user can add it with --network-allow or network_allow in terp's config",
			host, strings.Join(p.names, ", "))}
	}
	if port != wantPort {
		return &deniedError{fmt.Sprintf("%s port %d: only %s on port %d is allowed", host, port, scheme, wantPort)}
	}
	return nil
}

// dialAllowed resolves hostport's name and dials the first public address
// that answers. It never dials a name, so the resolver's answer that was
// checked is the one used (no second lookup to rebind).
func (p *Proxy) dialAllowed(ctx context.Context, hostport string) (net.Conn, error) {
	host, portStr, err := net.SplitHostPort(hostport)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, dialTimeout)
	defer cancel()
	addrs, err := p.resolve(ctx, host)
	if err != nil {
		return nil, fmt.Errorf("cannot resolve %s: %w", host, err)
	}
	var public []netip.Addr
	for _, a := range addrs {
		if p.dialable(a) {
			public = append(public, a.Unmap())
		}
	}
	if len(public) == 0 {
		return nil, &deniedError{fmt.Sprintf("%s resolves only to private, loopback or reserved addresses (%v); "+
			"network_trusted_ranges lets the proxy reach a range of your own network", host, addrs)}
	}
	var errs []error
	for _, a := range public {
		c, err := p.dial(ctx, "tcp", net.JoinHostPort(a.String(), portStr))
		if err == nil {
			return c, nil
		}
		errs = append(errs, err)
	}
	return nil, fmt.Errorf("cannot connect to %s: %w", host, errors.Join(errs...))
}

// ServeHTTP handles CONNECT tunnels and plain HTTP requests in absolute form.
func (p *Proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodConnect {
		p.connect(w, r)
		return
	}
	if !r.URL.IsAbs() || r.URL.Scheme != "http" {
		http.Error(w, "terp egress proxy: send requests through HTTP_PROXY (http://...) or CONNECT for https", http.StatusBadRequest)
		return
	}
	host, port := r.URL.Hostname(), 80
	if s := r.URL.Port(); s != "" {
		port, _ = strconv.Atoi(s)
	}
	if err := p.check(host, port, 80, "http"); err != nil {
		http.Error(w, "terp egress proxy: "+err.Error(), http.StatusForbidden)
		return
	}
	p.forward.ServeHTTP(w, r)
}

// connect opens a tunnel. Its replies are written by hand because the
// reason phrase is what Python's http.client shows the code ("Tunnel
// connection failed: 403 ..."), and the reason is the useful part.
func (p *Proxy) connect(w http.ResponseWriter, r *http.Request) {
	host, portStr, err := net.SplitHostPort(r.Host)
	port, perr := strconv.Atoi(portStr)
	if err != nil || perr != nil {
		http.Error(w, "terp egress proxy: CONNECT wants host:port", http.StatusBadRequest)
		return
	}
	hj, ok := w.(http.Hijacker)
	if !ok {
		http.Error(w, "terp egress proxy: cannot tunnel", http.StatusInternalServerError)
		return
	}
	var upstream net.Conn
	err = p.check(host, port, 443, "https")
	if err == nil {
		upstream, err = p.dialAllowed(r.Context(), r.Host)
	}
	client, buf, herr := hj.Hijack()
	if herr != nil {
		if upstream != nil {
			_ = upstream.Close()
		}
		return
	}
	if err != nil {
		status := "502 Bad Gateway"
		var d *deniedError
		if errors.As(err, &d) {
			status = "403 Forbidden"
		}
		msg := "terp egress proxy: " + err.Error()
		_, _ = fmt.Fprintf(client, "HTTP/1.1 %s (%s)\r\nContent-Type: text/plain\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s\n",
			status, oneLine(err.Error()), len(msg)+1, msg)
		_ = client.Close()
		return
	}
	if _, err := io.WriteString(client, "HTTP/1.1 200 Connection established\r\n\r\n"); err != nil {
		_ = client.Close()
		_ = upstream.Close()
		return
	}
	if !p.track(client, upstream) {
		return
	}
	defer p.untrack(client, upstream)
	done := make(chan struct{}, 2)
	go func() {
		// What the client sent after its CONNECT line may already sit in buf.
		_, _ = io.Copy(upstream, buf.Reader)
		closeWrite(upstream)
		done <- struct{}{}
	}()
	go func() {
		_, _ = io.Copy(client, upstream)
		closeWrite(client)
		done <- struct{}{}
	}()
	<-done
	<-done
}

// track records a tunnel's two ends so Close can cut them; it refuses (and
// closes them) once the proxy is closed.
func (p *Proxy) track(conns ...net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		for _, c := range conns {
			_ = c.Close()
		}
		return false
	}
	for _, c := range conns {
		p.tunnels[c] = struct{}{}
	}
	return true
}

func (p *Proxy) untrack(conns ...net.Conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range conns {
		delete(p.tunnels, c)
		_ = c.Close()
	}
}

// closeWrite half-closes c so the other side sees the end of the stream
// while replies still flow back.
func closeWrite(c net.Conn) {
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		_ = cw.CloseWrite()
		return
	}
	_ = c.Close()
}

func oneLine(s string) string {
	return strings.NewReplacer("\r", " ", "\n", " ").Replace(s)
}

// Client is an HTTP client held to the proxy's rules without a listener,
// for the host's own requests on a sandbox's behalf (terp serve fetching an
// image a client names by URL): every connection, redirects' too, is to an
// allowed host name on port 80 or 443, dialled at a public address as the
// proxy dials. Its answers are bounded by timeout.
func (p *Proxy) Client(timeout time.Duration) *http.Client {
	return &http.Client{Timeout: timeout, Transport: &http.Transport{
		Proxy: nil,
		DialContext: func(ctx context.Context, _, addr string) (net.Conn, error) {
			host, portStr, err := net.SplitHostPort(addr)
			if err != nil {
				return nil, err
			}
			port, _ := strconv.Atoi(portStr)
			scheme := map[int]string{80: "http", 443: "https"}[port]
			if scheme == "" {
				return nil, &deniedError{fmt.Sprintf("%s port %d: only http on port 80 and https on port 443 are allowed", host, port)}
			}
			if err := p.check(host, port, port, scheme); err != nil {
				return nil, err
			}
			return p.dialAllowed(ctx, addr)
		},
		ResponseHeaderTimeout: timeout,
	}}
}
