package local

import (
	"bufio"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/terpdev/terp/internal/sandbox"
)

// hostOwner is the host uid that owns path.
func hostOwner(t *testing.T, path string) uint32 {
	t.Helper()
	fi, err := os.Lstat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Sys().(*syscall.Stat_t).Uid
}

// processUID is the real uid of a host process, from /proc/PID/status.
func processUID(t *testing.T, pid int) uint32 {
	t.Helper()
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.Lines(string(data)) {
		if rest, ok := strings.CutPrefix(line, "Uid:"); ok {
			n, err := strconv.ParseUint(strings.Fields(rest)[0], 10, 32)
			if err != nil {
				t.Fatal(err)
			}
			return uint32(n)
		}
	}
	t.Fatalf("no Uid line for %d", pid)
	return 0
}

// TestCodeIsNeverHostRoot looks from the host at what the code's processes
// and files are: never uid 0. As root, every sandbox has an unprivileged uid
// of its own from the range, which owns its work directory and also the
// files terp uploads, so the code can change and remove them.
func TestCodeIsNeverHostRoot(t *testing.T) {
	t.Parallel()
	a := newSandbox(t, sandbox.Options{})
	b := newSandbox(t, sandbox.Options{})
	mark := marker(t)
	writeFile(t, a, "in/upload.csv", "x,y\n1,2\n")
	p, err := a.Start(t.Context(), []string{"python3", "-c",
		"import time,os; open('/work/made.txt','w').write('x'); open('/work/in/upload.csv','a').write('3,4\\n'); " +
			"os.rename('/work/in', '/work/moved'); print('ready', flush=True); time.sleep(60) # " + mark}, sandbox.ExecOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if line, err := bufio.NewReader(p.Stdout()).ReadString('\n'); err != nil || line != "ready\n" {
		t.Fatalf("the code did not start: %q %v", line, err)
	}
	pids := hostProcesses(mark)
	if len(pids) == 0 {
		t.Fatal("the code's process is not visible on the host")
	}
	for _, pid := range pids {
		if uid := processUID(t, pid); uid == 0 || int(uid) != a.HostUID() {
			t.Errorf("the code's process %d runs as host uid %d, want the sandbox's %d", pid, uid, a.HostUID())
		}
	}
	_ = p.Signal(sandbox.SIGKILL)
	_, _ = p.Wait()

	for _, f := range []string{"made.txt", "moved/upload.csv", "moved"} {
		if uid := hostOwner(t, filepath.Join(a.HostDir(), f)); uid == 0 || int(uid) != a.HostUID() {
			t.Errorf("/work/%s belongs to host uid %d, want the sandbox's %d", f, uid, a.HostUID())
		}
	}
	if got := readFile(t, a, "moved/upload.csv"); got != "x,y\n1,2\n3,4\n" {
		t.Errorf("the code could not extend the upload: %q", got)
	}
	if a.HostUID() == 0 || b.HostUID() == 0 {
		t.Fatalf("host uids %d and %d: the code runs as host root", a.HostUID(), b.HostUID())
	}
	if os.Geteuid() != 0 {
		if a.HostUID() != os.Getuid() {
			t.Errorf("as uid %d, the code runs as %d, want terp's user", os.Getuid(), a.HostUID())
		}
		return
	}
	r := sandbox.DefaultUIDs
	for _, s := range []*Sandbox{a, b} {
		if !r.Contains(uint32(s.HostUID())) || uint32(s.HostUID()) == r.Last() {
			t.Errorf("host uid %d is not one the range %s hands out", s.HostUID(), r)
		}
	}
	if a.HostUID() == b.HostUID() {
		t.Errorf("two sandboxes share host uid %d", a.HostUID())
	}
	if fi, err := os.Stat(a.HostDir()); err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("the work directory is %v (%v), want 0700: other sandboxes' uids could read it", fi.Mode(), err)
	}
}

// TestResumeGivesOldSandboxAUID: a sandbox made by a terp that ran code as
// root (no host_uid in its metadata, files root's) gets a uid of its own on
// resume, with its files, and keeps them.
func TestResumeGivesOldSandboxAUID(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("only root's sandboxes get uids of their own; as uid", os.Geteuid(), "the code runs as terp's user (TestCodeIsNeverHostRoot)")
	}
	t.Parallel()
	s := newSandbox(t, sandbox.Options{})
	writeFile(t, s, "data/old.csv", "a\n")
	id, err := s.Pause(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	// Make it look as an earlier terp left it.
	metaPath := filepath.Join(s.dir, metaFile)
	var m map[string]any
	data, _ := os.ReadFile(metaPath)
	if err := json.Unmarshal(data, &m); err != nil {
		t.Fatal(err)
	}
	delete(m, "host_uid")
	data, _ = json.Marshal(m)
	if err := os.WriteFile(metaPath, data, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"", "data", "data/old.csv"} {
		if err := os.Lchown(filepath.Join(s.HostDir(), p), 0, 0); err != nil {
			t.Fatal(err)
		}
	}

	sb, err := testBackend.Resume(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	r := sb.(*Sandbox)
	t.Cleanup(func() { _ = r.Close(context.Background()) })
	if r.HostUID() == 0 {
		t.Fatal("the resumed sandbox still runs as host root")
	}
	res := runPython(t, r, "m.py", "open('/work/data/old.csv','a').write('b\\n'); print(open('/work/data/old.csv').read())",
		sandbox.ExecOptions{Timeout: time.Minute})
	if res.Stdout != "a\nb\n\n" {
		t.Errorf("after resume the code could not change its old file: %q %q", res.Stdout, res.Stderr)
	}
	if uid := hostOwner(t, filepath.Join(r.HostDir(), "data/old.csv")); int(uid) != r.HostUID() {
		t.Errorf("the old file belongs to %d, want %d", uid, r.HostUID())
	}
}

// TestHostUserUnprivileged runs the host-user test as nobody, the way an
// ordinary user meets it. That no host-wide kernel setting can be written is
// the adversarial suite's privilege/host-kernel-settings, run both ways.
func TestHostUserUnprivileged(t *testing.T) {
	if os.Getenv(unprivilegedEnv) != "" {
		return
	}
	if os.Geteuid() != 0 {
		t.Skip("already unprivileged: the other host-user tests ran as uid", os.Geteuid())
	}
	rerunAsNobody(t, "TestCodeIsNeverHostRoot")
}
