package adversarial

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/terpdev/terp/internal/kernel"
	"github.com/terpdev/terp/internal/sandbox"
	"github.com/terpdev/terp/internal/sandbox/local"
)

// hostKernelProbe tries every host-wide kernel setting code could change if
// it were host root, writing each setting's own value back so that a
// sandbox failing the case changes nothing on the host.
const hostKernelProbe = `import os
targets = ["/proc/sys/kernel/core_pattern", "/proc/sys/kernel/modprobe", "/proc/sys/fs/lease-break-time",
           "/proc/sys/vm/drop_caches", "/proc/sys/kernel/hostname", "/proc/sysrq-trigger",
           "/sys/kernel/mm/transparent_hugepage/enabled", "/sys/fs/cgroup/cgroup.procs"]
for p in targets:
    try:
        try:
            v = open(p).read()
        except OSError:
            v = ""
        with open(p, "w") as f:
            f.write(v if v else "\n")
        print("WRITABLE", p)
    except OSError as e:
        print("refused", p, e.strerror)
open("/work/mine.txt", "w").write("x")
print("uid", os.getuid(), "map", " ".join(open("/proc/self/uid_map").read().split()))
`

// hostRootCases are the cases of code that would be host root: on every
// backend its processes and files belong to an unprivileged host uid, and no
// host-wide kernel setting can be written.
func hostRootCases() []hostile {
	return []hostile{{
		name: "privilege/host-kernel-settings",
		expect: "no host-wide kernel setting can be written: /proc/sys and /proc/sysrq-trigger are read-only, /sys is absent " +
			"(Docker: read-only); the code's files belong to an unprivileged host uid, the sandbox's own when terp is root",
		on:  onLocal | onDocker,
		why: notTransport,
		code: func(*target) string {
			return hostKernelProbe
		},
		check: func(t *testing.T, sbx sandbox.Sandbox, res kernel.Result) {
			checkHostKernelUntouched(t, res)
			ls := sbx.(*local.Sandbox)
			uid := fileOwner(t, filepath.Join(ls.HostDir(), "mine.txt"))
			if uid == 0 || int(uid) != ls.HostUID() {
				t.Errorf("a file the code wrote belongs to host uid %d, want the sandbox's unprivileged %d", uid, ls.HostUID())
			}
			if os.Geteuid() == 0 && int(uid) == os.Getuid() {
				t.Errorf("terp is root and the code's file belongs to terp's uid %d", uid)
			}
			t.Logf("terp uid %d; the code is host uid %d", os.Geteuid(), uid)
		},
		dockerCheck: func(t *testing.T, _ sandbox.Sandbox, res kernel.Result) {
			checkHostKernelUntouched(t, res)
			// Without userns-remap the container's uids are the host's:
			// an identity map and uid 1000 mean host uid 1000.
			if !strings.Contains(res.Stdout, "uid 1000 map 0 0 4294967295") {
				t.Errorf("the container's code is not host uid 1000:\n%s", res.Stdout)
			}
		},
	}}
}

// checkHostKernelUntouched fails if any setting was writable or the host's
// core_pattern, the one that would run a program as root, changed.
func checkHostKernelUntouched(t *testing.T, res kernel.Result) {
	t.Helper()
	t.Logf("observed:\n%s%s", res.Stdout, res.Stderr)
	if strings.Contains(res.Stdout, "WRITABLE") || strings.Count(res.Stdout, "refused") != 8 {
		t.Errorf("the code could write a host-wide kernel setting:\n%s%s", res.Stdout, res.Stderr)
	}
	if got, err := os.ReadFile("/proc/sys/kernel/core_pattern"); err != nil || string(got) != hostCorePattern {
		t.Errorf("the host's core_pattern is %q, was %q", got, hostCorePattern)
	}
}

// hostCorePattern is the host's kernel.core_pattern when the suite started.
var hostCorePattern = func() string {
	b, _ := os.ReadFile("/proc/sys/kernel/core_pattern")
	return string(b)
}()

func fileOwner(t *testing.T, path string) uint32 {
	t.Helper()
	fi, err := os.Lstat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Sys().(*syscall.Stat_t).Uid
}
