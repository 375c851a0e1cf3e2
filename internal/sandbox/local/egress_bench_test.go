package local

import (
	"testing"

	"github.com/terpdev/terp/internal/sandbox"
)

// BenchmarkExecPrint1Allowlist is BenchmarkExecPrint1 in the allowlist mode:
// the difference is the bridge's Python start and fork before the command.
func BenchmarkExecPrint1Allowlist(b *testing.B) {
	s := newSandbox(b, sandbox.Options{Network: sandbox.Network{Mode: sandbox.NetworkAllowlist, Allow: []string{"pypi.org"}}})
	for b.Loop() {
		res, err := s.Exec(b.Context(), print1, sandbox.ExecOptions{})
		if err != nil || res.Stdout != "1\n" {
			b.Fatalf("Exec = %+v, %v", res, err)
		}
	}
}
