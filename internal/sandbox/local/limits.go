package local

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/terpdev/terp/internal/sandbox"
)

// bubblewrap sets no resource limits, so terp does, in the best way the
// machine allows:
//
//   - cgroup v2, when /sys/fs/cgroup is cgroup2 and terp's own cgroup lets it
//     create children with the memory and pids controllers (a delegated
//     systemd scope, a container given its own cgroup). The command is
//     started directly inside the sandbox's cgroup (clone3 with
//     CLONE_INTO_CGROUP through SysProcAttr.CgroupFD).
//   - cgroup v1, when the memory and pids hierarchies are mounted and terp may
//     create children in its own cgroups there (typically as root). The
//     sandbox's init joins the cgroup while bwrap holds it on --block-fd,
//     before the command exists.
//   - rlimits otherwise: RLIMIT_AS for memory, which also counts address
//     space that is reserved and never used (OpenBLAS and glibc arenas reserve
//     plenty), and RLIMIT_NPROC for processes, which the kernel counts per
//     user (per user namespace since Linux 5.14, so only the sandbox's own
//     processes on recent kernels) and does not enforce for root at all.
//
// The file size limit is always RLIMIT_FSIZE, and core dumps are always off
// (they would land in /work).
//
// A cgroup belongs to the sandbox, so commands running at once in one
// sandbox (the kernel and an Exec) share its memory and process limits;
// rlimits apply to each process separately.

type limitKind int

const (
	limitRlimit limitKind = iota
	limitCgroupV1
	limitCgroupV2
)

func (k limitKind) String() string {
	switch k {
	case limitCgroupV2:
		return "cgroup v2"
	case limitCgroupV1:
		return "cgroup v1"
	default:
		return "rlimit"
	}
}

// limitHost is what detectLimits found: the mechanism and, for cgroups, the
// directories new sandbox cgroups are made in (terp's own cgroups, so that
// the sandboxes stay inside whatever limits terp itself is under).
type limitHost struct {
	kind     limitKind
	v2Parent string
	v1Memory string
	v1Pids   string
}

// cgroup is one sandbox's cgroup (v2) or pair of cgroups (v1 memory and
// pids), created with the sandbox and removed with it.
type cgroup struct {
	kind limitKind
	dirs []string
}

const cgroupPrefix = "terp-"

// detectLimits picks the mechanism. It tries creating a throwaway cgroup
// rather than reasoning about permissions, because delegation rules differ
// between hosts, containers and cgroup versions.
func detectLimits() *limitHost {
	return detectLimitsFrom("/proc/self/cgroup", "/proc/self/mountinfo")
}

func detectLimitsFrom(cgroupFile, mountinfoFile string) *limitHost {
	own, err := readOwnCgroups(cgroupFile)
	if err != nil {
		return &limitHost{kind: limitRlimit}
	}
	mounts, err := readCgroupMounts(mountinfoFile)
	if err != nil {
		return &limitHost{kind: limitRlimit}
	}
	if dir, ok := mounts.v2dir(own["" /* unified */]); ok && usableV2(dir) {
		return &limitHost{kind: limitCgroupV2, v2Parent: dir}
	}
	mem, okMem := mounts.v1dir("memory", own["memory"])
	pids, okPids := mounts.v1dir("pids", own["pids"])
	if okMem && okPids && usableV1(mem, "memory.limit_in_bytes") && usableV1(pids, "pids.max") {
		return &limitHost{kind: limitCgroupV1, v1Memory: mem, v1Pids: pids}
	}
	return &limitHost{kind: limitRlimit}
}

// readOwnCgroups parses /proc/self/cgroup into controller -> path; the
// cgroup v2 (unified) path is under the key "".
func readOwnCgroups(file string) (map[string]string, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	own := make(map[string]string)
	for line := range strings.Lines(string(data)) {
		parts := strings.SplitN(strings.TrimSpace(line), ":", 3)
		if len(parts) != 3 {
			continue
		}
		if parts[1] == "" {
			own[""] = parts[2]
			continue
		}
		for _, c := range strings.Split(parts[1], ",") {
			own[c] = parts[2]
		}
	}
	return own, nil
}

type cgroupMount struct {
	root, point string
	v2          bool
	controllers []string // v1 only, from the super options
}

type cgroupMounts []cgroupMount

// readCgroupMounts finds cgroup filesystems in /proc/self/mountinfo.
func readCgroupMounts(file string) (cgroupMounts, error) {
	f, err := os.Open(file)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var mounts cgroupMounts
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		// 36 35 98:0 /root /mnt/point rw,noatime master:1 - cgroup cgroup rw,memory
		pre, post, ok := strings.Cut(sc.Text(), " - ")
		if !ok {
			continue
		}
		pf, qf := strings.Fields(pre), strings.Fields(post)
		if len(pf) < 5 || len(qf) < 3 {
			continue
		}
		m := cgroupMount{root: unescapeMount(pf[3]), point: unescapeMount(pf[4])}
		switch qf[0] {
		case "cgroup2":
			m.v2 = true
		case "cgroup":
			m.controllers = strings.Split(qf[2], ",")
		default:
			continue
		}
		mounts = append(mounts, m)
	}
	return mounts, sc.Err()
}

// unescapeMount undoes mountinfo's octal escapes (\040 for a space).
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// within joins a cgroup path from /proc/self/cgroup onto a mount of its
// hierarchy; the mount may show only a subtree (its root), as inside a
// container.
func within(m cgroupMount, cgPath string) (string, bool) {
	rel, ok := strings.CutPrefix(cgPath, m.root)
	if !ok || (rel != "" && m.root != "/" && rel[0] != '/') {
		return "", false
	}
	return filepath.Join(m.point, rel), true
}

func (ms cgroupMounts) v2dir(cgPath string) (string, bool) {
	if cgPath == "" {
		return "", false
	}
	for _, m := range ms {
		if m.v2 {
			if dir, ok := within(m, cgPath); ok {
				return dir, true
			}
		}
	}
	return "", false
}

func (ms cgroupMounts) v1dir(controller, cgPath string) (string, bool) {
	if cgPath == "" {
		return "", false
	}
	for _, m := range ms {
		if !m.v2 && slices.Contains(m.controllers, controller) {
			if dir, ok := within(m, cgPath); ok {
				return dir, true
			}
		}
	}
	return "", false
}

// usableV2 checks that children of dir get the memory and pids controllers,
// enabling them if dir allows, and that a child can be made and limited.
// Enabling fails when dir itself holds processes (cgroup v2's "no internal
// processes" rule), which is the common case for a login session; terp then
// falls back rather than moving itself around the hierarchy.
func usableV2(dir string) bool {
	avail, err := os.ReadFile(filepath.Join(dir, "cgroup.controllers"))
	if err != nil || !hasWords(string(avail), "memory", "pids") {
		return false
	}
	enabled, err := os.ReadFile(filepath.Join(dir, "cgroup.subtree_control"))
	if err != nil {
		return false
	}
	if !hasWords(string(enabled), "memory", "pids") {
		if err := os.WriteFile(filepath.Join(dir, "cgroup.subtree_control"), []byte("+memory +pids"), 0); err != nil {
			return false
		}
	}
	return probeCgroup(dir, "memory.max", "pids.max")
}

func usableV1(dir, limitFile string) bool {
	return probeCgroup(dir, limitFile)
}

// probeCgroup creates a child of parent, writes "max"-like values to the
// given limit files and removes it again.
func probeCgroup(parent string, files ...string) bool {
	id, err := newID()
	if err != nil {
		return false
	}
	dir := filepath.Join(parent, cgroupPrefix+"probe-"+id)
	if err := os.Mkdir(dir, 0o755); err != nil {
		return false
	}
	defer os.Remove(dir)
	for _, f := range files {
		cur, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil {
			return false
		}
		if err := os.WriteFile(filepath.Join(dir, f), cur, 0); err != nil {
			return false
		}
	}
	return true
}

func hasWords(s string, words ...string) bool {
	fields := strings.Fields(s)
	for _, w := range words {
		if !slices.Contains(fields, w) {
			return false
		}
	}
	return true
}

// create makes the sandbox's cgroup and sets its limits. It returns nil, and
// no error, when limits are rlimits only. An existing cgroup of the same name
// (left by a terp that crashed) is reused.
func (h *limitHost) create(id string, l sandbox.Limits) (*cgroup, error) {
	name := cgroupPrefix + id
	cg := &cgroup{kind: h.kind}
	mkdir := func(parent string) (string, error) {
		dir := filepath.Join(parent, name)
		if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
			return "", err
		}
		cg.dirs = append(cg.dirs, dir)
		return dir, nil
	}
	var err error
	switch h.kind {
	case limitCgroupV2:
		var dir string
		if dir, err = mkdir(h.v2Parent); err != nil {
			break
		}
		err = errors.Join(
			writeCgroup(dir, "memory.max", l.MemoryBytes),
			writeCgroup(dir, "pids.max", int64(l.Processes)))
		// Without swap limited too, the memory limit only moves the excess
		// to swap. Not every kernel has swap accounting; ignore its absence.
		_ = writeCgroup(dir, "memory.swap.max", 0)
	case limitCgroupV1:
		var mem, pids string
		if mem, err = mkdir(h.v1Memory); err != nil {
			break
		}
		if pids, err = mkdir(h.v1Pids); err != nil {
			break
		}
		err = errors.Join(
			writeCgroup(mem, "memory.limit_in_bytes", l.MemoryBytes),
			writeCgroup(pids, "pids.max", int64(l.Processes)))
		// memsw (memory+swap) must be at least the memory limit, so it is
		// written second. It exists only with swap accounting on.
		if _, statErr := os.Stat(filepath.Join(mem, "memory.memsw.limit_in_bytes")); statErr == nil {
			err = errors.Join(err, writeCgroup(mem, "memory.memsw.limit_in_bytes", l.MemoryBytes))
		}
	default:
		return nil, nil
	}
	if err != nil {
		_ = cg.remove()
		return nil, fmt.Errorf("set up %s limits: %w", h.kind, err)
	}
	return cg, nil
}

func writeCgroup(dir, file string, v int64) error {
	return os.WriteFile(filepath.Join(dir, file), []byte(strconv.FormatInt(v, 10)), 0)
}

// join moves pid into the sandbox's cgroups (v1). pid is bwrap's process
// inside the sandbox, held on --block-fd, so everything it starts afterwards
// is born inside.
func (c *cgroup) join(pid int) error {
	if c == nil || c.kind != limitCgroupV1 {
		return nil
	}
	for _, dir := range c.dirs {
		if err := os.WriteFile(filepath.Join(dir, "cgroup.procs"), []byte(strconv.Itoa(pid)), 0); err != nil {
			return fmt.Errorf("join cgroup %s: %w", dir, err)
		}
	}
	return nil
}

// openDir opens the cgroup v2 directory for SysProcAttr.CgroupFD. It
// returns -1 when there is no v2 cgroup.
func (c *cgroup) openDir() (int, error) {
	if c == nil || c.kind != limitCgroupV2 {
		return -1, nil
	}
	return unix.Open(c.dirs[0], unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
}

// remove kills whatever is still in the cgroups (nothing, normally: every
// command's pid namespace dies with it) and removes them. A cgroup with
// processes cannot be removed, and dying processes take a moment to leave.
func (c *cgroup) remove() error {
	if c == nil {
		return nil
	}
	var errs []error
	for _, dir := range slices.Backward(c.dirs) {
		errs = append(errs, removeCgroup(dir))
	}
	return errors.Join(errs...)
}

func removeCgroup(dir string) error {
	deadline := time.Now().Add(5 * time.Second)
	for {
		if procs, err := os.ReadFile(filepath.Join(dir, "cgroup.procs")); err == nil {
			for _, f := range strings.Fields(string(procs)) {
				if pid, err := strconv.Atoi(f); err == nil && pid > 0 {
					_ = syscall.Kill(pid, syscall.SIGKILL)
				}
			}
		}
		err := os.Remove(dir)
		if err == nil || errors.Is(err, os.ErrNotExist) {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("remove cgroup: %w", err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// rlimit is one resource limit a command gets, hard as well as soft, so
// the code cannot raise it again.
type rlimit struct {
	resource int
	flag     string // util-linux prlimit's option for it
	value    uint64
}

// rlimits lists the limits for a sandbox's commands of the given kind.
func rlimits(kind limitKind, l sandbox.Limits) []rlimit {
	out := []rlimit{
		{unix.RLIMIT_FSIZE, "--fsize", uint64(l.FileSizeBytes)},
		{unix.RLIMIT_CORE, "--core", 0},
	}
	if kind == limitRlimit {
		out = append(out,
			rlimit{unix.RLIMIT_AS, "--as", uint64(l.MemoryBytes)},
			rlimit{unix.RLIMIT_NPROC, "--nproc", uint64(l.Processes)})
	}
	return out
}

// setRlimits applies the rlimits to pid, bwrap's process inside the sandbox,
// while bwrap holds it on --block-fd; the command inherits them. prlimit(2)
// on another process needs the same uid or CAP_SYS_RESOURCE, so this serves
// sandboxes that run as terp's user; those with a uid of their own get the
// same limits from prlimitArgs.
func setRlimits(pid int, kind limitKind, l sandbox.Limits) error {
	var errs []error
	for _, r := range rlimits(kind, l) {
		lim := unix.Rlimit{Cur: r.value, Max: r.value}
		if err := unix.Prlimit(pid, r.resource, &lim, nil); err != nil {
			errs = append(errs, fmt.Errorf("prlimit %d: %w", r.resource, err))
		}
	}
	return errors.Join(errs...)
}

// prlimitArgs is the util-linux prlimit command line that starts bwrap with
// the rlimits already set, for a sandbox running as a uid of its own: terp,
// though root, may lack CAP_SYS_RESOURCE (containers drop it), and prlimit
// runs as the sandbox's uid, which may always lower its own limits.
func prlimitArgs(prlimit string, kind limitKind, l sandbox.Limits) []string {
	args := []string{prlimit}
	for _, r := range rlimits(kind, l) {
		v := strconv.FormatUint(r.value, 10)
		args = append(args, r.flag+"="+v+":"+v)
	}
	return append(args, "--")
}
