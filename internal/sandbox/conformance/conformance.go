// Package conformance is the test suite every sandbox backend passes. A new
// backend is added by calling Run from its own tests:
//
//	func TestConformance(t *testing.T) {
//		conformance.Run(t, func(t *testing.T) sandbox.Backend { return newBackend(t) })
//	}
//
// The suite checks the rules package sandbox states for every backend: files
// round-trip byte for byte, paths stay inside /work, output is bounded, a
// timed-out command is killed with its children, the network is off and the
// host environment invisible, pause and resume keep files, the persistent
// kernel runs on the sandbox, and Close removes everything. Bench (bench.go)
// measures every backend with the same code, so their numbers compare.
//
// Most of the suite is the contract alone (RunContract): files, listings,
// exit codes, streams, bounds, timeouts and the lifecycle, with commands
// named rather than written in sh (commands.go). A backend that runs no
// shell or Python, such as package memory's, runs that part with programs
// of the same names; Run runs it with sh scripts, then the checks that need
// a real shell and Python.
package conformance

import (
	"bytes"
	"context"
	"io"
	"testing"
	"time"

	"github.com/terpdev/terp/internal/sandbox"
)

// check is one subtest of the suite.
type check struct {
	name string
	fn   func(t *testing.T, b sandbox.Backend, cmds Commands)
}

// Run runs the whole suite on a backend with sh and python3.
// newBackend is called once per subtest.
func Run(t *testing.T, newBackend func(t *testing.T) sandbox.Backend) {
	runChecks(t, newBackend, Shell, append(contract, shellChecks...))
}

// RunContract runs the checks that need no shell or Python, with cmds
// saying how the backend runs each of their commands (Programs, for a
// backend given programs by name). newBackend is called once per subtest.
func RunContract(t *testing.T, newBackend func(t *testing.T) sandbox.Backend, cmds Commands) {
	runChecks(t, newBackend, cmds, contract)
}

func runChecks(t *testing.T, newBackend func(t *testing.T) sandbox.Backend, cmds Commands, checks []check) {
	for _, c := range checks {
		t.Run(c.name, func(t *testing.T) { c.fn(t, newBackend(t), cmds) })
	}
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return c
}

// create makes a sandbox that is closed when the test ends.
func create(t *testing.T, b sandbox.Backend) sandbox.Sandbox {
	t.Helper()
	sbx, err := b.Create(ctx(t), sandbox.Options{Timeout: 10 * time.Minute})
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	t.Cleanup(func() { _ = sbx.Close(context.Background()) })
	return sbx
}

func write(t *testing.T, sbx sandbox.Sandbox, path string, data []byte) {
	t.Helper()
	if err := sbx.WriteFile(ctx(t), path, bytes.NewReader(data)); err != nil {
		t.Fatalf("WriteFile %s: %v", path, err)
	}
}

func read(t *testing.T, sbx sandbox.Sandbox, path string) []byte {
	t.Helper()
	rc, err := sbx.ReadFile(ctx(t), path)
	if err != nil {
		t.Fatalf("ReadFile %s: %v", path, err)
	}
	defer rc.Close()
	data, err := io.ReadAll(rc)
	if err != nil {
		t.Fatalf("ReadFile %s: %v", path, err)
	}
	return data
}

// exec runs cmd, failing the test if the sandbox fails to.
func exec(t *testing.T, sbx sandbox.Sandbox, cmd []string, opt sandbox.ExecOptions) sandbox.ExecResult {
	t.Helper()
	res, err := sbx.Exec(ctx(t), cmd, opt)
	if err != nil {
		t.Fatalf("Exec %q: %v", cmd, err)
	}
	return res
}

// sh runs script with sh -c.
func sh(t *testing.T, sbx sandbox.Sandbox, script string, opt sandbox.ExecOptions) sandbox.ExecResult {
	t.Helper()
	return exec(t, sbx, []string{"sh", "-c", script}, opt)
}
