package local

import (
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"syscall"

	"golang.org/x/sys/unix"
)

// Who the code is on the host. bwrap maps the sandbox's uid 1000 to the uid
// that runs bwrap. For a normal user that is the user: the code can do what
// the user can, inside the namespaces. For root it would be host root, which
// owns every file in /proc/sys: code could rewrite kernel.core_pattern and
// have the kernel run a program as root on the next crash. So when terp runs
// as root it starts bwrap as an unprivileged uid of the sandbox's own, taken
// from Config.HostUIDs and kept in the sandbox's metadata, and gives that
// uid the sandbox's work directory. Two sandboxes under one Root never share
// a uid, so RLIMIT_NPROC counts one sandbox's processes only, and one
// sandbox's files are closed to another's.
//
// bwrap resolves every bind source by path (realpath, even for --bind-fd)
// with the uid it runs as, so that uid must be able to search every
// directory above the work directory: Root and the sandbox's own directory
// are made searchable (0711, nothing listable), and New refuses a Root below
// a directory other users cannot search, saying what to do.

// runsAsRoot reports whether sandboxes get uids of their own; tests of the
// root path as a non-root user cannot exist, since only root can setuid.
func runsAsRoot() bool { return os.Geteuid() == 0 }

// probeUID is the uid Check's throwaway sandbox runs as: the range's last,
// which allocateUID never hands out.
func (b *Backend) probeUID() uint32 { return b.cfg.HostUIDs.Last() }

// checkSearchable makes sure a uid other than root can reach dir: every
// directory above it must be searchable by others.
func checkSearchable(dir string) error {
	for d := filepath.Dir(dir); ; d = filepath.Dir(d) {
		fi, err := os.Stat(d)
		if err != nil {
			return err
		}
		if fi.Mode().Perm()&0o001 == 0 {
			return &SetupError{
				Problem: fmt.Sprintf("terp runs as root, so each sandbox runs as an unprivileged uid of its own, "+
					"which cannot reach %s: %s is not searchable by other users", dir, d),
				Fix: "keep sandboxes below directories others may search (root's default, with XDG_DATA_HOME unset, is " +
					SystemDir + "), or allow searching with `chmod o+x " + d + "`",
			}
		}
		if d == "/" {
			return nil
		}
	}
}

// MkdirSearchable creates dir and every missing directory above it, each
// searchable by others but not listable (0711), so that the uids of root's
// sandboxes can pass through to their work directories. Directories that
// exist are left as they are.
func MkdirSearchable(dir string) error {
	fi, err := os.Stat(dir)
	if err == nil {
		if !fi.IsDir() {
			return fmt.Errorf("%s is not a directory", dir)
		}
		return nil
	}
	if parent := filepath.Dir(dir); parent != dir {
		if err := MkdirSearchable(parent); err != nil {
			return err
		}
	}
	if err := os.Mkdir(dir, 0o711); err != nil && !errors.Is(err, fs.ErrExist) {
		return err
	}
	return os.Chmod(dir, 0o711) // past the umask
}

// SystemDir is where root keeps sandboxes when no data directory is chosen
// (XDG_DATA_HOME unset): root's home is closed to other users, and so to the
// sandboxes' uids.
const SystemDir = "/var/lib/terp"

// allocateUID makes a sandbox directory named id under Root and records a
// host uid no other sandbox there has, both under a lock on Root so that
// concurrent terps cannot pick the same one. The directory holds m, with the
// uid, when allocateUID returns.
func (b *Backend) allocateUID(dir string, m *meta) error {
	lock, err := os.Open(b.cfg.Root) // flock works on a directory too
	if err != nil {
		return err
	}
	defer lock.Close()
	if err := unix.Flock(int(lock.Fd()), unix.LOCK_EX); err != nil {
		return err
	}
	used, err := b.usedUIDs()
	if err != nil {
		return err
	}
	r := b.cfg.HostUIDs
	usable := r.Count - 1 // without probeUID
	if uint32(len(used)) >= usable {
		return fmt.Errorf("all %d host uids of sandbox_uids (%s) are taken by sandboxes under %s; "+
			"remove old conversations (terp sessions rm, terp sessions prune) or widen the range", usable, r, b.cfg.Root)
	}
	// A random start spreads the uids of sandboxes under different Roots,
	// which do not see each other's.
	start := rand.Uint32N(usable)
	for i := range usable {
		uid := r.First + (start+i)%usable
		if !used[uid] {
			m.HostUID = uid
			break
		}
	}
	return writeMeta(dir, *m)
}

// usedUIDs collects the host uids of the sandboxes under Root.
func (b *Backend) usedUIDs() (map[uint32]bool, error) {
	entries, err := os.ReadDir(b.cfg.Root)
	if err != nil {
		return nil, err
	}
	used := make(map[uint32]bool)
	for _, e := range entries {
		if !e.IsDir() || !idPattern().MatchString(e.Name()) {
			continue
		}
		if m, err := readMeta(filepath.Join(b.cfg.Root, e.Name())); err == nil && m.HostUID != 0 {
			used[m.HostUID] = true
		}
	}
	return used, nil
}

// giveWork hands a sandbox's directories to its host uid: the sandbox
// directory becomes searchable, and the work directory and everything in it
// the uid's, closed to others. Ownership changes never follow symlinks.
func giveWork(dir string, uid uint32) error {
	if err := os.Chmod(dir, 0o711); err != nil {
		return err
	}
	work := filepath.Join(dir, "work")
	root, err := os.OpenRoot(work)
	if err != nil {
		return err
	}
	defer root.Close()
	if err := root.Chmod(".", 0o700); err != nil {
		return err
	}
	return fs.WalkDir(root.FS(), ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		return root.Lchown(p, int(uid), int(uid))
	})
}

// owned reports whether every file under a sandbox's work directory already
// belongs to uid, so that open need not walk it.
func owned(work string, uid uint32) bool {
	fi, err := os.Lstat(work)
	if err != nil {
		return false
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	return ok && st.Uid == uid
}

// chownNew gives what terp just created in the work directory to the
// sandbox's uid, so the code can change or remove it; when terp is not root
// the files are already the user's.
func (s *Sandbox) chownNew(root *os.Root, paths ...string) error {
	if s.meta.HostUID == 0 {
		return nil
	}
	var errs []error
	for _, p := range paths {
		errs = append(errs, root.Lchown(p, int(s.meta.HostUID), int(s.meta.HostUID)))
	}
	return errors.Join(errs...)
}

// HostUID is the uid the sandbox's code runs as on the host: its own when
// terp runs as root, terp's user's otherwise.
func (s *Sandbox) HostUID() int {
	if s.meta.HostUID != 0 {
		return int(s.meta.HostUID)
	}
	return os.Getuid()
}

// HostUsers says, for `terp doctor`, which host uid the code runs as.
func (b *Backend) HostUsers() string {
	if runsAsRoot() {
		return fmt.Sprintf("a uid of its own per sandbox from %s (terp runs as root; the code never does)", b.cfg.HostUIDs)
	}
	return fmt.Sprintf("uid %d, terp's user (never root)", os.Getuid())
}

// credential is how bwrap is started for the sandbox: as its host uid with
// no supplementary groups when terp is root, as terp's user otherwise.
func credential(uid uint32) *syscall.Credential {
	if uid == 0 {
		return nil
	}
	return &syscall.Credential{Uid: uid, Gid: uid, Groups: []uint32{}}
}
