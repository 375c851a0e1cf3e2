package local

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/terpdev/terp/internal/sandbox"
	"github.com/terpdev/terp/internal/terptest"
)

func TestLimitsMechanism(t *testing.T) {
	got := testBackend.LimitsMechanism()
	t.Logf("limits on this machine: %s", got)
	switch got {
	case "cgroup v2", "cgroup v1", "rlimit":
	default:
		t.Errorf("LimitsMechanism() = %q", got)
	}
}

func TestMemoryLimit(t *testing.T) {
	t.Parallel()
	s := newSandbox(t, sandbox.Options{Limits: sandbox.Limits{MemoryBytes: 256 << 20}})
	bombs := map[string]string{
		"one big allocation": "b = bytearray(4 << 30)\nprint('allocated', len(b))",
		"growing list":       "x = []\nwhile True:\n    x.append(bytearray(1 << 20))",
		"tmpfs":              "import os\nwith open('/tmp/fill', 'wb') as f:\n    while True:\n        f.write(os.urandom(1 << 20))",
	}
	for name, code := range bombs {
		t.Run(name, func(t *testing.T) {
			res := runPython(t, s, "bomb.py", code, sandbox.ExecOptions{Timeout: 30 * time.Second})
			t.Logf("exit %d, stderr %.200q", res.ExitCode, res.Stderr)
			if res.ExitCode == 0 || res.TimedOut {
				t.Errorf("a memory bomb under a 256 MiB limit ended with exit %d, timed out %v", res.ExitCode, res.TimedOut)
			}
			// Killed by the OOM killer (137), MemoryError (1) or ENOSPC on
			// the size-limited tmpfs (1): all fine, as long as the sandbox
			// is usable afterwards.
			if res := runPython(t, s, "ok.py", "print('still here')", sandbox.ExecOptions{}); res.Stdout != "still here\n" {
				t.Errorf("after the bomb: exit %d, stdout %q, stderr %q", res.ExitCode, res.Stdout, res.Stderr)
			}
		})
	}
}

func TestProcessLimit(t *testing.T) {
	t.Parallel()
	if testBackend.limits.kind == limitRlimit && os.Geteuid() == 0 {
		t.Skip("RLIMIT_NPROC is not enforced for root and there is no cgroup to use instead")
	}
	s := newSandbox(t, sandbox.Options{Limits: sandbox.Limits{Processes: 64}})

	// Counted: fork until refused.
	count := `
import os, time
children = 0
try:
    while children < 1000:
        if os.fork() == 0:
            time.sleep(60)
            os._exit(0)
        children += 1
except OSError as e:
    print("refused after", children, type(e).__name__)
`
	res := runPython(t, s, "count.py", count, sandbox.ExecOptions{Timeout: 30 * time.Second})
	var n int
	if _, err := fmt.Sscanf(res.Stdout, "refused after %d", &n); err != nil || n >= 64 {
		t.Errorf("fork was not refused before 64 processes: %q %q", res.Stdout, res.Stderr)
	}

	// A real fork bomb, stopped by the timeout, with the host unharmed.
	mark := marker(t)
	bomb := "import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass\n"
	res = runPython(t, s, mark+".py", bomb, sandbox.ExecOptions{Timeout: 2 * time.Second})
	if !res.TimedOut {
		t.Errorf("the fork bomb was not stopped by its timeout: exit %d", res.ExitCode)
	}
	waitNoProcesses(t, mark)
	if res := runPython(t, s, "ok.py", "print('still here')", sandbox.ExecOptions{}); res.Stdout != "still here\n" {
		t.Errorf("after the fork bomb: stdout %q, stderr %q", res.Stdout, res.Stderr)
	}
}

func TestFileSizeLimit(t *testing.T) {
	t.Parallel()
	s := newSandbox(t, sandbox.Options{Limits: sandbox.Limits{FileSizeBytes: 1 << 20}})
	code := `
try:
    with open("/work/big.bin", "wb") as f:
        for _ in range(4):
            f.write(b"x" * (512 << 10))
    print("wrote 2 MiB")
except OSError as e:
    print("refused:", e)
`
	res := runPython(t, s, "main.py", code, sandbox.ExecOptions{})
	if !strings.Contains(res.Stdout, "File too large") {
		t.Errorf("writing 2 MiB under a 1 MiB limit: stdout %q, stderr %q", res.Stdout, res.Stderr)
	}
	fi, err := os.Stat(filepath.Join(s.HostDir(), "big.bin"))
	if err != nil || fi.Size() > 1<<20 {
		t.Errorf("big.bin on the host: %v, %v", fi, err)
	}
}

// TestCommandStartsInsideCgroup checks, from the host, that the code runs in
// the sandbox's cgroups: it is born there, not moved after it could fork.
func TestCommandStartsInsideCgroup(t *testing.T) {
	t.Parallel()
	if testBackend.limits.kind == limitRlimit {
		t.Skip("no cgroups here; limits are rlimits")
	}
	s := newSandbox(t, sandbox.Options{})
	mark := marker(t)
	// In a script, so that bwrap's own command line does not hold the marker.
	writeFile(t, s, "sleep.sh", "exec -a "+mark+" sleep 1000\n")
	p, err := s.Start(t.Context(), []string{"bash", "sleep.sh"}, sandbox.ExecOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Wait()
	defer p.Signal(sandbox.SIGKILL)
	var pids []int
	for range 100 {
		if pids = hostProcesses(mark); len(pids) > 0 {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if len(pids) != 1 {
		t.Fatalf("found %d processes with the marker", len(pids))
	}
	f, err := os.Open("/proc/" + strconv.Itoa(pids[0]) + "/cgroup")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	want := map[string]bool{}
	if testBackend.limits.kind == limitCgroupV1 {
		want["memory"], want["pids"] = false, false
	} else {
		want[""] = false
	}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		parts := strings.SplitN(sc.Text(), ":", 3)
		for _, c := range strings.Split(parts[1], ",") {
			if _, ok := want[c]; ok && strings.HasSuffix(parts[2], "/"+cgroupPrefix+s.id) {
				want[c] = true
			}
		}
	}
	for c, ok := range want {
		if !ok {
			t.Errorf("the command is not in the sandbox's %q cgroup", c)
		}
	}
}

// TestRlimitFallback runs the fallback on purpose, since the machines with
// cgroups never would: memory is RLIMIT_AS, which numpy survives at 512 MiB
// but not a 1 GiB allocation.
func TestRlimitFallback(t *testing.T) {
	t.Parallel()
	b, err := New(Config{Root: testBackend.Root()})
	if err != nil {
		t.Fatal(err)
	}
	forceRlimits(b)
	if b.LimitsMechanism() != "rlimit" {
		t.Fatalf("LimitsMechanism() = %q", b.LimitsMechanism())
	}
	sb, err := b.Create(t.Context(), sandbox.Options{Limits: sandbox.Limits{MemoryBytes: 512 << 20}})
	if err != nil {
		t.Fatal(err)
	}
	s := sb.(*Sandbox)
	defer s.Close(t.Context())
	code := `
import numpy as np
a = np.ones((300, 300))
print("numpy ok", (a @ a).sum())
try:
    b = bytearray(1 << 30)
    print("allocated 1 GiB")
except MemoryError:
    print("MemoryError")
`
	res := runPython(t, s, "main.py", code, sandbox.ExecOptions{})
	if !strings.Contains(res.Stdout, "numpy ok") || !strings.Contains(res.Stdout, "MemoryError") {
		t.Errorf("stdout %q, stderr %q", res.Stdout, res.Stderr)
	}
	res = runPython(t, s, "limits.py", "import resource\nprint(resource.getrlimit(resource.RLIMIT_AS))", sandbox.ExecOptions{})
	if want := fmt.Sprintf("(%d, %d)", 512<<20, 512<<20); !strings.Contains(res.Stdout, want) {
		t.Errorf("RLIMIT_AS = %s, want %s", res.Stdout, want)
	}
}

// TestCgroupRemoved checks that Close leaves no cgroup behind.
func TestCgroupRemoved(t *testing.T) {
	t.Parallel()
	sb, err := testBackend.Create(t.Context(), sandbox.Options{})
	if err != nil {
		t.Fatal(err)
	}
	s := sb.(*Sandbox)
	runPython(t, s, "main.py", "print(1)", sandbox.ExecOptions{})
	var dirs []string
	if s.cgroup != nil {
		dirs = s.cgroup.dirs
	}
	for _, d := range dirs {
		if _, err := os.Stat(d); err != nil {
			t.Errorf("cgroup %s missing while the sandbox is open: %v", d, err)
		}
	}
	if err := s.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	for _, d := range dirs {
		if _, err := os.Stat(d); !os.IsNotExist(err) {
			t.Errorf("cgroup %s left after Close: %v", d, err)
		}
	}
}

// TestCgroupPaths checks where terp looks for its own cgroups on the layouts
// it meets: a cgroup v1 host like this project's CI (memory in a sub-cgroup,
// pids at the root), a cgroup v2 host, and a container that sees only its
// own subtree. Whether a cgroup is usable is tried on the real filesystem,
// so only the paths are checked here.
func TestCgroupPaths(t *testing.T) {
	tests := []struct {
		name      string
		cgroup    string
		mountinfo string
		v2        string
		memory    string
		pids      string
	}{
		{
			name:   "cgroup v1 with a hybrid unified mount",
			cgroup: "8:pids:/\n4:memory:/process_api/abc\n1:cpu,cpuacct:/\n0::/\n",
			mountinfo: "31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755\n" +
				"36 31 0:33 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory\n" +
				"40 31 0:37 / /sys/fs/cgroup/pids rw,relatime - cgroup cgroup rw,pids\n" +
				"42 31 0:39 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw\n",
			v2:     "/sys/fs/cgroup/unified",
			memory: "/sys/fs/cgroup/memory/process_api/abc",
			pids:   "/sys/fs/cgroup/pids",
		},
		{
			name:      "cgroup v2",
			cgroup:    "0::/user.slice/user-1000.slice/user@1000.service/app.slice/terp.scope\n",
			mountinfo: "30 23 0:26 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:4 - cgroup2 cgroup2 rw,nsdelegate\n",
			v2:        "/sys/fs/cgroup/user.slice/user-1000.slice/user@1000.service/app.slice/terp.scope",
		},
		{
			name:      "container seeing its own subtree",
			cgroup:    "0::/docker/f00/sub\n",
			mountinfo: "500 400 0:26 /docker/f00 /sys/fs/cgroup ro,nosuid - cgroup2 cgroup2 rw\n",
			v2:        "/sys/fs/cgroup/sub",
		},
		{
			name:      "mount of another subtree",
			cgroup:    "0::/docker/f001\n",
			mountinfo: "500 400 0:26 /docker/f00 /sys/fs/cgroup ro,nosuid - cgroup2 cgroup2 rw\n",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := terptest.TempDir(t)
			cg, mi := filepath.Join(dir, "cgroup"), filepath.Join(dir, "mountinfo")
			os.WriteFile(cg, []byte(tt.cgroup), 0o644)
			os.WriteFile(mi, []byte(tt.mountinfo), 0o644)
			own, err := readOwnCgroups(cg)
			if err != nil {
				t.Fatal(err)
			}
			mounts, err := readCgroupMounts(mi)
			if err != nil {
				t.Fatal(err)
			}
			v2, _ := mounts.v2dir(own[""])
			mem, _ := mounts.v1dir("memory", own["memory"])
			pids, _ := mounts.v1dir("pids", own["pids"])
			if v2 != tt.v2 || mem != tt.memory || pids != tt.pids {
				t.Errorf("v2 %q, memory %q, pids %q; want %q, %q, %q", v2, mem, pids, tt.v2, tt.memory, tt.pids)
			}
		})
	}
}
