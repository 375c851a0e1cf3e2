// Package terptest holds what several packages' tests take from the real
// machine: terp's binary, built once per test process, the Docker image the
// Docker tests run, the Node.js that runs the official Node SDK, and a disk
// small enough to fill. It imports none of terp's packages, so any of their
// tests can use it.
package terptest

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/moby/moby/client"
	"golang.org/x/sys/unix"
)

var build struct {
	sync.Once
	path string
	err  error
}

// BinaryEnv names a terp binary already built, which Binary returns instead
// of building one: a test binary run as another user (make
// test-unprivileged) has no Go toolchain cache of its own to build with.
const BinaryEnv = "TERP_TEST_BINARY"

// Binary builds cmd/terp once per test process and returns its path.
func Binary(t testing.TB) string {
	t.Helper()
	if p := os.Getenv(BinaryEnv); p != "" {
		return p
	}
	build.Do(func() {
		dir, err := os.MkdirTemp("", "terp-bin-")
		if err != nil {
			build.err = err
			return
		}
		build.path = filepath.Join(dir, "terp")
		if out, err := exec.CommandContext(context.Background(), "go", "build", "-o", build.path, "github.com/terpdev/terp/cmd/terp").CombinedOutput(); err != nil {
			build.err = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if build.err != nil {
		t.Fatal(build.err)
	}
	return build.path
}

var docker struct {
	sync.Once
	skip string // why the Docker tests skip; empty when they run
	err  error
	// told is done once the skip was announced: once per test binary,
	// not once per test.
	told sync.Once
}

// NoticesEnv names a file that skip notices are appended to, besides
// stderr. go test shows nothing a passing package printed unless run with
// -v, so `make test` collects the notices there and prints them after the
// run, where they are seen.
const NoticesEnv = "TERP_TEST_NOTICES"

// skipLoudly skips t for a reason the person running the tests must not
// miss: a test that skips passes, and without -v nobody sees why. The reason
// goes to stderr and to the notices file in capitals, once per reason and
// test binary, and then to t.Skip. A notices file that cannot be written is
// a broken test setup, so it fails the test.
func skipLoudly(t testing.TB, once *sync.Once, reason string) {
	t.Helper()
	var err error
	once.Do(func() { err = announce(reason) })
	if err != nil {
		t.Fatalf("write the skip notice to $%s: %v", NoticesEnv, err)
	}
	t.Skip(reason)
}

// SkipLoudly skips t as the Docker and Node tests skip, for helpers outside
// this package (internal/postgres/pgtest): reason is printed in capitals on
// stderr and in the notices file once per once, and .ci/run greps for it.
func SkipLoudly(t testing.TB, once *sync.Once, reason string) {
	t.Helper()
	skipLoudly(t, once, reason)
}

// announce prints the notice for reason on stderr and appends it to the
// notices file, if there is one. go test keys a cached result on the
// environment the test read, and `make test` names a new file each run, so a
// test binary that skipped runs again next time and says so again, instead
// of passing from the cache in silence.
func announce(reason string) error {
	line := "*** " + reason + " ***"
	fmt.Fprintln(os.Stderr, "\n"+line)
	path := os.Getenv(NoticesEnv)
	if path == "" {
		return nil
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintln(f, line)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// DockerImage returns the image the Docker tests run: the one `make
// docker-test-image` builds, or TERP_TEST_DOCKER_IMAGE. Without a daemon at
// DOCKER_HOST (or the default socket), or without the image, the test is
// skipped, loudly: those are the only reasons to skip.
func DockerImage(t testing.TB) string {
	t.Helper()
	img := os.Getenv("TERP_TEST_DOCKER_IMAGE")
	if img == "" {
		img = "terp-python:debian12"
	}
	docker.Do(func() {
		cli, err := client.New(client.FromEnv)
		if err != nil {
			docker.err = err
			return
		}
		defer func() { _ = cli.Close() }()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if _, err := cli.Ping(ctx, client.PingOptions{}); err != nil {
			docker.skip = fmt.Sprintf("DOCKER TESTS SKIPPED: no daemon at %s: %v", cli.DaemonHost(), err)
		} else if _, err := cli.ImageInspect(ctx, img); err != nil {
			docker.skip = fmt.Sprintf("DOCKER TESTS SKIPPED: the test image %s is missing; run `make docker-test-image` (or set TERP_TEST_DOCKER_IMAGE)", img)
		}
	})
	if docker.err != nil {
		t.Fatal(docker.err)
	}
	if docker.skip != "" {
		skipLoudly(t, &docker.told, docker.skip)
	}
	return img
}

// NodeMin is the oldest Node.js, major and minor, the tests' npm packages
// run on: the MCP Inspector 2 needs 22.19 (npm's openai 6 needs 20). The
// Makefile's NODE_MIN says the same.
var NodeMin = [2]int{22, 19}

// Node24Min is the oldest Node.js the packages of testdata/node24 run on:
// the newest @librechat/agents needs 24. The Makefile's NODE24_MIN says the
// same.
var Node24Min = [2]int{24, 0}

// nodeTold is done once Node's skip was announced.
var nodeTold sync.Once

// Node returns the node binary that runs the scripts of pkg, an npm package
// directory whose node_modules must hold every name in needs, on Node.js
// NodeMin or later; see NodeAtLeast.
func Node(t testing.TB, pkg string, needs ...string) string {
	t.Helper()
	return NodeAtLeast(t, pkg, NodeMin, needs...)
}

// NodeAtLeast returns the node binary, of Node.js min or later, that runs
// the scripts of pkg, an npm package directory whose node_modules must hold
// every name in needs. The Node.js that `make test-deps` installs into
// pkg/runtime, on a machine whose own is older than min, comes first; then
// node on PATH. Without a recent enough node or without the packages the
// test is skipped, loudly, saying how to install them.
func NodeAtLeast(t testing.TB, pkg string, min [2]int, needs ...string) string {
	t.Helper()
	install := fmt.Sprintf("run `make test-deps`, or install Node.js %d.%d+ and `npm ci --prefix %s`", min[0], min[1], fromRoot(pkg))
	node := filepath.Join(pkg, "runtime", "node_modules", ".bin", "node")
	if _, err := os.Stat(node); err != nil {
		if node, err = exec.LookPath("node"); err != nil {
			skipLoudly(t, &nodeTold, "NODE TESTS SKIPPED: no node on PATH; "+install)
		}
	}
	out, err := exec.CommandContext(context.Background(), node, "--version").Output()
	if err != nil {
		t.Fatalf("%s --version: %v", node, err)
	}
	version := strings.TrimSpace(string(out))
	var got [2]int
	_, _ = fmt.Sscanf(version, "v%d.%d", &got[0], &got[1])
	if got[0] < min[0] || got[0] == min[0] && got[1] < min[1] {
		skipLoudly(t, &nodeTold, fmt.Sprintf("NODE TESTS SKIPPED: %s is Node.js %s, older than %d.%d; %s", node, version, min[0], min[1], install))
	}
	for _, name := range needs {
		if _, err := os.Stat(filepath.Join(pkg, "node_modules", name, "package.json")); err != nil {
			skipLoudly(t, &nodeTold, fmt.Sprintf("NODE TESTS SKIPPED: the npm package %s is not installed in %s; %s", name, fromRoot(pkg), install))
		}
	}
	abs, err := filepath.Abs(node)
	if err != nil {
		t.Fatal(err)
	}
	return abs
}

// ArtifactsEnv names a directory for what tests leave for a person to look
// at (screenshots, reports), such as CI's artifacts.
const ArtifactsEnv = "TERP_TEST_ARTIFACTS"

// ArtifactsDir is where a test writes what a person should be able to look
// at after the run: $TERP_TEST_ARTIFACTS (made if need be; .ci/run sets
// it), or else the test's temporary directory.
func ArtifactsDir(t testing.TB) string {
	t.Helper()
	dir := os.Getenv(ArtifactsEnv)
	if dir == "" {
		return t.TempDir()
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// JupyterDebs are Debian's packages that run notebooks for the tests; the
// Makefile's TEST_DEBS holds them too.
const JupyterDebs = "python3-nbformat python3-nbclient python3-ipykernel"

// jupyterTold is done once Jupyter's skip was announced.
var jupyterTold sync.Once

// JupyterPython returns the Python that validates and runs notebooks for
// the tests: Debian's /usr/bin/python3, never the first python3 on PATH
// (often a pyenv one without Debian's libraries), with nbformat, nbclient
// and a python3 kernel (ipykernel's, which runs /usr/bin/python3 too).
// Without them the test is skipped, loudly, saying what to install.
func JupyterPython(t testing.TB) string {
	t.Helper()
	const python = "/usr/bin/python3"
	probe := "import nbformat, nbclient, ipykernel\n" +
		"from jupyter_client.kernelspec import KernelSpecManager\n" +
		"KernelSpecManager().get_kernel_spec('python3')"
	out, err := exec.CommandContext(context.Background(), python, "-c", probe).CombinedOutput()
	if err != nil {
		why := strings.TrimSpace(string(out))
		if i := strings.LastIndexByte(why, '\n'); i >= 0 {
			why = why[i+1:]
		}
		if why == "" {
			why = err.Error()
		}
		skipLoudly(t, &jupyterTold, fmt.Sprintf("JUPYTER TESTS SKIPPED: %s cannot run notebooks (%s); run `make test-deps` (Debian's %s)", python, why, JupyterDebs))
	}
	return python
}

// RunNotebook runs script (internal/export/testdata/run_notebook.py: it
// validates the notebook nb, runs it with nbclient in its directory and
// prints JSON) with JupyterPython, and returns what it printed. Jupyter's
// connection files and IPython's profile go to the test's directories, and
// a PYTHONPATH meant for another Python is dropped.
func RunNotebook(t testing.TB, script, nb string) []byte {
	t.Helper()
	python := JupyterPython(t)
	script, err := filepath.Abs(script)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, python, script, nb)
	cmd.Dir = filepath.Dir(nb)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "PYTHONPATH=") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, "JUPYTER_RUNTIME_DIR="+t.TempDir(), "IPYTHONDIR="+t.TempDir())
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", filepath.Base(script), nb, err, stderr.String())
	}
	return out
}

// fromRoot is path relative to the module's root, where a command to fix
// the tests' setup is run; or path itself when that is not found.
func fromRoot(path string) string {
	abs, err := filepath.Abs(path)
	if err != nil {
		return path
	}
	for dir := filepath.Dir(abs); dir != filepath.Dir(dir); dir = filepath.Dir(dir) {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			if rel, err := filepath.Rel(dir, abs); err == nil {
				return rel
			}
		}
	}
	return path
}

// RemoveBinary removes what Binary built, if it built anything. A TestMain
// calls it after the tests ran.
func RemoveBinary() {
	if build.path != "" {
		_ = os.RemoveAll(filepath.Dir(build.path))
	}
}

// TempDir is t.TempDir for a directory that holds local sandboxes (a
// backend's Root, or a data directory with one below it). As root, terp runs
// each sandbox as an unprivileged uid of its own, which must be able to
// search every directory above its files; t.TempDir's own parent is private
// (0700), so TempDir lets others search it, not list it.
func TempDir(t testing.TB) string {
	t.Helper()
	dir := t.TempDir()
	if os.Geteuid() == 0 {
		if err := os.Chmod(filepath.Dir(dir), 0o711); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// smallDiskTold is done once SmallDisk's skip was announced.
var smallDiskTold sync.Once

// SmallDisk mounts a tmpfs of size bytes on a new temporary directory and
// returns the directory, for tests of what terp does when its disk fills up:
// a file system that small fills in a moment, and frees at once. Mounting
// needs root; without it the test is skipped, loudly. The file system is
// unmounted when the test ends.
func SmallDisk(t testing.TB, size int64) string {
	t.Helper()
	if os.Geteuid() != 0 {
		skipLoudly(t, &smallDiskTold, "FULL-DISK TEST SKIPPED: it needs root to mount a tmpfs")
	}
	dir := TempDir(t)
	if err := unix.Mount("tmpfs", dir, "tmpfs", 0, fmt.Sprintf("size=%d,mode=0711", size)); err != nil {
		t.Fatalf("mount a tmpfs of %d bytes on %s: %v", size, dir, err)
	}
	// Registered after TempDir's own cleanup, so it runs first: the mount
	// goes before the directory does.
	t.Cleanup(func() {
		if err := unix.Unmount(dir, unix.MNT_DETACH); err != nil {
			t.Errorf("unmount %s: %v", dir, err)
		}
	})
	return dir
}

// ChromiumEnv names the Chromium (or Chrome) binary the browser tests drive,
// instead of the one on PATH.
const ChromiumEnv = "TERP_TEST_CHROMIUM"

// chromiumTold is done once the browser tests' skip was announced.
var chromiumTold sync.Once

// Chromium returns the browser that the tests of terp's web pages open
// them in: $TERP_TEST_CHROMIUM, or Debian's chromium on PATH (`make
// test-deps` installs it). Without one the test is skipped, loudly.
func Chromium(t testing.TB) string {
	t.Helper()
	if p := os.Getenv(ChromiumEnv); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	skipLoudly(t, &chromiumTold, "BROWSER TESTS SKIPPED: no chromium on PATH; run `make test-deps` (or apt-get install chromium), or set "+ChromiumEnv)
	return ""
}

// RefusedAddr is a loopback address where nothing listens: port 1, which
// is outside the range the kernel hands out to listeners on port 0 and
// which tests cannot bind without privileges. A server started and closed
// to get a dead address is not one: a test running beside it may be given
// the same port a moment later (seen in CI: a "down" model server answered
// as another test's). The test fails if something answers there.
func RefusedAddr(t testing.TB) string {
	t.Helper()
	const addr = "127.0.0.1:1"
	d := net.Dialer{Timeout: time.Second}
	if c, err := d.DialContext(context.Background(), "tcp", addr); err == nil {
		_ = c.Close()
		t.Fatalf("something listens on %s, which these tests take for a dead address", addr)
	}
	return addr
}
