package local

import (
	"encoding/json"
	"os"
	"testing"
	"time"

	"github.com/terpdev/terp/internal/sandbox"
	"github.com/terpdev/terp/internal/terptest"
)

// readProbeRecord returns the recorded probe of root, failing the test if
// there is none.
func readProbeRecord(t *testing.T, b *Backend) probeRecord {
	t.Helper()
	data, err := os.ReadFile(b.probeRecordPath())
	if err != nil {
		t.Fatalf("no probe record: %v", err)
	}
	var r probeRecord
	if err := json.Unmarshal(data, &r); err != nil {
		t.Fatal(err)
	}
	return r
}

func writeProbeRecord(t *testing.T, b *Backend, r probeRecord) {
	t.Helper()
	data, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(b.probeRecordPath(), data, 0o600); err != nil {
		t.Fatal(err)
	}
}

// createIn creates and closes a sandbox with a new Backend on root, as a new
// terp process would.
func createIn(t *testing.T, root string) *Backend {
	t.Helper()
	b, err := New(Config{Root: root})
	if err != nil {
		t.Fatal(err)
	}
	s, err := b.Create(t.Context(), sandbox.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	return b
}

// TestProbeRecorded: a process that creates a sandbox after another one's
// probe passed does not probe again, unless what the verdict rests on has
// changed, or the record is old; Check (terp doctor) always probes.
func TestProbeRecorded(t *testing.T) {
	t.Parallel()
	root := terptest.TempDir(t)
	b := createIn(t, root)
	first := readProbeRecord(t, b)
	if len(first.Dirs) == 0 {
		t.Fatalf("the record names no library directory: %+v", first)
	}

	// A second process trusts it: the record is unchanged.
	b = createIn(t, root)
	if got := readProbeRecord(t, b); !got.Passed.Equal(first.Passed) {
		t.Fatalf("the second process probed again (passed %s, was %s)", got.Passed, first.Passed)
	}

	// A library directory that changed (apt installed or removed a
	// package) makes the next process probe.
	libs := t.TempDir()
	writeProbeRecord(t, b, probeRecord{Key: b.probeKey([]string{libs}), Dirs: []string{libs}, Passed: first.Passed})
	createIn(t, root)
	if got := readProbeRecord(t, b); !got.Passed.Equal(first.Passed) {
		t.Fatal("a record with the same key was not trusted")
	}
	writeProbeRecord(t, b, probeRecord{Key: b.probeKey([]string{libs}), Dirs: []string{libs}, Passed: first.Passed})
	later := time.Now().Add(time.Minute)
	if err := os.Chtimes(libs, later, later); err != nil {
		t.Fatal(err)
	}
	createIn(t, root)
	second := readProbeRecord(t, b)
	if second.Passed.Equal(first.Passed) || len(second.Dirs) == 0 || second.Dirs[0] == libs {
		t.Fatalf("a changed library directory was trusted: %+v", second)
	}

	// An old record is not trusted.
	old := second
	old.Passed = time.Now().Add(-probeMaxAge - time.Minute)
	writeProbeRecord(t, b, old)
	createIn(t, root)
	if got := readProbeRecord(t, b); got.Passed.Equal(old.Passed) {
		t.Fatal("a record older than probeMaxAge was trusted")
	}

	// Check probes whatever is recorded.
	before := readProbeRecord(t, b)
	fresh, err := New(Config{Root: root})
	if err != nil {
		t.Fatal(err)
	}
	if err := fresh.Check(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got := readProbeRecord(t, b); got.Passed.Equal(before.Passed) {
		t.Fatal("Check trusted the record instead of probing")
	}
}
