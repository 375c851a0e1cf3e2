// Package egresstest stands loopback servers in for public hosts, for tests of
// the allowlist network mode. The proxy rightly refuses loopback addresses,
// and no public host is reachable where the tests run; with these options it
// resolves a few names to a public address and dials that address into local
// servers, while everything between the code and the proxy stays real.
//
// The names: pypi.org and evil.example resolve to 151.101.0.223 (HTTPS on
// 443, HTTP on 80, both answering "hello from HOST"), and intranet.pypi.org to
// 10.1.2.3. http://pypi.org/simple/terpdemo/ is a package index with one
// pure-Python wheel, terpdemo 1.0, whose module holds VALUE = 42.
package egresstest

import (
	"archive/zip"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"

	"github.com/terpdev/terp/internal/egress"
)

// PublicAddr is the address the stand-in names resolve to.
var PublicAddr = netip.MustParseAddr("151.101.0.223")

// Options returns proxy options that route the stand-in names to servers
// closed when the test ends.
func Options(t testing.TB) []egress.Option {
	t.Helper()
	wheel := demoWheel(t)
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/simple/terpdemo/":
			_, _ = fmt.Fprint(w, `<a href="/packages/terpdemo-1.0-py3-none-any.whl">terpdemo-1.0-py3-none-any.whl</a>`)
		case "/packages/terpdemo-1.0-py3-none-any.whl":
			_, _ = w.Write(wheel)
		default:
			_, _ = fmt.Fprintf(w, "hello from %s", r.Host)
		}
	})
	tlsSrv := httptest.NewTLSServer(h)
	t.Cleanup(tlsSrv.Close)
	plain := httptest.NewServer(h)
	t.Cleanup(plain.Close)
	resolve := func(_ context.Context, host string) ([]netip.Addr, error) {
		switch host {
		case "pypi.org", "evil.example":
			return []netip.Addr{PublicAddr}, nil
		case "intranet.pypi.org":
			return []netip.Addr{netip.MustParseAddr("10.1.2.3")}, nil
		}
		return nil, fmt.Errorf("no such host %s", host)
	}
	dial := func(ctx context.Context, network, addr string) (net.Conn, error) {
		target := tlsSrv.Listener.Addr().String()
		if strings.HasSuffix(addr, ":80") {
			target = plain.Listener.Addr().String()
		}
		var d net.Dialer
		return d.DialContext(ctx, network, target)
	}
	return []egress.Option{egress.WithNet(resolve, dial)}
}

// demoWheel is a minimal pure-Python wheel: module terpdemo with VALUE = 42.
func demoWheel(t testing.TB) []byte {
	t.Helper()
	var buf bytes.Buffer
	z := zip.NewWriter(&buf)
	for _, f := range []struct{ name, body string }{
		{"terpdemo/__init__.py", "VALUE = 42\n"},
		{"terpdemo-1.0.dist-info/METADATA", "Metadata-Version: 2.1\nName: terpdemo\nVersion: 1.0\n"},
		{"terpdemo-1.0.dist-info/WHEEL", "Wheel-Version: 1.0\nGenerator: terp-test\nRoot-Is-Purelib: true\nTag: py3-none-any\n"},
		{"terpdemo-1.0.dist-info/RECORD", "terpdemo/__init__.py,,\nterpdemo-1.0.dist-info/METADATA,,\nterpdemo-1.0.dist-info/WHEEL,,\nterpdemo-1.0.dist-info/RECORD,,\n"},
	} {
		w, err := z.Create(f.name)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.WriteString(w, f.body)
	}
	if err := z.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// Probe is Python that fetches through the proxy the environment names, the
// way the model's code would, and tries the ways around it. Its %d is a port
// on the host's loopback that must stay out of reach. Every line of Want is
// in its output when the sandbox holds.
const Probe = `
import os, socket, ssl, urllib.request
ctx = ssl._create_unverified_context()  # httptest's certificate; trust is not under test
def get(url):
    try:
        with urllib.request.urlopen(url, context=ctx, timeout=10) as r:
            return "%%d %%s" %% (r.status, r.read().decode())
    except Exception as e:
        return "error: %%s" %% e
print("allowed:", get("https://pypi.org/simple/"))
print("plain:", get("http://pypi.org/simple/"))
print("denied:", get("https://evil.example/"))
print("private:", get("https://intranet.pypi.org/"))
for name, addr in (("public", ("151.101.0.223", 443)), ("host", ("127.0.0.1", %d))):
    s = socket.socket()
    s.settimeout(3)
    try:
        s.connect(addr)
        print(name + " direct: connected")
    except OSError as e:
        print(name + " direct: failed")
try:
    socket.getaddrinfo("pypi.org", 443)
    print("dns: resolved")
except OSError:
    print("dns: failed")
`

// Want are the lines Probe prints in a sandbox whose allowlist is
// "pypi.org" and "*.pypi.org".
var Want = []string{
	"allowed: 200 hello from pypi.org",
	"plain: 200 hello from pypi.org",
	"denied: error: <urlopen error Tunnel connection failed: 403 Forbidden (evil.example is not in the sandbox's allowlist",
	"private: error: <urlopen error Tunnel connection failed: 403 Forbidden (intranet.pypi.org resolves only to private",
	"public direct: failed",
	"host direct: failed",
	"dns: failed",
}
