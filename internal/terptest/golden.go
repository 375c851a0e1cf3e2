package terptest

import (
	"flag"
	"os"
	"testing"
)

// update is -update, which every package's golden-file tests share:
// `go test ./internal/tui -update` rewrites that package's golden files
// from what its tests produce, for a person to read in the diff.
var update = flag.Bool("update", false, "rewrite the golden files under testdata from what the tests produce")

// Golden fails t unless got is what the file at path holds; with -update it
// writes got there first. show, if not nil, turns each side into what the
// failure message prints (the terminal UI strips its escape sequences).
func Golden(t testing.TB, path string, got []byte, show func(string) string) {
	t.Helper()
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (go test -run '%s' -update writes it; then read it)", err, t.Name())
	}
	if string(got) == string(want) {
		return
	}
	if show == nil {
		show = func(s string) string { return s }
	}
	t.Errorf("%s differs from what the test produced (go test -run '%s' -update rewrites it; then read the diff):\n--- got\n%s\n--- want\n%s",
		path, t.Name(), show(string(got)), show(string(want)))
}
