package adversarial

import (
	"maps"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/terpdev/terp/internal/llm/llmtest"
)

// These cases run `terp ask -o DIR` end to end on the real local sandbox and
// look at what lands in DIR: files the code can make cheaply in the sandbox
// must not cost the user's disk more than their data, and no file the code
// saved may go missing without a word.

// diskUsage is what the files under dir take on the host's disk, in bytes,
// and how many there are.
func diskUsage(t *testing.T, dir string) (used int64, files int) {
	t.Helper()
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		var st syscall.Stat_t
		if err := syscall.Stat(p, &st); err != nil {
			return err
		}
		used += st.Blocks * 512
		files++
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return used, files
}

// onBackends runs an `ask` case on the local backend, where downloads read
// host files, and on cpuos, where they read an HTTP stream and List goes
// through the server; env is what selects the backend.
func onBackends(t *testing.T, run func(t *testing.T, env map[string]string)) {
	for _, kind := range []backend{onLocal, onCPUOS} {
		t.Run(kind.String(), func(t *testing.T) {
			t.Parallel()
			env := map[string]string{}
			if kind == onCPUOS {
				cpuosTarget(t)
				env = map[string]string{"TERP_SANDBOX": "cpuos", "TERP_CPUOS_URL": cpuosServer.hs.URL, "CPUOS_API_KEY": cpuosToken}
			}
			run(t, env)
		})
	}
}

// TestAskSparseDownloads saves 20 files of 90 MiB that are holes but for
// their last byte, as the report that filled an -o directory did: each
// must arrive whole, with its holes kept.
func TestAskSparseDownloads(t *testing.T) {
	t.Parallel()
	onBackends(t, askSparseDownloads)
}

func askSparseDownloads(t *testing.T, env map[string]string) {
	code := `for i in range(20):
    with open(f"/work/sparse{i:02d}.bin", "wb") as f:
        f.seek(90 << 20); f.write(b"x")
print("alive")
`
	srv := model(t, llmtest.Fixed(llmtest.RunPython(code)), answerIfAlive(t))
	out := t.TempDir()
	r := ask(t, srv, env, "--exec-mode", "script", "-o", out, "make sparse files")
	if r.code != 0 {
		t.Fatalf("exit %d\n%s", r.code, r.stderr)
	}
	used, files := diskUsage(t, out)
	if files != 20 || used > 4<<20 {
		t.Errorf("-o holds %d files taking %d bytes of disk; want 20 files taking a few KiB (1.8 GB of holes)", files, used)
	}
	b, err := os.ReadFile(filepath.Join(out, "sparse07.bin"))
	if err != nil || len(b) != 90<<20+1 || b[90<<20] != 'x' || b[1<<20] != 0 {
		t.Errorf("sparse07.bin: %d bytes, %v; want 90 MiB of zeros and an x", len(b), err)
	}
}

// TestAskDownloadTotal saves more dense data than max_download_total allows:
// the files that fit arrive, and the warning names the one that did not and
// says how to get it.
func TestAskDownloadTotal(t *testing.T) {
	t.Parallel()
	code := `import os
for name in ["a.bin", "b.bin", "c.bin"]:
    open("/work/" + name, "wb").write(os.urandom(1 << 20))
print("alive")
`
	srv := model(t, llmtest.Fixed(llmtest.RunPython(code)), answerIfAlive(t))
	out := t.TempDir()
	r := ask(t, srv, map[string]string{"TERP_MAX_DOWNLOAD_TOTAL": "2.5MiB"}, "--exec-mode", "script", "-o", out, "save data")
	if r.code != 0 {
		t.Fatalf("exit %d\n%s", r.code, r.stderr)
	}
	used, files := diskUsage(t, out)
	if files != 2 || used > 5<<19 {
		t.Errorf("-o holds %d files taking %d bytes; want the 2 that fit in 2.5 MiB", files, used)
	}
	if _, err := os.Stat(filepath.Join(out, "c.bin")); err == nil {
		t.Error("c.bin was downloaded past max_download_total")
	}
	for _, want := range []string{"/work/c.bin", "max_download_total", "--max-download-total", "/download"} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("the warning does not say %q:\n%s", want, r.stderr)
		}
	}
}

// TestAskLongestFileName saves a file whose name is as long as a name can be
// (255 bytes): it must be downloaded like any other.
func TestAskLongestFileName(t *testing.T) {
	t.Parallel()
	name := strings.Repeat("r", 251) + ".csv"
	code := "open('/work/" + name + "', 'w').write('a,b\\n')\nprint('alive')\n"
	srv := model(t, llmtest.Fixed(llmtest.RunPython(code)), answerIfAlive(t))
	out := t.TempDir()
	r := ask(t, srv, nil, "--exec-mode", "script", "-o", out, "save it")
	if r.code != 0 {
		t.Fatalf("exit %d\n%s", r.code, r.stderr)
	}
	if b, err := os.ReadFile(filepath.Join(out, name)); err != nil || string(b) != "a,b\n" {
		t.Errorf("the 255-byte name was not downloaded: %q, %v\n%s", b, err, r.stderr)
	}
}

// TestAskManyFiles saves 20,000 files and, in the same step, the one the
// user asked for: it must be named to the model and downloaded, every other
// file must be downloaded too, and what the model and the user read of the
// list stays short and says how many there were.
func TestAskManyFiles(t *testing.T) {
	t.Parallel()
	onBackends(t, askManyFiles)
}

func askManyFiles(t *testing.T, env map[string]string) {
	code := `for i in range(20000):
    open(f"/work/part{i:05d}.txt", "w").write("x")
open("/work/result.csv", "w").write("a,b\n1,2\n")
print("alive")
`
	told := func(req llmtest.Request) {
		_, err := req.ToolResult()
		if raw := req.LastTool(); err != nil || len(raw) > 6000 || !strings.Contains(raw, "result.csv") || !strings.Contains(raw, "20,001 files") {
			t.Errorf("the model read %d characters (%v), want a short list naming result.csv and the count: %.300s", len(raw), err, raw)
		}
	}
	srv := model(t, llmtest.Fixed(llmtest.RunPython(code)), thenRun(told, aliveCode), answerIfAlive(t))
	out := t.TempDir()
	// Writing 20,000 files takes more than ask's 5 s here when the machine
	// is loaded (the race detector, other tests); the case is about the
	// listing, not the time.
	env = maps.Clone(env)
	env["TERP_TIMEOUT"] = "2m"
	r := ask(t, srv, env, "--exec-mode", "script", "-o", out, "split the data")
	if r.code != 0 {
		t.Fatalf("exit %d\n%.2000s", r.code, r.stderr)
	}
	if b, err := os.ReadFile(filepath.Join(out, "result.csv")); err != nil || string(b) != "a,b\n1,2\n" {
		t.Errorf("result.csv was not downloaded: %q, %v", b, err)
	}
	if _, files := diskUsage(t, out); files != 20001 {
		t.Errorf("-o holds %d files, want all 20,001", files)
	}
	if n := strings.Count(r.stdout, "\n  "); n > 60 || !strings.Contains(r.stdout, "and 19951 more") {
		t.Errorf("the answer lists %d downloaded files; want 50 and the count of the others:\n%.1500s", n, r.stdout)
	}
	if n := strings.Count(r.stderr, "saved /work/"); n > 100 || !strings.Contains(r.stderr, "20,001 files") {
		t.Errorf("the progress shows %d saved files and the count %v; want a short list and the count:\n%.1500s",
			n, strings.Contains(r.stderr, "20,001 files"), r.stderr)
	}
}
