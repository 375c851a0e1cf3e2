package main

import (
	"os"
	"testing"

	"github.com/terpdev/terp/internal/terptest"
)

// TestMain removes the terp binary BenchmarkStartup built (terptest.Binary
// builds one per test process into its own temporary directory, which
// nothing else removes).
func TestMain(m *testing.M) {
	code := m.Run()
	terptest.RemoveBinary()
	os.Exit(code)
}
