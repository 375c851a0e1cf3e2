package adversarial

import (
	"fmt"
	"runtime"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/terpdev/terp/internal/kernel"
	"github.com/terpdev/terp/internal/sandbox"
)

// rawSyscall is Python that makes a syscall through libc and prints
// "<label> ok" or "<label> <ERRNO>", the way hostile code would reach a
// syscall Python has no wrapper for.
const rawSyscall = `import ctypes, errno, os, socket
libc = ctypes.CDLL(None, use_errno=True)
def raw(label, nr, *args):
    ctypes.set_errno(0)
    r = libc.syscall(ctypes.c_long(nr), *[ctypes.c_long(a) for a in args])
    print(label, "ok" if r != -1 else errno.errorcode.get(ctypes.get_errno(), ctypes.get_errno()), flush=True)
    return r
def cstr(b):
    return ctypes.addressof(ctypes.create_string_buffer(b))
`

// seccompCases are hostile code aimed at what the seccomp filter refuses,
// beyond the older cases (ptrace, keyctl, mount, unshare) whose expectations
// it changed.
func seccompCases() []hostile {
	cases := []hostile{
		{
			name:   "tty/tiocsti-own-pty",
			expect: "code that makes a pty its controlling terminal (where the kernel allows TIOCSTI) still cannot inject input or use TIOCLINUX: EPERM; ordinary tty ioctls work",
			code: fixed(`import os, fcntl, termios, errno
master, slave = os.openpty()
name = os.ttyname(slave)
r, w = os.pipe()
if os.fork() == 0:
    os.setsid()
    fd = os.open(name, os.O_RDWR)
    out = []
    for label, req, arg in [("tiocsti", termios.TIOCSTI, b"x"), ("tiocsti-high-bits", termios.TIOCSTI | (1 << 32), b"x"),
                            ("tioclinux", 0x541C, b"\x02" + bytes(31)), ("tiocgwinsz", termios.TIOCGWINSZ, bytes(8))]:
        try:
            fcntl.ioctl(fd, req, arg); out.append(label + " ok")
        except OSError as e:
            out.append(label + " " + errno.errorcode[e.errno])
    os.write(w, "\n".join(out).encode()); os._exit(0)
os.close(w)
print(os.read(r, 4096).decode())
os.set_blocking(master, False)
try:
    print("injected", os.read(master, 100))
except BlockingIOError:
    print("nothing injected")
`),
			check: func(t *testing.T, sbx sandbox.Sandbox, res kernel.Result) {
				wants("tiocsti EPERM", "tiocsti-high-bits EPERM", "tioclinux EPERM", "tiocgwinsz ok", "nothing injected")(t, sbx, res)
			},
		},
		{
			name:   "seccomp/socket-families",
			expect: "netlink (route dumps), packet, AF_ALG, vsock and bluetooth sockets and socketpairs fail with EAFNOSUPPORT, also with high bits set in the family; Unix, IPv4 and IPv6 sockets work",
			code: func(*target) string {
				return rawSyscall + fmt.Sprintf(`
for label, fam, typ in [("netlink", socket.AF_NETLINK, socket.SOCK_RAW), ("packet", socket.AF_PACKET, socket.SOCK_RAW),
                        ("alg", 38, socket.SOCK_SEQPACKET), ("vsock", 40, socket.SOCK_STREAM), ("bluetooth", 31, socket.SOCK_STREAM),
                        ("unix", socket.AF_UNIX, socket.SOCK_STREAM), ("inet", socket.AF_INET, socket.SOCK_STREAM),
                        ("inet6", socket.AF_INET6, socket.SOCK_DGRAM)]:
    try:
        socket.socket(fam, typ).close(); print("socket", label, "ok")
    except OSError as e:
        print("socket", label, errno.errorcode[e.errno])
raw("netlink-high-bits", %d, socket.AF_NETLINK | (1 << 32), socket.SOCK_RAW, 0)
try:
    socket.socketpair(socket.AF_NETLINK); print("socketpair netlink ok")
except OSError as e:
    print("socketpair netlink", errno.errorcode[e.errno])
a, b = socket.socketpair(); a.send(b"x"); print("socketpair unix", b.recv(1))
`, unix.SYS_SOCKET)
			},
			check: func(t *testing.T, sbx sandbox.Sandbox, res kernel.Result) {
				wants("socket netlink EAFNOSUPPORT", "socket packet EAFNOSUPPORT", "socket alg EAFNOSUPPORT",
					"socket vsock EAFNOSUPPORT", "socket bluetooth EAFNOSUPPORT", "netlink-high-bits EAFNOSUPPORT",
					"socketpair netlink EAFNOSUPPORT",
					"socket unix ok", "socket inet ok", "socket inet6 ok", "socketpair unix b'x'")(t, sbx, res)
			},
		},
		{
			name:   "seccomp/kernel-surface",
			expect: "perf_event_open, bpf, userfaultfd (user-mode) and syslog fail with EPERM; io_uring_setup with ENOSYS (its operations would bypass the filter)",
			code: func(*target) string {
				return rawSyscall + fmt.Sprintf(`
raw("perf_event_open", %d, 0, 0, -1, -1, 0)
raw("bpf", %d, 5, 0, 0)
raw("userfaultfd", %d, 1)
raw("io_uring_setup", %d, 1, 0)
raw("syslog", %d, 10, 0, 0)
`, unix.SYS_PERF_EVENT_OPEN, unix.SYS_BPF, unix.SYS_USERFAULTFD, unix.SYS_IO_URING_SETUP, unix.SYS_SYSLOG)
			},
			check: wants("perf_event_open EPERM", "bpf EPERM", "userfaultfd EPERM", "io_uring_setup ENOSYS", "syslog EPERM"),
		},
		{
			name:   "seccomp/other-processes",
			expect: "code cannot read or write a sibling's memory (process_vm_readv/writev) or steal its descriptors (pidfd_getfd): EPERM",
			code: func(*target) string {
				return rawSyscall + fmt.Sprintf(`import subprocess
p = subprocess.Popen(["sleep", "30"])
buf = ctypes.create_string_buffer(64)
iov = (ctypes.c_void_p * 2)(ctypes.addressof(buf), 64)
raw("process_vm_readv", %d, p.pid, ctypes.addressof(iov), 1, ctypes.addressof(iov), 1, 0)
raw("process_vm_writev", %d, p.pid, ctypes.addressof(iov), 1, ctypes.addressof(iov), 1, 0)
raw("pidfd_getfd", %d, os.pidfd_open(p.pid), 1, 0)
p.kill(); p.wait()
`, unix.SYS_PROCESS_VM_READV, unix.SYS_PROCESS_VM_WRITEV, unix.SYS_PIDFD_GETFD)
			},
			check: wants("process_vm_readv EPERM", "process_vm_writev EPERM", "pidfd_getfd EPERM"),
		},
		{
			name:   "seccomp/new-namespaces-and-mount-api",
			expect: "clone with CLONE_NEWUSER and setns fail with EPERM; clone3 and the new mount API (fsopen, open_tree) with ENOSYS; os.fork and threads still work",
			code: func(*target) string {
				return rawSyscall + fmt.Sprintf(`import threading
pid = raw("clone-newuser", %d, 0x10000000 | 17, 0, 0, 0, 0)
if pid == 0:
    os._exit(0)
raw("setns", %d, os.open("/proc/self/ns/net", os.O_RDONLY), 0)
raw("clone3", %d, 0, 0)
raw("fsopen", %d, cstr(b"tmpfs"), 0)
raw("open_tree", %d, -100, cstr(b"/"), 1)
pid = os.fork()
if pid == 0:
    os._exit(7)
print("fork exit", os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]))
t = threading.Thread(target=lambda: print("thread ran")); t.start(); t.join()
`, unix.SYS_CLONE, unix.SYS_SETNS, unix.SYS_CLONE3, unix.SYS_FSOPEN, unix.SYS_OPEN_TREE)
			},
			check: wants("clone-newuser EPERM", "setns EPERM", "clone3 ENOSYS", "fsopen ENOSYS", "open_tree ENOSYS",
				"fork exit 7", "thread ran"),
		},
		{
			name:   "seccomp/personality",
			expect: "turning off ASLR (personality ADDR_NO_RANDOMIZE, `setarch -R`) fails with EPERM; querying the personality works",
			code: func(*target) string {
				return rawSyscall + fmt.Sprintf(`import subprocess
raw("personality-no-aslr", %d, 0x0040000)
raw("personality-query", %d, 0xffffffff)
r = subprocess.run(["setarch", "-R", "true"], capture_output=True, text=True)
print("setarch exit", r.returncode, r.stderr.strip()[:80])
`, unix.SYS_PERSONALITY, unix.SYS_PERSONALITY)
			},
			check: func(t *testing.T, sbx sandbox.Sandbox, res kernel.Result) {
				wants("personality-no-aslr EPERM", "personality-query ok")(t, sbx, res)
				if strings.Contains(res.Stdout, "setarch exit 0") {
					t.Errorf("setarch -R ran:\n%s", res.Stdout)
				}
			},
		},
	}
	if runtime.GOARCH == "amd64" {
		cases = append(cases, hostile{
			name:   "seccomp/foreign-abi",
			expect: "syscalls through the i386 ABI (int 0x80) and the x32 ABI, whose numbers the filter's table does not cover, fail with EPERM",
			code: fixed(rawSyscall + `import mmap
raw("x32-getpid", 0x40000000 + 39)
m = mmap.mmap(-1, 4096, prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC)
m.write(b"\xb8\x14\x00\x00\x00\xcd\x80\xc3")  # mov eax, 20 (i386 getpid); int 0x80; ret
r = ctypes.CFUNCTYPE(ctypes.c_int)(ctypes.addressof(ctypes.c_char.from_buffer(m)))()
print("i386-getpid", "ok" if r >= 0 else errno.errorcode[-r])
`),
			check: wants("x32-getpid EPERM", "i386-getpid EPERM"),
		})
	}
	// These cases check terp's own filter, errno by errno; Docker applies
	// its default seccomp profile instead (probed by tty/tiocsti,
	// proc/ptrace, kernel/keyctl, kernel/mount and kernel/unshare-userns),
	// and the cpuos server runs the local backend, so the local run covers
	// its filter.
	for i := range cases {
		cases[i].on = onLocal
		cases[i].why = "checks terp's own seccomp filter, which only the local backend (and cpuos's server on it) loads"
	}
	return cases
}
