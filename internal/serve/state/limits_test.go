package state

import (
	"testing"
	"time"
)

// A bucket of N a minute lets N through at once, then one every 60/N s,
// and holds no more than N however long it was left.
func TestLimitBucket(t *testing.T) {
	t0 := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	var b bucket
	for i := range 60 {
		if _, ok := b.take(t0, 60); !ok {
			t.Fatalf("request %d of a burst of 60 refused", i+1)
		}
	}
	for _, tt := range []struct {
		at   time.Duration
		ok   bool
		wait time.Duration
	}{
		{0, false, time.Second},
		{400 * time.Millisecond, false, 600 * time.Millisecond},
		{time.Second, true, 0},
		{time.Second, false, time.Second},
		{time.Hour, true, 0},
	} {
		wait, ok := b.take(t0.Add(tt.at), 60)
		if ok != tt.ok || (wait-tt.wait).Abs() > time.Millisecond {
			t.Errorf("at +%v: ok %v, wait %v; want %v, %v", tt.at, ok, wait, tt.ok, tt.wait)
		}
	}
	// An hour idle refilled 60, not 3600; one was taken above.
	passed := 0
	for ; passed < 100; passed++ {
		if _, ok := b.take(t0.Add(time.Hour), 60); !ok {
			break
		}
	}
	if passed != 59 {
		t.Errorf("after an hour idle %d passed at once; want the bucket's 60 less the one taken", passed)
	}
}
