//go:build amd64 || arm64

package local

import (
	"encoding/binary"
	"fmt"

	"golang.org/x/sys/unix"
)

// The seccomp filter every sandboxed command runs under.
//
// Namespaces, dropped capabilities and --disable-userns already stop most of
// what the syscalls below could do (see docs/security.md); the filter is the
// second wall. It removes the kernel surface a model's code has no use for,
// so that a bug in, say, keyctl or perf_event_open or io_uring is not
// reachable from the sandbox, and it stops the few things namespaces allow:
// ptrace between the sandbox's own processes, terminal injection, socket
// families other than Unix and IP.
//
// It follows Flatpak's filter (flatpak-run.c, setup_seccomp) and the one
// Codex puts around its bubblewrap sandbox: a deny list, everything else
// allowed, errors rather than kills so that code probing for a feature gets
// an answer it understands. It is built here, in Go, as a classic BPF program
// (struct sock_filter[]) and handed to bwrap with --seccomp, which installs
// it (after PR_SET_NO_NEW_PRIVS) as the last step before exec'ing the
// command. Syscall numbers come from golang.org/x/sys/unix, which has them
// per architecture, so the same table serves amd64 and arm64.

// action is what the filter does with a matched syscall: fail it with an
// errno. The kernel sees it as SECCOMP_RET_ERRNO | errno.
type action unix.Errno

// condition narrows a rule to some values of one argument. The filter
// compares only an argument's low 32 bits, as Flatpak does for ioctl: the
// kernel reads ioctl's request, socket's family and personality's persona as
// 32-bit values and clone's flags through lower_32_bits, ignoring the high
// half (unshare rejects high bits with EINVAL), so comparing all 64 bits
// would let a caller set high bits to slip past. That is how Flatpak's
// TIOCSTI filter was bypassed (CVE-2019-10063).
type condition struct {
	kind   condKind
	arg    int      // the argument's index, 0 to 5
	values []uint32 // for anyOf and noneOf
	mask   uint32   // for anyBit
}

type condKind int

const (
	always condKind = iota // the syscall, whatever its arguments
	anyOf                  // the argument equals one of values
	noneOf                 // the argument equals none of values
	anyBit                 // the argument has one of mask's bits set
)

// rule denies one syscall, or some uses of it. A syscall has at most one
// rule: the program jumps to a syscall's rule and ends there.
type rule struct {
	name string
	nr   uint32
	when condition
	deny action
	why  string
}

// namespaceFlags are the clone and unshare flags that make namespaces.
// CLONE_NEWTIME (0x80) is left out for clone, where those bits are the exit
// signal; unshare and clone3 are where it exists.
const namespaceFlags = unix.CLONE_NEWNS | unix.CLONE_NEWCGROUP | unix.CLONE_NEWUTS |
	unix.CLONE_NEWIPC | unix.CLONE_NEWUSER | unix.CLONE_NEWPID | unix.CLONE_NEWNET

// allowedFamilies are the socket families code may use: Unix sockets
// (multiprocessing, socketpair), IPv4 and IPv6 (HTTP when the network is on,
// and loopback servers in the code's own network namespace otherwise).
// Netlink, packet, raw bluetooth, vsock, AF_ALG and the rest have been a
// steady source of kernel bugs and serve no analysis.
var allowedFamilies = []uint32{unix.AF_UNIX, unix.AF_INET, unix.AF_INET6}

// allowedPersonalities are the personality(2) values code may pass: the
// default persona, and 0xffffffff, which only queries it. Anything else
// (ADDR_NO_RANDOMIZE above all, which turns ASLR off for what the code
// exec's next, or READ_IMPLIES_EXEC) weakens the process.
var allowedPersonalities = []uint32{0 /* PER_LINUX */, 0xffffffff}

func syscallRule(name string, nr uintptr, deny unix.Errno, why string) rule {
	return rule{name: name, nr: uint32(nr), deny: action(deny), why: why}
}

func argRule(name string, nr uintptr, when condition, deny unix.Errno, why string) rule {
	return rule{name: name, nr: uint32(nr), when: when, deny: action(deny), why: why}
}

// rules is the deny list, shared by the architectures; archRules (per
// architecture) adds the syscalls only some have. EPERM is the answer for
// "not allowed here"; ENOSYS where a caller should fall back to an older
// call (glibc's clone3 → clone) or treat the feature as missing.
var rules = []rule{
	// Terminal injection.
	argRule("ioctl", unix.SYS_IOCTL, condition{kind: anyOf, arg: 1, values: []uint32{unix.TIOCSTI, unix.TIOCLINUX}}, unix.EPERM,
		"TIOCSTI pushes bytes into a terminal's input, TIOCLINUX can read and paste a Linux console: both type commands as the user if a terminal fd ever leaks in"),

	// New namespaces: a new user namespace gives back every capability
	// inside it, and with it the kernel's namespaced-root attack surface.
	argRule("clone", unix.SYS_CLONE, condition{kind: anyBit, arg: 0, mask: namespaceFlags}, unix.EPERM,
		"clone with CLONE_NEW* makes namespaces; plain clone (fork, threads, vfork for subprocess) is allowed"),
	syscallRule("clone3", unix.SYS_CLONE3, unix.ENOSYS,
		"its flags live in a struct a filter cannot read; ENOSYS makes glibc fall back to clone, which is checked"),
	argRule("unshare", unix.SYS_UNSHARE, condition{kind: anyBit, arg: 0, mask: namespaceFlags | unix.CLONE_NEWTIME}, unix.EPERM,
		"unshare with CLONE_NEW* makes namespaces"),
	syscallRule("setns", unix.SYS_SETNS, unix.EPERM, "joining another namespace"),

	// Mounts: the sandbox's mount table is bwrap's and stays so.
	syscallRule("mount", unix.SYS_MOUNT, unix.EPERM, "mounting"),
	syscallRule("umount2", unix.SYS_UMOUNT2, unix.EPERM, "unmounting could uncover what bwrap mounted over"),
	syscallRule("pivot_root", unix.SYS_PIVOT_ROOT, unix.EPERM, "changing the root"),
	syscallRule("chroot", unix.SYS_CHROOT, unix.EPERM, "changing the root"),
	syscallRule("open_tree", unix.SYS_OPEN_TREE, unix.ENOSYS, "new mount API (as Flatpak: ENOSYS, so callers use mount, which is denied)"),
	syscallRule("move_mount", unix.SYS_MOVE_MOUNT, unix.ENOSYS, "new mount API"),
	syscallRule("fsopen", unix.SYS_FSOPEN, unix.ENOSYS, "new mount API"),
	syscallRule("fsconfig", unix.SYS_FSCONFIG, unix.ENOSYS, "new mount API"),
	syscallRule("fsmount", unix.SYS_FSMOUNT, unix.ENOSYS, "new mount API"),
	syscallRule("fspick", unix.SYS_FSPICK, unix.ENOSYS, "new mount API"),
	syscallRule("mount_setattr", unix.SYS_MOUNT_SETATTR, unix.ENOSYS, "new mount API: could clear read-only flags"),

	// Kernel keyrings are not namespaced by anything bwrap sets up.
	syscallRule("keyctl", unix.SYS_KEYCTL, unix.EPERM, "kernel keyrings: other keys of the same uid, and a long CVE history"),
	syscallRule("add_key", unix.SYS_ADD_KEY, unix.EPERM, "kernel keyrings"),
	syscallRule("request_key", unix.SYS_REQUEST_KEY, unix.EPERM, "kernel keyrings"),

	// Reaching into other processes: the sandbox runs the persistent
	// kernel and scripts side by side under one uid.
	syscallRule("ptrace", unix.SYS_PTRACE, unix.EPERM, "tracing the sandbox's other processes (the kernel worker, init)"),
	syscallRule("process_vm_readv", unix.SYS_PROCESS_VM_READV, unix.EPERM, "reading another process's memory"),
	syscallRule("process_vm_writev", unix.SYS_PROCESS_VM_WRITEV, unix.EPERM, "writing another process's memory"),
	syscallRule("pidfd_getfd", unix.SYS_PIDFD_GETFD, unix.EPERM, "stealing another process's descriptors, a ptrace permission"),

	// Kernel surface with a record of privilege escalations.
	syscallRule("perf_event_open", unix.SYS_PERF_EVENT_OPEN, unix.EPERM, "performance counters: side channels and kernel bugs"),
	syscallRule("bpf", unix.SYS_BPF, unix.EPERM, "eBPF programs and maps"),
	syscallRule("userfaultfd", unix.SYS_USERFAULTFD, unix.EPERM, "stalls the kernel mid-copy, a staple of kernel exploits"),
	syscallRule("io_uring_setup", unix.SYS_IO_URING_SETUP, unix.ENOSYS,
		"io_uring's operations (socket among them) bypass this filter; ENOSYS makes libraries use plain syscalls"),
	syscallRule("io_uring_enter", unix.SYS_IO_URING_ENTER, unix.ENOSYS, "io_uring"),
	syscallRule("io_uring_register", unix.SYS_IO_URING_REGISTER, unix.ENOSYS, "io_uring"),

	// Administration: needs capabilities the sandbox lacks; denied so the
	// kernel's own checks are not the only line.
	syscallRule("kexec_load", unix.SYS_KEXEC_LOAD, unix.EPERM, "loading a new kernel"),
	syscallRule("kexec_file_load", unix.SYS_KEXEC_FILE_LOAD, unix.EPERM, "loading a new kernel"),
	syscallRule("init_module", unix.SYS_INIT_MODULE, unix.EPERM, "loading kernel modules"),
	syscallRule("finit_module", unix.SYS_FINIT_MODULE, unix.EPERM, "loading kernel modules"),
	syscallRule("delete_module", unix.SYS_DELETE_MODULE, unix.EPERM, "unloading kernel modules"),
	syscallRule("syslog", unix.SYS_SYSLOG, unix.EPERM, "the kernel log (dmesg) leaks host addresses and activity"),
	syscallRule("acct", unix.SYS_ACCT, unix.EPERM, "process accounting"),
	syscallRule("quotactl", unix.SYS_QUOTACTL, unix.EPERM, "disk quotas"),
	syscallRule("quotactl_fd", unix.SYS_QUOTACTL_FD, unix.EPERM, "disk quotas"),
	syscallRule("swapon", unix.SYS_SWAPON, unix.EPERM, "swap"),
	syscallRule("swapoff", unix.SYS_SWAPOFF, unix.EPERM, "swap"),
	syscallRule("reboot", unix.SYS_REBOOT, unix.EPERM, "rebooting (in a pid namespace: killing the sandbox's init)"),

	argRule("personality", unix.SYS_PERSONALITY, condition{kind: noneOf, arg: 0, values: allowedPersonalities}, unix.EPERM,
		"personality flags such as ADDR_NO_RANDOMIZE switch off ASLR for the next program"),

	// Socket families. socketpair is checked too, so that the family list
	// is one list.
	argRule("socket", unix.SYS_SOCKET, condition{kind: noneOf, arg: 0, values: allowedFamilies}, unix.EAFNOSUPPORT,
		"only Unix, IPv4 and IPv6 sockets: no netlink, packet, vsock, AF_ALG... (EAFNOSUPPORT, as for a family the kernel lacks)"),
	argRule("socketpair", unix.SYS_SOCKETPAIR, condition{kind: noneOf, arg: 0, values: allowedFamilies}, unix.EAFNOSUPPORT,
		"the same families as socket"),
}

// Offsets into struct seccomp_data, which the filter reads: the syscall
// number, the audit architecture, then the instruction pointer and six
// 64-bit arguments. On little-endian machines (amd64, arm64) an argument's
// low 32 bits come first.
const (
	offNr   = 0
	offArch = 4
	offArgs = 16
)

const maxInstructions = 4096 // BPF_MAXINSNS

// program assembles rules into a classic BPF program. Every rule is a
// self-contained block ("not this syscall: skip the block"), so no jump
// spans more than a block and the 8-bit jump offsets never overflow.
func program(arch uint32, foreignNr uint32, rs []rule) ([]unix.SockFilter, error) {
	ret := func(k uint32) unix.SockFilter { return unix.SockFilter{Code: unix.BPF_RET | unix.BPF_K, K: k} }
	load := func(off uint32) unix.SockFilter {
		return unix.SockFilter{Code: unix.BPF_LD | unix.BPF_W | unix.BPF_ABS, K: off}
	}
	jump := func(op uint16, k uint32, jt, jf uint8) unix.SockFilter {
		return unix.SockFilter{Code: unix.BPF_JMP | op | unix.BPF_K, K: k, Jt: jt, Jf: jf}
	}
	allow := ret(unix.SECCOMP_RET_ALLOW)
	errno := func(e action) unix.SockFilter { return ret(unix.SECCOMP_RET_ERRNO | uint32(e)&unix.SECCOMP_RET_DATA) }

	// Another ABI's syscall (i386's int 0x80 on amd64, AArch32 on arm64)
	// has other numbers: the table below would match the wrong calls.
	p := []unix.SockFilter{
		load(offArch),
		jump(unix.BPF_JEQ, arch, 1, 0),
		errno(action(unix.EPERM)),
		load(offNr),
	}
	// amd64's x32 ABI shares the x86_64 audit arch and marks its numbers
	// with bit 30 instead.
	if foreignNr != 0 {
		p = append(p,
			jump(unix.BPF_JGE, foreignNr, 0, 1),
			errno(action(unix.EPERM)))
	}

	seen := make(map[uint32]string)
	for _, r := range rs {
		if prev, dup := seen[r.nr]; dup {
			return nil, fmt.Errorf("seccomp: %s and %s are the same syscall %d", prev, r.name, r.nr)
		}
		seen[r.nr] = r.name
		var block []unix.SockFilter
		c := r.when
		if c.kind != always && (c.arg < 0 || c.arg > 5) {
			return nil, fmt.Errorf("seccomp: %s: no argument %d", r.name, c.arg)
		}
		switch c.kind {
		case always:
			block = []unix.SockFilter{errno(r.deny)}
		case anyOf:
			block = append(block, load(uint32(offArgs+8*c.arg)))
			for _, v := range c.values {
				block = append(block, jump(unix.BPF_JEQ, v, 0, 1), errno(r.deny))
			}
			block = append(block, allow)
		case noneOf:
			block = append(block, load(uint32(offArgs+8*c.arg)))
			for _, v := range c.values {
				block = append(block, jump(unix.BPF_JEQ, v, 0, 1), allow)
			}
			block = append(block, errno(r.deny))
		case anyBit:
			block = append(block,
				load(uint32(offArgs+8*c.arg)),
				jump(unix.BPF_JSET, c.mask, 0, 1),
				errno(r.deny),
				allow)
		default:
			return nil, fmt.Errorf("seccomp: %s: unknown condition", r.name)
		}
		if len(block) > 255 {
			return nil, fmt.Errorf("seccomp: %s: rule too long for a jump", r.name)
		}
		// The blocks all end in a return, so the accumulator holding an
		// argument never reaches the next rule's number test.
		p = append(p, jump(unix.BPF_JEQ, r.nr, 0, uint8(len(block))))
		p = append(p, block...)
	}
	p = append(p, allow)
	if len(p) > maxInstructions {
		return nil, fmt.Errorf("seccomp: %d instructions, more than the kernel takes", len(p))
	}
	return p, nil
}

// filterBytes is the program as bwrap reads it from --seccomp: the
// struct sock_filter array in the machine's byte order, nothing else.
func filterBytes(p []unix.SockFilter) []byte {
	out := make([]byte, 0, 8*len(p))
	for _, ins := range p {
		out = binary.NativeEndian.AppendUint16(out, ins.Code)
		out = append(out, ins.Jt, ins.Jf)
		out = binary.NativeEndian.AppendUint32(out, ins.K)
	}
	return out
}

// seccompFilter returns the filter for this architecture, compiled.
func seccompFilter() ([]byte, error) {
	p, err := program(nativeArch, foreignNrBase, allRules())
	if err != nil {
		return nil, err
	}
	return filterBytes(p), nil
}

// allRules is the shared table plus this architecture's own entries.
func allRules() []rule {
	return append(append([]rule(nil), rules...), archRules...)
}
