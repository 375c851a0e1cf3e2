package egress

import (
	_ "embed"
	"path"
	"strconv"

	"github.com/terpdev/terp/internal/sandbox"
)

// bridgeScript is the inside half of the allowlist mode. It is Python because
// every sandbox has Python (it is what the sandbox is for), whatever its
// libc or architecture, so the same bridge serves every backend.
//
//go:embed bridge.py
var bridgeScript string

// Where the bridge listens inside the sandbox, on its own loopback, and
// where backends bind the proxy's Unix socket.
const (
	BridgePort = 3128
	SocketPath = "/run/terp/egress.sock"
)

// Wrap returns the command line that starts the bridge with the given
// Python and then becomes cmd. The bridge costs one Python start (about
// 10 ms) per command, and only in the allowlist mode.
func Wrap(python string, cmd []string) []string {
	out := []string{python, "-I", "-S", "-c", bridgeScript, strconv.Itoa(BridgePort), SocketPath, "--"}
	return append(out, cmd...)
}

// UserBase is where `pip install` puts packages in the allowlist mode: under
// terp's own directory in /work, so they persist across steps and pauses
// like the files do, are importable (Python's user site), and are not shown
// to the user as files the code saved.
var UserBase = path.Join(sandbox.WorkDir, ".terp", "python")

// Env is the environment of every command in the allowlist mode: the proxy
// for the libraries that read it (pip, requests, urllib, httpx, curl) and
// pip's settings for a sandbox whose system site is read-only.
func Env() [][2]string {
	proxy := "http://127.0.0.1:" + strconv.Itoa(BridgePort)
	return [][2]string{
		{"HTTP_PROXY", proxy},
		{"HTTPS_PROXY", proxy},
		{"http_proxy", proxy},
		{"https_proxy", proxy},
		{"NO_PROXY", "localhost,127.0.0.1,::1"},
		{"no_proxy", "localhost,127.0.0.1,::1"},
		{"PIP_PROXY", proxy},
		{"PIP_USER", "1"},
		{"PIP_BREAK_SYSTEM_PACKAGES", "1"},
		{"PIP_DISABLE_PIP_VERSION_CHECK", "1"},
		{"PIP_NO_INPUT", "1"},
		{"PYTHONUSERBASE", UserBase},
	}
}
