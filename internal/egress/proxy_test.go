package egress

import (
	"bufio"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestAllowlist(t *testing.T) {
	a, err := NewAllowlist([]string{"pypi.org", "*.pythonhosted.org", "Example.COM."})
	if err != nil {
		t.Fatal(err)
	}
	for host, want := range map[string]bool{
		"pypi.org":                  true,
		"PyPI.org.":                 true,
		"www.pypi.org":              false,
		"files.pythonhosted.org":    true,
		"a.b.pythonhosted.org":      true,
		"pythonhosted.org":          false,
		"evilpythonhosted.org":      false,
		"example.com":               true,
		"pypi.org.evil.com":         false,
		"":                          false,
		"files.pythonhosted.org.ru": false,
	} {
		if got := a.Allows(host); got != want {
			t.Errorf("Allows(%q) = %v, want %v", host, got, want)
		}
	}
}

func TestValidPattern(t *testing.T) {
	for _, p := range []string{"pypi.org", "*.example.com", "localhost", "a-b.c_d.io"} {
		if err := ValidPattern(p); err != nil {
			t.Errorf("ValidPattern(%q) = %v, want nil", p, err)
		}
	}
	for _, p := range []string{"", "*", "*.", "10.0.0.1", "[::1]", "a..b", "-a.com", "exa mple.com", "*.*.com", "a*.com", "https://pypi.org"} {
		if err := ValidPattern(p); err == nil {
			t.Errorf("ValidPattern(%q) = nil, want an error", p)
		}
	}
}

func TestPublic(t *testing.T) {
	for addr, want := range map[string]bool{
		"151.101.0.223":      true, // pypi.org
		"2a04:4e42::223":     true,
		"127.0.0.1":          false,
		"::1":                false,
		"10.1.2.3":           false,
		"172.16.0.1":         false,
		"192.168.1.1":        false,
		"169.254.169.254":    false, // cloud metadata
		"100.64.0.1":         false,
		"0.0.0.0":            false,
		"::":                 false,
		"fd00::1":            false,
		"fe80::1":            false,
		"::ffff:127.0.0.1":   false,
		"::ffff:10.0.0.1":    false,
		"64:ff9b::a00:1":     false,
		"2002:7f00:1::":      false,
		"224.0.0.1":          false,
		"255.255.255.255":    false,
		"198.18.0.1":         false,
		"::ffff:151.101.0.1": true,
	} {
		if got := Public(netip.MustParseAddr(addr)); got != want {
			t.Errorf("Public(%s) = %v, want %v", addr, got, want)
		}
	}
}

// world stands in for the internet: names resolve through a table, and
// every public address dials the one loopback server listening for its port.
type world struct {
	names    map[string][]netip.Addr
	services map[string]string // port → loopback host:port
	dialed   []string
	// trusted are the non-public ranges the proxy under test was told it
	// may dial.
	trusted []netip.Prefix
}

func (w *world) resolve(_ context.Context, host string) ([]netip.Addr, error) {
	addrs, ok := w.names[host]
	if !ok {
		return nil, fmt.Errorf("no such host %s", host)
	}
	return addrs, nil
}

func (w *world) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	w.dialed = append(w.dialed, addr)
	ip, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	if a := netip.MustParseAddr(ip); !Public(a) && !slices.ContainsFunc(w.trusted, func(p netip.Prefix) bool { return p.Contains(a) }) {
		// The proxy must never get here; if it does, the test sees it.
		return nil, fmt.Errorf("dialled a non-public address %s", addr)
	}
	var d net.Dialer
	return d.DialContext(ctx, network, w.services[port])
}

// startProxy serves a proxy for patterns in w (trusting w.trusted) on
// loopback TCP and returns its URL.
func startProxy(t *testing.T, w *world, patterns ...string) (*Proxy, *url.URL) {
	t.Helper()
	p, err := New(patterns, WithNet(w.resolve, w.dial), WithTrustedRanges(w.trusted))
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = p.Serve(l) }()
	t.Cleanup(func() { _ = p.Close() })
	return p, &url.URL{Scheme: "http", Host: l.Addr().String()}
}

func newWorld(t *testing.T) *world {
	t.Helper()
	tlsSrv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = fmt.Fprintf(w, "tls hello from %s", r.Host)
	}))
	t.Cleanup(tlsSrv.Close)
	plain := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = fmt.Fprintf(w, "plain hello from %s%s", r.Host, r.URL.Path)
	}))
	t.Cleanup(plain.Close)
	pub := netip.MustParseAddr("151.101.0.223")
	return &world{
		names: map[string][]netip.Addr{
			"pypi.org":         {pub},
			"files.pypi.test":  {pub},
			"evil.test":        {pub},
			"internal.test":    {netip.MustParseAddr("10.0.0.5"), netip.MustParseAddr("127.0.0.1")},
			"metadata.test":    {netip.MustParseAddr("169.254.169.254")},
			"mixed.pypi.test":  {netip.MustParseAddr("127.0.0.1"), pub},
			"mapped.pypi.test": {netip.MustParseAddr("::ffff:127.0.0.1")},
		},
		services: map[string]string{
			"443": tlsSrv.Listener.Addr().String(),
			"80":  plain.Listener.Addr().String(),
		},
	}
}

func client(proxy *url.URL) *http.Client {
	return &http.Client{
		Timeout: 10 * time.Second,
		Transport: &http.Transport{
			Proxy: http.ProxyURL(proxy),
			// httptest's certificate names example.com; trust is not what
			// is under test here.
			TLSClientConfig: &tls.Config{InsecureSkipVerify: true},
		},
	}
}

func TestProxyLetsAllowedHostsThrough(t *testing.T) {
	w := newWorld(t)
	_, pu := startProxy(t, w, "pypi.org", "*.pypi.test")
	c := client(pu)
	for _, tc := range []struct{ url, want string }{
		{"https://pypi.org/simple/", "tls hello from pypi.org"},
		{"https://files.pypi.test/x", "tls hello from files.pypi.test"},
		{"http://pypi.org/simple/pandas", "plain hello from pypi.org/simple/pandas"},
		// Only the public address of a mixed answer is dialled.
		{"https://mixed.pypi.test/", "tls hello from mixed.pypi.test"},
	} {
		resp, err := c.Get(tc.url)
		if err != nil {
			t.Fatalf("GET %s: %v", tc.url, err)
		}
		body, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		if resp.StatusCode != 200 || string(body) != tc.want {
			t.Errorf("GET %s = %d %q, want 200 %q", tc.url, resp.StatusCode, body, tc.want)
		}
	}
	for _, d := range w.dialed {
		if !strings.HasPrefix(d, "151.101.0.223:") {
			t.Errorf("dialled %s; only the public address may be", d)
		}
	}
}

// connect sends a raw CONNECT and returns the proxy's status line.
func connect(t *testing.T, proxy *url.URL, target string) string {
	t.Helper()
	c, err := net.DialTimeout("tcp", proxy.Host, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c.Close() }()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	_, _ = fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", target, target)
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		t.Fatalf("CONNECT %s: %v", target, err)
	}
	return strings.TrimSpace(line)
}

func TestProxyRefuses(t *testing.T) {
	w := newWorld(t)
	_, pu := startProxy(t, w, "pypi.org", "*.pypi.test", "internal.test", "metadata.test")
	for _, tc := range []struct{ target, want string }{
		{"evil.test:443", "403 Forbidden (evil.test is not in the sandbox's allowlist"},
		{"pypi.org:22", "403 Forbidden (pypi.org port 22: only https on port 443"},
		{"pypi.org:80", "403 Forbidden (pypi.org port 80: only https on port 443"},
		{"151.101.0.223:443", "403 Forbidden (151.101.0.223 is an address"},
		{"[::1]:443", "403 Forbidden (::1 is an address"},
		{"internal.test:443", "403 Forbidden (internal.test resolves only to private"},
		{"metadata.test:443", "403 Forbidden (metadata.test resolves only to private"},
		{"mapped.pypi.test:443", "403 Forbidden (mapped.pypi.test resolves only to private"},
		{"nowhere.pypi.test:443", "502 Bad Gateway (cannot resolve nowhere.pypi.test"},
	} {
		got := connect(t, pu, tc.target)
		if !strings.HasPrefix(got, "HTTP/1.1 "+tc.want) {
			t.Errorf("CONNECT %s:\n got  %q\n want %q...", tc.target, got, tc.want)
		}
	}
	c := client(pu)
	for _, tc := range []struct {
		url    string
		status int
	}{
		{"http://evil.test/", 403},
		{"http://pypi.org:8080/", 403},
		{"http://internal.test/", 403},
	} {
		resp, err := c.Get(tc.url)
		if err != nil {
			t.Fatalf("GET %s: %v", tc.url, err)
		}
		body, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		if resp.StatusCode != tc.status || !strings.Contains(string(body), "terp egress proxy") {
			t.Errorf("GET %s = %d %q, want %d from terp's proxy", tc.url, resp.StatusCode, body, tc.status)
		}
	}
	for _, d := range w.dialed {
		t.Errorf("a refused request dialled %s", d)
	}
}

// A range the operator trusts (a package mirror on the local network, or a
// resolver that answers for the registries with an address of its own) is
// dialled for the allowed names that resolve into it, and for nothing else.
func TestProxyTrustedRanges(t *testing.T) {
	w := newWorld(t)
	w.names["mirror.test"] = []netip.Addr{netip.MustParseAddr("10.20.0.7")}
	w.trusted = []netip.Prefix{netip.MustParsePrefix("10.20.0.0/16")}
	_, pu := startProxy(t, w, "mirror.test", "internal.test", "evil.test")
	resp, err := client(pu).Get("https://mirror.test/simple/")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if string(body) != "tls hello from mirror.test" {
		t.Errorf("the mirror in a trusted range answered %d %q", resp.StatusCode, body)
	}
	for _, tc := range []struct{ target, want string }{
		{"internal.test:443", "403 Forbidden (internal.test resolves only to private"},
		{"10.20.0.7:443", "403 Forbidden (10.20.0.7 is an address"},
	} {
		if got := connect(t, pu, tc.target); !strings.HasPrefix(got, "HTTP/1.1 "+tc.want) {
			t.Errorf("CONNECT %s:\n got  %q\n want %q...", tc.target, got, tc.want)
		}
	}
	if got := connect(t, pu, "internal.test:443"); !strings.Contains(got, "network_trusted_ranges") {
		t.Errorf("the refusal %q does not say how to trust a range", got)
	}
}

func TestProxyCloseCutsTunnels(t *testing.T) {
	w := newWorld(t)
	p, pu := startProxy(t, w, "pypi.org")
	conn, err := net.Dial("tcp", pu.Host)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = conn.Close() }()
	_, _ = fmt.Fprintf(conn, "CONNECT pypi.org:443 HTTP/1.1\r\nHost: pypi.org:443\r\n\r\n")
	r := bufio.NewReader(conn)
	line, err := r.ReadString('\n')
	if err != nil || !strings.Contains(line, "200") {
		t.Fatalf("CONNECT: %q %v", line, err)
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	_ = conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	for {
		if _, err := r.ReadByte(); err != nil {
			if ne, ok := err.(net.Error); ok && ne.Timeout() {
				t.Fatal("the tunnel stayed open after Close")
			}
			return
		}
	}
}
