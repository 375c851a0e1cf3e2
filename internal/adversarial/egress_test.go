package adversarial

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/terpdev/terp/internal/sandbox"
)

// egressEscapes is code in the allowlist mode trying every way past the
// proxy to the host's loopback listener, cloud metadata and the LAN. Names
// are resolved by the real resolver: "localhost" is allowlisted on purpose,
// so only the proxy's refusal of loopback addresses stands in the way.
const egressEscapes = `
import os, socket, urllib.request, http.client
# An explicit proxy handler: NO_PROXY would send localhost straight to the
# sandbox's own (empty) loopback, and the point is to test the proxy.
P = os.environ["HTTPS_PROXY"]
os.environ.pop("NO_PROXY"); os.environ.pop("no_proxy")
opener = urllib.request.build_opener(urllib.request.ProxyHandler({"http": P, "https": P}))
def via_proxy(url):
    try:
        with opener.open(url, timeout=10) as r:
            return "ok %%d" %% r.status
    except Exception as e:
        return "refused: %%s" %% e
def raw(data, path=None):
    try:
        if path:
            s = socket.socket(socket.AF_UNIX); s.connect(path)
        else:
            s = socket.create_connection(("127.0.0.1", 3128), timeout=5)
        s.settimeout(10); s.sendall(data)
        return s.recv(300).decode(errors="replace").splitlines()[0]
    except Exception as e:
        return "error: %%s" %% e
print("allowlisted-name-to-loopback:", via_proxy("https://localhost:443/"))
print("allowlisted-name-plain-http:", via_proxy("http://localhost/"))
print("address-literal:", via_proxy("https://127.0.0.1:%d/"))
print("metadata:", via_proxy("http://169.254.169.254/latest/meta-data/"))
print("not-allowlisted:", via_proxy("https://example.com/"))
print("connect-other-port:", raw(b"CONNECT localhost:%d HTTP/1.1\r\nHost: localhost\r\n\r\n"))
print("connect-via-socket:", raw(b"CONNECT 127.0.0.1:%d HTTP/1.1\r\nHost: x\r\n\r\n", "/run/terp/egress.sock"))
print("garbage-to-bridge:", raw(b"\x16\x03\x01 hello, not http\r\n\r\n"))
for k in ("HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy"):
    os.environ.pop(k, None)
try:
    socket.create_connection(("127.0.0.1", %d), timeout=3); print("direct: connected")
except OSError:
    print("direct: failed")
try:
    socket.getaddrinfo("pypi.org", 443); print("dns: resolved")
except OSError:
    print("dns: failed")
try:
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.sendto(b"x", ("8.8.8.8", 53)); print("udp: sent")
except OSError:
    print("udp: failed")
`

func TestHostileEgress(t *testing.T) {
	t.Parallel()
	before := host.accepted.Load()
	sbx := newSandbox(t, sandbox.Options{Network: sandbox.Network{
		Mode: sandbox.NetworkAllowlist, Allow: []string{"localhost", "pypi.org"},
	}})
	p := host.port
	res := runScript(t, sbx, fmt.Sprintf(egressEscapes, p, p, p, p), time.Minute)
	t.Logf("stdout:\n%s\nstderr:\n%s", res.Stdout, clip(res.Stderr))
	for _, want := range []string{
		"allowlisted-name-to-loopback: refused: <urlopen error Tunnel connection failed: 403 Forbidden (localhost resolves only to private",
		"allowlisted-name-plain-http: refused: HTTP Error 403",
		"address-literal: refused: <urlopen error Tunnel connection failed: 403 Forbidden (127.0.0.1 is an address",
		"metadata: refused: HTTP Error 403",
		"not-allowlisted: refused: <urlopen error Tunnel connection failed: 403 Forbidden (example.com is not in the sandbox's allowlist",
		"connect-other-port: HTTP/1.1 403 Forbidden (localhost port",
		"connect-via-socket: HTTP/1.1 403 Forbidden (127.0.0.1 is an address",
		"garbage-to-bridge: HTTP/1.1 400 Bad Request",
		"direct: failed",
		"dns: failed",
		"udp: failed",
	} {
		if !strings.Contains(res.Stdout, want) {
			t.Errorf("stdout lacks %q", want)
		}
	}
	if n := host.accepted.Load() - before; n != 0 {
		t.Errorf("the host's loopback listener accepted %d connections from the sandbox", n)
	}
	alive := runScript(t, sbx, "print('alive')", 30*time.Second)
	if strings.TrimSpace(alive.Stdout) != "alive" {
		t.Errorf("the next step: %+v", alive)
	}
}
