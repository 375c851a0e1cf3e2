package terptest

import (
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// TestEveryBuiltBinaryIsRemoved checks that each package whose tests build
// terp with Binary removes it in its TestMain: a package that forgets leaves
// a /tmp/terp-bin-* directory of about 30 MB behind on every run.
func TestEveryBuiltBinaryIsRemoved(t *testing.T) {
	root := filepath.Join("..", "..")
	builds := map[string]bool{}  // package directory -> its tests call Binary
	removes := map[string]bool{} // package directory -> its tests call RemoveBinary
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && strings.HasPrefix(d.Name(), ".") && path != root {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, "_test.go") {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		dir := filepath.Dir(path)
		if strings.Contains(string(src), "terptest.Binary(") {
			builds[dir] = true
		}
		if strings.Contains(string(src), "terptest.RemoveBinary()") {
			removes[dir] = true
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	var missing []string
	for dir := range builds {
		if !removes[dir] {
			missing = append(missing, dir)
		}
	}
	sort.Strings(missing)
	for _, dir := range missing {
		t.Errorf("%s: its tests build terp with terptest.Binary, and no TestMain calls terptest.RemoveBinary", dir)
	}
	if len(builds) == 0 {
		t.Error("found no test that calls terptest.Binary: is the walk looking in the right place?")
	}
}
