package docker

import (
	"testing"

	"github.com/terpdev/terp/internal/sandbox"
	"github.com/terpdev/terp/internal/sandbox/conformance"
)

func TestConformance(t *testing.T) {
	conformance.Run(t, func(t *testing.T) sandbox.Backend { return newBackend(t) })
}

func BenchmarkBackend(b *testing.B) {
	conformance.Bench(b, func(b *testing.B) sandbox.Backend { return newBackend(b) })
}
