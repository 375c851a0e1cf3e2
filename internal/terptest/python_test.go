package terptest

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// pypiHelperEnv makes this test binary, run again by
// TestPythonVenvSkipNotice, play a package whose PyPI tests skip.
const pypiHelperEnv = "TERPTEST_PYPI_HELPER"

// TestPythonVenvSkipHelper is two tests that need a virtual environment;
// it does nothing unless TestPythonVenvSkipNotice runs it.
func TestPythonVenvSkipHelper(t *testing.T) {
	if os.Getenv(pypiHelperEnv) == "" {
		t.Skip("run by TestPythonVenvSkipNotice")
	}
	for _, name := range []string{"first", "second"} {
		t.Run(name, func(t *testing.T) {
			PythonVenv(t, "tomli-w==1.2.0")
			t.Error("PythonVenv returned without a package index")
		})
	}
}

// A machine that cannot reach the package index skips the tests that need
// a virtual environment, saying so once, in capitals, on stderr and in the
// notices file, in the words .ci/run looks for.
func TestPythonVenvSkipNotice(t *testing.T) {
	notices := filepath.Join(t.TempDir(), "notices")
	cmd := exec.Command(os.Args[0], "-test.run", "^TestPythonVenvSkipHelper$")
	cmd.Env = append(os.Environ(), pypiHelperEnv+"=1", "XDG_CACHE_HOME="+t.TempDir(),
		// Nothing listens on the discard port of the loopback address.
		"PIP_INDEX_URL=http://127.0.0.1:9/simple", NoticesEnv+"="+notices)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("the helper failed: %v\n%s%s", err, out, stderr.String())
	}
	const notice = "*** PYPI TESTS SKIPPED: the Python package index (127.0.0.1:9) is not reachable"
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

// A virtual environment holds what was asked for, and the second test that
// asks for the same gets the same one at once, without pip.
func TestPythonVenv(t *testing.T) {
	python := PythonVenv(t, "tomli-w==1.2.0")
	out, err := exec.Command(python, "-c", "import sys, tomli_w; print(sys.prefix); print(tomli_w.dumps({'a': 1}))").CombinedOutput()
	if err != nil {
		t.Fatalf("the virtual environment's python: %v\n%s", err, out)
	}
	prefix, toml, _ := strings.Cut(string(out), "\n")
	if prefix != filepath.Dir(filepath.Dir(python)) || strings.TrimSpace(toml) != "a = 1" {
		t.Errorf("the virtual environment's python printed %q; want its prefix and a = 1", out)
	}
	ready, err := os.Stat(filepath.Join(prefix, "terp-test-ready"))
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if again := PythonVenv(t, "tomli-w==1.2.0"); again != python {
		t.Errorf("asked again, PythonVenv returned %s, not %s", again, python)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("asked again, PythonVenv took %s", took)
	}
	if st, err := os.Stat(filepath.Join(prefix, "terp-test-ready")); err != nil || !st.ModTime().Equal(ready.ModTime()) {
		t.Errorf("asked again, PythonVenv made the environment again (%v)", err)
	}
}
