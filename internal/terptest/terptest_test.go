package terptest

import (
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// helperEnv makes this test binary, run again by TestDockerSkipNotice, play
// a package whose Docker tests skip.
const helperEnv = "TERPTEST_DOCKER_HELPER"

// TestDockerSkipHelper is two Docker tests of a package; it does nothing
// unless TestDockerSkipNotice runs it.
func TestDockerSkipHelper(t *testing.T) {
	if os.Getenv(helperEnv) == "" {
		t.Skip("run by TestDockerSkipNotice")
	}
	for _, name := range []string{"first", "second"} {
		t.Run(name, func(t *testing.T) {
			DockerImage(t)
			t.Error("DockerImage returned without a daemon")
		})
	}
}

// TestDockerSkipNotice runs a test binary whose Docker tests skip, no daemon
// answering, and checks that the notice is printed once, in capitals, on
// stderr and in the notices file `make test` prints after go test, which
// hides whatever a passing package printed.
func TestDockerSkipNotice(t *testing.T) {
	notices := filepath.Join(t.TempDir(), "notices")
	cmd := exec.Command(os.Args[0], "-test.run", "^TestDockerSkipHelper$")
	cmd.Env = append(os.Environ(), helperEnv+"=1", "DOCKER_HOST=unix:///nonexistent/docker.sock", NoticesEnv+"="+notices)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("the helper failed: %v\n%s%s", err, out, stderr.String())
	}
	const notice = "*** DOCKER TESTS SKIPPED: no daemon at unix:///nonexistent/docker.sock"
	if n := strings.Count(stderr.String(), notice); n != 1 {
		t.Errorf("stderr holds the notice %d times, want once:\n%s", n, stderr.String())
	}
	data, err := os.ReadFile(notices)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(lines) != 1 || !strings.HasPrefix(lines[0], notice) || !strings.HasSuffix(lines[0], " ***") {
		t.Errorf("notices file holds %q, want the notice once", data)
	}
}

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
