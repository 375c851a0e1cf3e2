//go:build amd64 || arm64

package local

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/terpdev/terp/internal/sandbox"
	"github.com/terpdev/terp/internal/terptest"
)

// probePrelude is Python that runs named probes and prints one JSON object,
// probe name -> "ok" or the errno's name, so that a Go table can check each.
// Raw syscalls go through libc's syscall() with every argument a c_long, as
// hostile code would make them.
const probePrelude = `
import ctypes, errno, json, os, socket, subprocess, sys
libc = ctypes.CDLL(None, use_errno=True)
results = {}

def err_name(n):
    return errno.errorcode.get(n, str(n))

def raw(nr, *args):
    ctypes.set_errno(0)
    r = libc.syscall(ctypes.c_long(nr), *[ctypes.c_long(a) for a in args])
    if r == -1:
        raise OSError(ctypes.get_errno(), "")
    return r

def probe(name, fn):
    try:
        fn()
        results[name] = "ok"
    except OSError as e:
        results[name] = err_name(e.errno)
    except Exception as e:
        results[name] = type(e).__name__ + ": " + str(e)

def on_ctty(fn):
    # Make a pty the controlling terminal of a child, the one place TIOCSTI
    # works without privileges, and report what fn(fd) did there.
    import pty
    master, slave = os.openpty()
    name = os.ttyname(slave)
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            os.setsid()
            fd = os.open(name, os.O_RDWR)
            fn(fd)
            msg = "ok"
        except OSError as e:
            msg = err_name(e.errno)
        except Exception as e:
            msg = type(e).__name__
        os.write(w, msg.encode())
        os._exit(0)
    os.close(w)
    msg = os.read(r, 100).decode()
    os.waitpid(pid, 0)
    os.close(master); os.close(slave)
    if msg != "ok":
        raise OSError(getattr(errno, msg, 0) or 0, msg)

def sock(family, typ=socket.SOCK_STREAM):
    socket.socket(family, typ).close()

def sockpair(family):
    a, b = socket.socketpair(family)
    a.close(); b.close()

def traced_child():
    p = subprocess.Popen(["sleep", "30"])
    try:
        raw(NR["ptrace"], 16, p.pid, 0, 0)  # PTRACE_ATTACH
    finally:
        p.kill(); p.wait()

def raw_clone_newuser():
    pid = raw(NR["clone"], 0x10000000 | 17, 0, 0, 0, 0)  # CLONE_NEWUSER | SIGCHLD
    if pid == 0:
        os._exit(0)
    os.waitpid(pid, 0)

def i386_getpid():
    # mov eax, 20 (i386 getpid); int 0x80; ret. Returns -errno or the pid.
    import mmap
    code = b"\xb8\x14\x00\x00\x00\xcd\x80\xc3"
    m = mmap.mmap(-1, 4096, prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC)
    m.write(code)
    addr = ctypes.addressof(ctypes.c_char.from_buffer(m))
    r = ctypes.CFUNCTYPE(ctypes.c_int)(addr)()
    if r < 0:
        raise OSError(-r, "")
`

// probe is one thing the code tries, the result the filter must give, and
// the result the same call gets in a sandbox without the filter. without is
// empty where namespaces and dropped capabilities already refuse the call
// the same way (mount, module loading...): there the filter is defense in
// depth, and the test shows only that it answers.
type probe struct {
	name    string
	code    string // a Python expression; NR holds syscall numbers
	want    string
	without string
	arch    string // only on this GOARCH
}

var seccompProbes = []probe{
	// Terminal injection, on a pty that is the controlling terminal, where
	// the kernel allows TIOCSTI (dev.tty.legacy_tiocsti=1 here).
	{name: "ioctl TIOCSTI on ctty", code: `on_ctty(lambda fd: fcntl.ioctl(fd, termios.TIOCSTI, b"x"))`, want: "EPERM", without: "ok"},
	{name: "ioctl TIOCSTI, high bits set", code: `on_ctty(lambda fd: fcntl.ioctl(fd, termios.TIOCSTI | (1 << 32), b"x"))`, want: "EPERM", without: "ok"},
	{name: "ioctl TIOCLINUX", code: `on_ctty(lambda fd: fcntl.ioctl(fd, 0x541C, b"\x02" + bytes(31)))`, want: "EPERM"},
	{name: "ioctl TIOCGWINSZ (allowed)", code: `on_ctty(lambda fd: fcntl.ioctl(fd, termios.TIOCGWINSZ, bytes(8)))`, want: "ok", without: "ok"},

	// Namespaces. Without the filter --disable-userns answers ENOSPC.
	{name: "unshare CLONE_NEWUSER", code: `raw(NR["unshare"], 0x10000000)`, want: "EPERM", without: "ENOSPC"},
	{name: "unshare CLONE_NEWNET", code: `raw(NR["unshare"], 0x40000000)`, want: "EPERM"},
	{name: "unshare CLONE_NEWNS", code: `raw(NR["unshare"], 0x00020000)`, want: "EPERM"},
	{name: "unshare CLONE_FILES (allowed)", code: `raw(NR["unshare"], 0x00000400)`, want: "ok", without: "ok"},
	{name: "clone CLONE_NEWUSER", code: `raw_clone_newuser()`, want: "EPERM", without: "ENOSPC"},
	{name: "clone3", code: `raw(NR["clone3"], 0, 0)`, want: "ENOSYS", without: "EINVAL"},
	{name: "setns", code: `raw(NR["setns"], os.open("/proc/self/ns/net", os.O_RDONLY), 0)`, want: "EPERM"},

	// Mounts.
	{name: "mount tmpfs", code: `raw(NR["mount"], ctypes.addressof(ctypes.create_string_buffer(b"none")), ctypes.addressof(ctypes.create_string_buffer(b"/tmp")), ctypes.addressof(ctypes.create_string_buffer(b"tmpfs")), 0, 0)`, want: "EPERM"},
	{name: "umount2 /work", code: `raw(NR["umount2"], ctypes.addressof(ctypes.create_string_buffer(b"/work")), 2)`, want: "EPERM"},
	{name: "pivot_root", code: `raw(NR["pivot_root"], 0, 0)`, want: "EPERM"},
	{name: "chroot /tmp", code: `os.chroot("/tmp")`, want: "EPERM"},
	{name: "open_tree", code: `raw(NR["open_tree"], -100, 0, 0)`, want: "ENOSYS"},
	{name: "fsopen", code: `raw(NR["fsopen"], 0, 0)`, want: "ENOSYS"},
	{name: "move_mount", code: `raw(NR["move_mount"], -1, 0, -1, 0, 0)`, want: "ENOSYS"},
	{name: "fsconfig", code: `raw(NR["fsconfig"], -1, 0, 0, 0, 0)`, want: "ENOSYS", without: "EINVAL"},
	{name: "fsmount", code: `raw(NR["fsmount"], -1, 0, 0)`, want: "ENOSYS"},
	{name: "fspick", code: `raw(NR["fspick"], -1, 0, 0)`, want: "ENOSYS"},
	{name: "mount_setattr", code: `raw(NR["mount_setattr"], -1, 0, 0, 0, 0)`, want: "ENOSYS"},

	// Keyrings: without the filter the sandbox can read its own keyring id.
	{name: "keyctl get session keyring", code: `raw(NR["keyctl"], 0, -3, 0)`, want: "EPERM", without: "ok"},
	{name: "add_key", code: `raw(NR["add_key"], ctypes.addressof(ctypes.create_string_buffer(b"user")), ctypes.addressof(ctypes.create_string_buffer(b"k")), ctypes.addressof(ctypes.create_string_buffer(b"v")), 1, -3)`, want: "EPERM"},
	{name: "request_key", code: `raw(NR["request_key"], ctypes.addressof(ctypes.create_string_buffer(b"user")), ctypes.addressof(ctypes.create_string_buffer(b"nokey")), 0, 0)`, want: "EPERM", without: "ENOKEY"},

	// Other processes: without the filter a sandbox process may trace its
	// siblings and read their memory.
	{name: "ptrace attach to a sibling", code: `traced_child()`, want: "EPERM", without: "ok"},
	{name: "process_vm_readv", code: `raw(NR["process_vm_readv"], os.getpid(), 0, 0, 0, 0, 0)`, want: "EPERM", without: "ok"},
	{name: "process_vm_writev", code: `raw(NR["process_vm_writev"], os.getpid(), 0, 0, 0, 0, 0)`, want: "EPERM", without: "ok"},
	{name: "pidfd_getfd", code: `raw(NR["pidfd_getfd"], os.pidfd_open(os.getpid()), 0, 0)`, want: "EPERM", without: "ok"},

	// Kernel surface.
	{name: "perf_event_open", code: `raw(NR["perf_event_open"], 0, 0, -1, -1, 0)`, want: "EPERM", without: "EFAULT"},
	{name: "bpf", code: `raw(NR["bpf"], 5, 0, 0)`, want: "EPERM"},
	{name: "userfaultfd user-mode", code: `raw(NR["userfaultfd"], 1)`, want: "EPERM", without: "ok"},
	{name: "io_uring_setup", code: `raw(NR["io_uring_setup"], 1, 0)`, want: "ENOSYS", without: "EFAULT"},
	{name: "kexec_load", code: `raw(NR["kexec_load"], 0, 0, 0, 0)`, want: "EPERM"},
	{name: "init_module", code: `raw(NR["init_module"], 0, 0, 0)`, want: "EPERM"},
	{name: "finit_module", code: `raw(NR["finit_module"], -1, 0, 0)`, want: "EPERM"},
	{name: "delete_module", code: `raw(NR["delete_module"], ctypes.addressof(ctypes.create_string_buffer(b"x")), 0)`, want: "EPERM"},
	{name: "syslog", code: `raw(NR["syslog"], 10, 0, 0)`, want: "EPERM"},
	{name: "acct", code: `raw(NR["acct"], 0)`, want: "EPERM"},
	{name: "quotactl", code: `raw(NR["quotactl"], 0, 0, 0, 0)`, want: "EPERM"},
	{name: "swapoff", code: `raw(NR["swapoff"], ctypes.addressof(ctypes.create_string_buffer(b"/tmp")))`, want: "EPERM"},
	{name: "reboot", code: `raw(NR["reboot"], 0, 0, 0, 0)`, want: "EPERM"},
	{name: "personality ADDR_NO_RANDOMIZE", code: `raw(NR["personality"], 0x0040000)`, want: "EPERM", without: "ok"},
	{name: "personality query (allowed)", code: `raw(NR["personality"], 0xffffffff)`, want: "ok", without: "ok"},
	{name: "uselib", code: `raw(NR["uselib"], 0)`, want: "EPERM", arch: "amd64"},
	{name: "modify_ldt", code: `raw(NR["modify_ldt"], 0, 0, 0)`, want: "EPERM", without: "ok", arch: "amd64"},

	// Socket families: netlink and packet are refused by the filter, not
	// the kernel (netlink works without it).
	{name: "socket AF_NETLINK", code: `sock(socket.AF_NETLINK, socket.SOCK_RAW)`, want: "EAFNOSUPPORT", without: "ok"},
	{name: "socket AF_NETLINK, high bits set", code: `os.close(raw(NR["socket"], socket.AF_NETLINK | (1 << 32), socket.SOCK_RAW, 0))`, want: "EAFNOSUPPORT", without: "ok"},
	{name: "socket AF_PACKET", code: `sock(socket.AF_PACKET, socket.SOCK_RAW)`, want: "EAFNOSUPPORT", without: "EPERM"},
	{name: "socket AF_ALG", code: `sock(38, socket.SOCK_SEQPACKET)`, want: "EAFNOSUPPORT"},
	{name: "socket AF_VSOCK", code: `sock(40)`, want: "EAFNOSUPPORT"},
	{name: "socketpair AF_NETLINK", code: `sockpair(socket.AF_NETLINK)`, want: "EAFNOSUPPORT"},
	{name: "socket AF_UNIX (allowed)", code: `sock(socket.AF_UNIX)`, want: "ok", without: "ok"},
	{name: "socket AF_INET (allowed)", code: `sock(socket.AF_INET)`, want: "ok", without: "ok"},
	{name: "socket AF_INET6 (allowed)", code: `sock(socket.AF_INET6, socket.SOCK_DGRAM)`, want: "ok", without: "ok"},
	{name: "socketpair AF_UNIX (allowed)", code: `sockpair(socket.AF_UNIX)`, want: "ok", without: "ok"},

	// Other ABIs' syscalls.
	{name: "x32 getpid", code: `raw(0x40000000 + 39)`, want: "EPERM", arch: "amd64"},
	{name: "i386 getpid (int 0x80)", code: `i386_getpid()`, want: "EPERM", without: "ok", arch: "amd64"},
}

// probeScript is the Python running every probe for this architecture.
func probeScript(probes []probe) string {
	nr := map[string]uintptr{}
	for _, r := range allRules() {
		nr[r.name] = uintptr(r.nr)
	}
	nrJSON, _ := json.Marshal(nr)
	var b strings.Builder
	b.WriteString(probePrelude)
	b.WriteString("import fcntl, termios\nNR = json.loads(" + fmt.Sprintf("%q", nrJSON) + ")\n")
	for _, p := range probes {
		fmt.Fprintf(&b, "probe(%q, lambda: %s)\n", p.name, p.code)
	}
	b.WriteString("print(json.dumps(results))\n")
	return b.String()
}

func probesForArch() []probe {
	var out []probe
	for _, p := range seccompProbes {
		if p.arch == "" || p.arch == runtime.GOARCH {
			out = append(out, p)
		}
	}
	return out
}

// runProbes runs every probe in one sandbox of b and returns the results.
func runProbes(t *testing.T, b *Backend, probes []probe) map[string]string {
	t.Helper()
	sb, err := b.Create(t.Context(), sandbox.Options{})
	if err != nil {
		t.Fatal(err)
	}
	s := sb.(*Sandbox)
	t.Cleanup(func() { _ = s.Close(context.Background()) })
	res := runPython(t, s, "probes.py", probeScript(probes), sandbox.ExecOptions{})
	if res.ExitCode != 0 {
		t.Fatalf("probes exited %d\nstdout: %s\nstderr: %s", res.ExitCode, res.Stdout, res.Stderr)
	}
	var got map[string]string
	if err := json.Unmarshal([]byte(strings.TrimSpace(res.Stdout)), &got); err != nil {
		t.Fatalf("probe output %q: %v", res.Stdout, err)
	}
	return got
}

// unfilteredBackend is a second backend on the test root whose bubblewrap
// does not offer --seccomp, as the earliest releases did not: the real bwrap
// behind a script that leaves the option out of --help.
func unfilteredBackend(t testing.TB) *Backend {
	t.Helper()
	real, err := exec.LookPath("bwrap")
	if err != nil {
		t.Fatal(err)
	}
	script := filepath.Join(terptest.TempDir(t), "bwrap")
	wrapper := "#!/bin/sh\nif [ \"$1\" = --help ]; then " + real + " --help | grep -v -e --seccomp; exit 0; fi\nexec " + real + " \"$@\"\n"
	if err := os.WriteFile(script, []byte(wrapper), 0o755); err != nil {
		t.Fatal(err)
	}
	b, err := New(Config{Root: testBackend.Root(), BwrapPath: script})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestSeccompDenies runs each forbidden call from Python in a real sandbox
// and checks the errno the filter gives. Running the same probes without the
// filter shows, where the kernel would have allowed the call, that the filter
// is what refuses it.
func TestSeccompDenies(t *testing.T) {
	if on, why := testBackend.Seccomp(); !on {
		t.Fatalf("the seccomp filter is off: %s", why)
	}
	probes := probesForArch()
	got := runProbes(t, testBackend, probes)
	without := runProbes(t, unfilteredBackend(t), probes)
	for _, p := range probes {
		t.Run(p.name, func(t *testing.T) {
			if got[p.name] != p.want {
				t.Errorf("with the filter: %s, want %s", got[p.name], p.want)
			}
			if p.without != "" && without[p.name] != p.without {
				t.Errorf("without the filter: %s, want %s (the kernel's own answer)", without[p.name], p.without)
			}
		})
	}
}

// TestSeccompOffWithoutBwrapSupport checks the fallback for a bubblewrap
// without --seccomp: no filter, a reason for `terp doctor`, and sandboxes
// that still run.
func TestSeccompOffWithoutBwrapSupport(t *testing.T) {
	b := unfilteredBackend(t)
	on, why := b.Seccomp()
	if on || !strings.Contains(why, "--seccomp") {
		t.Fatalf("Seccomp() = %v, %q; want off, naming --seccomp", on, why)
	}
	sb, err := b.Create(t.Context(), sandbox.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close(context.Background())
	res, err := sb.Exec(t.Context(), []string{"python3", "-c", "print('runs')"}, sandbox.ExecOptions{})
	if err != nil || res.Stdout != "runs\n" {
		t.Fatalf("Exec = %+v, %v", res, err)
	}
}

// TestSeccompKeepsPythonWorking runs what analysis code does under the
// filter: the scientific stack with a saved figure, subprocesses, threads,
// multiprocessing (which forks and talks over socketpairs and pipes),
// loopback networking inside the sandbox and name lookups.
func TestSeccompKeepsPythonWorking(t *testing.T) {
	s := newSandbox(t, sandbox.Options{})
	code := `
import numpy as np, pandas as pd, matplotlib.pyplot as plt
import subprocess, threading, multiprocessing, concurrent.futures, socket, asyncio

a = np.random.default_rng(0).normal(size=(200, 200))
print("numpy", round(float(np.linalg.eigvalsh(a @ a.T).max()), 3) > 0)
df = pd.DataFrame({"x": range(10), "y": [i * i for i in range(10)]})
print("pandas", int(df.y.sum()))
print("subprocess", subprocess.run(["sh", "-c", "echo hi"], capture_output=True, text=True).stdout.strip())
with concurrent.futures.ThreadPoolExecutor(4) as ex:
    print("threads", sum(ex.map(lambda i: i * 2, range(100))))

def sq(x):
    return x * x

if __name__ == "__main__":
    # Only here: spawn and forkserver children import this module again, and
    # several processes writing one figure at once leave a torn file.
    plt.plot(df.x, df.y); plt.savefig("/work/fig.png")
    for method in ("fork", "spawn", "forkserver"):
        with multiprocessing.get_context(method).Pool(2) as pool:
            print("multiprocessing", method, sum(pool.map(sq, range(10))))
    q = multiprocessing.Queue(); p = multiprocessing.Process(target=q.put, args=("queued",)); p.start()
    print("queue", q.get(timeout=20)); p.join()

    async def main():
        async def handle(r, w):
            w.write(await r.readline()); await w.drain(); w.close()
        srv = await asyncio.start_server(handle, "127.0.0.1", 0)
        port = srv.sockets[0].getsockname()[1]
        r, w = await asyncio.open_connection("127.0.0.1", port)
        w.write(b"loopback\n"); await w.drain()
        print("asyncio", (await r.readline()).decode().strip())
        w.close(); srv.close()
    asyncio.run(main())
    print("getaddrinfo", socket.getaddrinfo("localhost", 80)[0][4][0] in ("127.0.0.1", "::1"))
`
	res := runPython(t, s, "work.py", code, sandbox.ExecOptions{})
	if res.ExitCode != 0 {
		t.Fatalf("exit %d\nstdout: %s\nstderr: %s", res.ExitCode, res.Stdout, res.Stderr)
	}
	for _, want := range []string{
		"numpy True", "pandas 285", "subprocess hi", "threads 9900",
		"multiprocessing fork 285", "multiprocessing spawn 285", "multiprocessing forkserver 285",
		"queue queued", "asyncio loopback", "getaddrinfo True",
	} {
		if !strings.Contains(res.Stdout, want) {
			t.Errorf("stdout lacks %q\nstdout: %s\nstderr: %s", want, res.Stdout, res.Stderr)
		}
	}
	if png := readFile(t, s, "/work/fig.png"); !strings.HasPrefix(png, "\x89PNG") {
		t.Error("the figure is not a PNG")
	}
}

// TestSeccompProgramShape checks what the kernel would not report: a second
// rule for a syscall is refused when the program is built (the program stops
// at a syscall's first rule, so the second would silently never run), and
// the compiled filter is whole instructions within the kernel's maximum.
// That the kernel accepts it is shown by every other test here.
func TestSeccompProgramShape(t *testing.T) {
	dup := append(allRules(), syscallRule("ptrace again", unix.SYS_PTRACE, unix.EPERM, "duplicate"))
	if _, err := program(nativeArch, foreignNrBase, dup); err == nil {
		t.Error("a second rule for ptrace was accepted; it would never run")
	}
	f, err := seccompFilter()
	if err != nil {
		t.Fatal(err)
	}
	if len(f)%8 != 0 || len(f) == 0 || len(f) > 8*maxInstructions {
		t.Fatalf("filter is %d bytes", len(f))
	}
}
