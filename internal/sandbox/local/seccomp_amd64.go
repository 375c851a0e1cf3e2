package local

import "golang.org/x/sys/unix"

// nativeArch is the audit architecture of amd64's own syscalls. A 64-bit
// process can still make i386 syscalls (int 0x80), which arrive as
// AUDIT_ARCH_I386 with i386 numbers and are denied as a whole.
const nativeArch = unix.AUDIT_ARCH_X86_64

// foreignNrBase is __X32_SYSCALL_BIT: x32 syscalls arrive with the x86_64
// audit arch and their number plus this bit, so the filter denies every
// number at or above it (as Codex's and Docker's filters do).
const foreignNrBase = 0x40000000

// archRules are the syscalls amd64 has and arm64 does not.
var archRules = []rule{
	syscallRule("uselib", unix.SYS_USELIB, unix.EPERM, "an obsolete way to load a library, used by old exploits"),
	syscallRule("modify_ldt", unix.SYS_MODIFY_LDT, unix.EPERM,
		"16-bit segments no analysis needs, and a history of information leaks (as Flatpak)"),
}
