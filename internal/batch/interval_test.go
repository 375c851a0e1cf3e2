package batch

import (
	"math"
	"strings"
	"testing"
)

func TestWilson(t *testing.T) {
	// The values of the Wilson score interval's published tables
	// (Newcombe 1998, table I: 0/10, 5/10, 81/263).
	tests := []struct {
		passed, n int
		lo, hi    float64
	}{
		{0, 10, 0, 0.2775},
		{5, 10, 0.2366, 0.7634},
		{81, 263, 0.2553, 0.3662},
		{10, 10, 0.7225, 1},
		{0, 0, 0, 1},
	}
	for _, tt := range tests {
		lo, hi := Wilson(tt.passed, tt.n)
		if math.Abs(lo-tt.lo) > 5e-5 || math.Abs(hi-tt.hi) > 5e-5 {
			t.Errorf("Wilson(%d, %d) = %.4f–%.4f, want %.4f–%.4f", tt.passed, tt.n, lo, hi, tt.lo, tt.hi)
		}
	}
}

// Two models 5 points apart on one run of 100 cases cannot be told apart;
// 30 points apart they can.
func TestSeparation(t *testing.T) {
	stat := func(model string, passed, n int) Stats {
		s := Stats{Model: model, Passed: passed, Failed: n - passed, PassAt1: float64(passed) / float64(n)}
		s.Lo, s.Hi = Wilson(passed, n)
		return s
	}
	got := Separation([]Stats{stat("a", 60, 100), stat("b", 65, 100), stat("c", 30, 100), {Model: "none"}})
	want := []string{
		"b (55.3–73.6%) and a (50.2–69.1%): the 95% intervals overlap",
		"a (50.2–69.1%) is ahead of c (21.9–39.6%): the 95% intervals do not overlap.",
		"b (55.3–73.6%) is ahead of c (21.9–39.6%)",
	}
	if len(got) != len(want) {
		t.Fatalf("got %d sentences, want %d (none for a model without runs):\n%s", len(got), len(want), strings.Join(got, "\n"))
	}
	for i := range want {
		if !strings.HasPrefix(got[i], want[i]) {
			t.Errorf("sentence %d = %q, want it to start %q", i, got[i], want[i])
		}
	}
}
