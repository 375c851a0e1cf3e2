package local

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/terpdev/terp/internal/sandbox"
	"github.com/terpdev/terp/internal/terptest"
)

// TestFontSeed: the first sandbox's check builds matplotlib's font cache
// in a sandbox of its own, and removes one kept under another key (fonts
// or Python changed since) a day ago, not one another terp may be using;
// commands see it read-only at the path TERP_FONTLIST names; a new process
// on the same root finds it at once; and a cache removed under a running
// backend does not fail its commands.
func TestFontSeed(t *testing.T) {
	t.Parallel()
	root := terptest.TempDir(t)
	stale := filepath.Join(root, ".fontlist", "0123456789abcdef0123456789abcdef")
	if err := os.MkdirAll(stale, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(stale, "fontlist-v330.json"), []byte(`{"_version": 330}`), 0o644); err != nil {
		t.Fatal(err)
	}
	// One of another terp on this root, built recently, stays.
	other := filepath.Join(root, ".fontlist", "fedcba9876543210fedcba9876543210")
	if err := os.MkdirAll(other, 0o755); err != nil {
		t.Fatal(err)
	}
	old := time.Now().Add(-probeMaxAge - time.Minute)
	if err := os.Chtimes(stale, old, old); err != nil {
		t.Fatal(err)
	}
	b := createIn(t, root)
	host := b.FontCache()
	if host == "" {
		t.Fatal("no font cache after the first sandbox")
	}
	if filepath.Dir(host) == stale {
		t.Fatalf("the cache of another key was used: %s", host)
	}
	if _, err := os.Stat(stale); !os.IsNotExist(err) {
		t.Errorf("the day-old cache of another key is left: %v", err)
	}
	if _, err := os.Stat(other); err != nil {
		t.Errorf("the recent cache of another key was removed: %v", err)
	}
	data, err := os.ReadFile(host)
	if err != nil {
		t.Fatal(err)
	}
	var cache struct {
		Version  any               `json:"_version"`
		TTFList  []json.RawMessage `json:"ttflist"`
		Defaults map[string]string `json:"defaultFamily"`
	}
	if err := json.Unmarshal(data, &cache); err != nil || cache.Version == nil || len(cache.TTFList) == 0 {
		t.Fatalf("not matplotlib's font cache (%v): %.200s", err, data)
	}

	s, err := b.Create(t.Context(), sandbox.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close(t.Context()) })
	res, err := s.Exec(t.Context(), []string{"python3", "-c", `import os, sys
p = os.environ["TERP_FONTLIST"]
sys.stdout.write(open(p).read())
try:
    open(p, "a").write("x")
    print("WRITABLE", file=sys.stderr)
except OSError as e:
    print(e.strerror, file=sys.stderr)
`}, sandbox.ExecOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if res.ExitCode != 0 || res.Stdout != string(data) || strings.Contains(res.Stderr, "WRITABLE") {
		t.Fatalf("exit %d, the cache seen in the sandbox is the host's: %v, stderr %q",
			res.ExitCode, res.Stdout == string(data), res.Stderr)
	}

	again := createIn(t, root)
	if p := again.FontCache(); p != host {
		t.Errorf("a new process on the same root: font cache %q, want %q at once", p, host)
	}

	if err := os.RemoveAll(filepath.Dir(host)); err != nil {
		t.Fatal(err)
	}
	res, err = s.Exec(t.Context(), []string{"true"}, sandbox.ExecOptions{})
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("with the cache removed: %v, %+v", err, res)
	}
}

// TestFontSeedFailureRemembered: a build that failed (here, a record of one)
// is not tried again by the next process for an hour; after that it is,
// and a success removes the record.
func TestFontSeedFailureRemembered(t *testing.T) {
	t.Parallel()
	root := terptest.TempDir(t)
	b := createIn(t, root)
	host := b.FontCache()
	if host == "" {
		t.Fatal("no font cache after the first sandbox")
	}
	if err := os.RemoveAll(filepath.Dir(host)); err != nil {
		t.Fatal(err)
	}
	failed := filepath.Join(root, ".fontlist", b.fontKey()+".failed")
	if err := os.WriteFile(failed, []byte("exit 1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if p := createIn(t, root).FontCache(); p != "" {
		t.Fatalf("a build failed a moment ago, yet the next process built %s", p)
	}
	old := time.Now().Add(-fontSeedRetry - time.Minute)
	if err := os.Chtimes(failed, old, old); err != nil {
		t.Fatal(err)
	}
	if p := createIn(t, root).FontCache(); p == "" {
		t.Fatal("an hour after a failed build, the next process did not build the cache")
	}
	if _, err := os.Stat(failed); !os.IsNotExist(err) {
		t.Errorf("the record of the failed build is left after a success: %v", err)
	}
}
