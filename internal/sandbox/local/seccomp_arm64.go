package local

import "golang.org/x/sys/unix"

// nativeArch is the audit architecture of arm64's own syscalls; AArch32
// syscalls (AUDIT_ARCH_ARM) have other numbers and are denied as a whole.
const nativeArch = unix.AUDIT_ARCH_AARCH64

// foreignNrBase is 0: arm64 has no x32-like ABI sharing its audit arch.
const foreignNrBase = 0

// archRules is empty: uselib and modify_ldt do not exist on arm64.
var archRules []rule
