package local

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/terpdev/terp/internal/egress"
	"github.com/terpdev/terp/internal/sandbox"
)

// The user the code runs as inside the sandbox. bwrap maps it to the user
// running terp, so files either side writes in /work belong to both.
const (
	sandboxUID  = 1000
	sandboxGID  = 1000
	sandboxUser = "sandbox"
	hostname    = "terp"
)

// bwrapFeatures records options that older bubblewrap releases lack, so that
// terp still runs (with less hardening) on, say, Ubuntu 22.04's 0.6.
type bwrapFeatures struct {
	size          bool // --size before --tmpfs, 0.7.0
	disableUserns bool // --disable-userns, 0.8.0
	seccomp       bool // --seccomp; only the earliest releases lack it
}

func probeFeatures(bwrap string) (bwrapFeatures, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bwrap, "--help")
	cmd.Env = []string{}
	out, err := cmd.CombinedOutput()
	if err != nil && len(out) == 0 {
		return bwrapFeatures{}, &SetupError{
			Problem: fmt.Sprintf("%s does not run", bwrap),
			Fix:     "reinstall bubblewrap: `sudo apt-get install --reinstall bubblewrap`",
			Err:     err,
		}
	}
	return bwrapFeatures{
		size:          bytes.Contains(out, []byte("--size")),
		disableUserns: bytes.Contains(out, []byte("--disable-userns")),
		seccomp:       bytes.Contains(out, []byte("--seccomp")),
	}, nil
}

// hostDirs are the top-level directories a program may expect besides /usr.
// On merged-usr systems they are symlinks into /usr and are recreated as
// symlinks; elsewhere they are bound read-only.
var hostDirs = []string{"bin", "sbin", "lib", "lib32", "lib64", "libx32"}

// etcFiles are the host's /etc entries the code needs, found by tracing
// Python importing numpy, pandas and matplotlib and saving a figure. Debian
// resolves libblas.so.3 through /etc/alternatives, so that directory (only
// symlinks) is needed for numpy to load at all.
var etcFiles = []string{
	"ld.so.cache", "ld.so.conf", "ld.so.conf.d",
	"alternatives",
	"fonts",
	"matplotlibrc",
	"localtime", "timezone",
	"mime.types",
}

// netEtcFiles are added when the sandbox has network access (full or
// allowlist), for name resolution and TLS.
var netEtcFiles = []string{
	"resolv.conf", "gai.conf", "host.conf",
	"ssl", "ca-certificates", "pki", "crypto-policies",
}

// hostLayout returns the bwrap options that mount the host's read-only part
// of the sandbox. It depends only on the host, so Backend computes it once.
func hostLayout() []string {
	args := []string{"--ro-bind", "/usr", "/usr"}
	for _, d := range hostDirs {
		p := "/" + d
		fi, err := os.Lstat(p)
		switch {
		case err != nil:
		case fi.Mode()&os.ModeSymlink != 0:
			if target, err := os.Readlink(p); err == nil {
				args = append(args, "--symlink", target, p)
			}
		case fi.IsDir():
			args = append(args, "--ro-bind", p, p)
		}
	}
	etc := append([]string(nil), etcFiles...)
	// Debian's python3.x reads /etc/python3.x/sitecustomize.py.
	if matches, err := filepath.Glob("/etc/python3*"); err == nil {
		for _, m := range matches {
			etc = append(etc, filepath.Base(m))
		}
	}
	for _, f := range etc {
		args = append(args, "--ro-bind-try", "/etc/"+f, "/etc/"+f)
	}
	return args
}

// hostVisible reports whether a host path is inside what hostLayout mounts.
func hostVisible(p string) bool {
	first, _, _ := strings.Cut(strings.TrimPrefix(filepath.Clean(p), "/"), "/")
	if first == "usr" {
		return true
	}
	for _, d := range hostDirs {
		if first == d {
			return true
		}
	}
	return false
}

// synthesizedEtc are the /etc files each sandbox gets instead of the host's:
// one unprivileged user so that getpass.getuser() and ~ work, and name
// resolution from files only.
var synthesizedEtc = map[string]string{
	"passwd": "root:x:0:0:root:/root:/usr/sbin/nologin\n" +
		sandboxUser + ":x:" + strconv.Itoa(sandboxUID) + ":" + strconv.Itoa(sandboxGID) + ":terp sandbox:/tmp:/bin/sh\n" +
		"nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n",
	"group": "root:x:0:\n" +
		sandboxUser + ":x:" + strconv.Itoa(sandboxGID) + ":\n" +
		"nogroup:x:65534:\n",
	"hosts":         "127.0.0.1\tlocalhost " + hostname + "\n::1\tlocalhost ip6-localhost ip6-loopback\n",
	"nsswitch.conf": "passwd: files\ngroup: files\nshadow: files\nhosts: files dns\nnetworks: files\nprotocols: files\nservices: files\n",
	"hostname":      hostname + "\n",
}

// writeEtc writes the synthesized /etc files into dir, next to the sandbox's
// work directory, from where they are bound read-only.
func writeEtc(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for name, content := range synthesizedEtc {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// Env is the whole environment of a command before ExecOptions.Env; nothing
// comes from the host. The pod backend gives its commands the same. BLAS and OpenMP get few threads because every thread
// counts against the process limit and the machine is shared with the
// model's other work.
func Env() [][2]string {
	threads := strconv.Itoa(min(runtime.NumCPU(), 4))
	return [][2]string{
		{"HOME", "/tmp"},
		{"USER", sandboxUser},
		{"LOGNAME", sandboxUser},
		{"PATH", "/usr/bin:/bin"},
		{"LANG", "C.UTF-8"},
		{"TMPDIR", "/tmp"},
		{"MPLBACKEND", "Agg"},
		{"MPLCONFIGDIR", "/tmp/matplotlib"},
		{"PYTHONDONTWRITEBYTECODE", "1"},
		{"PYTHONUNBUFFERED", "1"},
		{"OPENBLAS_NUM_THREADS", threads},
		{"OMP_NUM_THREADS", threads},
		{"MKL_NUM_THREADS", threads},
	}
}

// Argv returns the bwrap command line that runs cmd in this sandbox, starting
// with the path of bwrap. It is exactly what Exec and Start run, minus the
// descriptors through which terp learns the sandbox's pid, applies limits
// before the command starts and passes the seccomp filter (so running Argv by
// hand gets no rlimits, cgroup or filter); when terp is root it must run as
// HostUID, as terp runs it. It is exported for benchmarks and for showing
// users what runs.
func (s *Sandbox) Argv(cmd []string, opt sandbox.ExecOptions) ([]string, error) {
	return s.argv(cmd, opt, nil)
}

// argv builds the command line; control holds bwrap options inserted before
// the command (the status and block descriptors).
func (s *Sandbox) argv(cmd []string, opt sandbox.ExecOptions, control []string) ([]string, error) {
	if len(cmd) == 0 {
		return nil, fmt.Errorf("exec: empty command")
	}
	dir, err := workingDir(opt.Dir)
	if err != nil {
		return nil, err
	}
	b := s.b
	limits := s.meta.Limits

	args := []string{b.cfg.BwrapPath, "--unshare-all"}
	if s.meta.Network.Mode == sandbox.NetworkFull {
		args = append(args, "--share-net")
	}
	args = append(args,
		"--unshare-user", "--uid", strconv.Itoa(sandboxUID), "--gid", strconv.Itoa(sandboxGID))
	if b.features.disableUserns {
		args = append(args, "--disable-userns")
	}
	args = append(args,
		"--die-with-parent", "--new-session", "--clearenv",
		"--cap-drop", "ALL", "--hostname", hostname)
	args = append(args, b.layout...)
	if !s.meta.Network.Off() {
		for _, f := range netEtcFiles {
			args = append(args, "--ro-bind-try", "/etc/"+f, "/etc/"+f)
		}
	}
	if s.egress != nil {
		args = append(args, "--ro-bind", s.egress.path(), egress.SocketPath)
	}
	etc := filepath.Join(s.dir, "etc")
	for _, name := range slices.Sorted(maps.Keys(synthesizedEtc)) {
		args = append(args, "--ro-bind", filepath.Join(etc, name), "/etc/"+name)
	}
	args = append(args, b.fontSeedArgs()...)
	// bwrap covers a few of /proc's host-wide files read-only itself, but
	// skips /proc/sys when its directory looks read-only to the sandbox's
	// user (as it does when that user is mapped to root), though the files
	// in it are not. Cover it, whoever the user is.
	args = append(args, "--proc", "/proc",
		"--ro-bind", "/proc/sys", "/proc/sys",
		"--ro-bind-try", "/proc/sysrq-trigger", "/proc/sysrq-trigger",
		"--dev", "/dev")
	// tmpfs lives in memory: bound it by the memory limit, which a cgroup
	// would enforce anyway but rlimits would not.
	tmpSize := strconv.FormatInt(limits.MemoryBytes, 10)
	for _, tmp := range []string{"/tmp", "/dev/shm"} {
		if b.features.size {
			args = append(args, "--size", tmpSize)
		}
		args = append(args, "--tmpfs", tmp)
	}
	args = append(args,
		"--bind", s.work, sandbox.WorkDir,
		// The same directory under the name notebook-trained models use.
		// The code cannot unmount it, and the root it sits in is read-only.
		"--bind", s.work, sandbox.DataDir,
		// The root itself is a tmpfs bwrap made; without this the code could
		// fill memory by writing files in /.
		"--remount-ro", "/",
		"--chdir", dir)

	for _, kv := range Env() {
		args = append(args, "--setenv", kv[0], kv[1])
	}
	if s.egress != nil {
		for _, kv := range egress.Env() {
			args = append(args, "--setenv", kv[0], kv[1])
		}
	}
	for _, kv := range opt.Env {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return nil, fmt.Errorf("exec: environment entry %q is not KEY=VALUE", kv)
		}
		args = append(args, "--setenv", k, v)
	}
	args = append(args, control...)
	args = append(args, "--")
	cmd = s.resolveCommand(cmd)
	if s.egress != nil {
		cmd = egress.Wrap(s.b.cfg.Python, cmd)
	}
	args = append(args, cmd...)
	return args, nil
}

// resolveCommand makes "python3" and "python" mean Config.Python, so the
// model's habitual `python3 main.py` runs the interpreter terp checked.
func (s *Sandbox) resolveCommand(cmd []string) []string {
	out := append([]string(nil), cmd...)
	if out[0] == "python3" || out[0] == "python" {
		out[0] = s.b.cfg.Python
	}
	return out
}

// workingDir turns ExecOptions.Dir into an absolute path in the sandbox:
// relative paths are relative to /work.
func workingDir(dir string) (string, error) {
	if dir == "" {
		return sandbox.WorkDir, nil
	}
	if !path.IsAbs(dir) {
		dir = path.Join(sandbox.WorkDir, dir)
	}
	return path.Clean(dir), nil
}

// libraryProbe finds the modules named on its command line without importing
// them. It prints those it cannot find on one line, and on the next the
// directories the others were found in, and exits 3 if any is missing.
const libraryProbe = "import importlib.util as u, os, sys\n" +
	"specs = {m: u.find_spec(m) for m in sys.argv[1:]}\n" +
	"print(' '.join(m for m, s in specs.items() if s is None))\n" +
	"print(' '.join(sorted({os.path.dirname(os.path.dirname(s.origin)) for s in specs.values() if s and s.origin})))\n" +
	"sys.exit(3 if None in specs.values() else 0)\n"

// scratch makes a throwaway sandbox for terp's own commands (the probe,
// the font cache), in a directory of the root named prefix and a random
// suffix; done removes it.
func (b *Backend) scratch(prefix string) (s *Sandbox, done func(), err error) {
	dir, err := os.MkdirTemp(b.cfg.Root, prefix)
	if err != nil {
		return nil, nil, fmt.Errorf("local sandbox: %w", err)
	}
	done = func() { _ = removeTree(dir) }
	defer func() {
		if err != nil {
			done()
		}
	}()
	m := meta{ID: filepath.Base(dir), Timeout: time.Minute}
	m.fillDefaults()
	if err := os.MkdirAll(filepath.Join(dir, "work"), 0o755); err != nil {
		return nil, nil, err
	}
	if runsAsRoot() {
		m.HostUID = b.probeUID()
		if err := giveWork(dir, m.HostUID); err != nil {
			return nil, nil, err
		}
	}
	if err := writeEtc(filepath.Join(dir, "etc")); err != nil {
		return nil, nil, err
	}
	s = &Sandbox{b: b, id: m.ID, dir: dir, work: filepath.Join(dir, "work"), meta: m,
		deadline: time.Now().Add(m.Timeout), procs: make(map[*proc]struct{})}
	return s, done, nil
}

// probe runs a throwaway sandbox: bwrap's namespaces must work here and the
// sandbox's Python must find the analysis libraries. Finding modules without
// importing them keeps this at a few tens of milliseconds. A pass is
// recorded (probecache.go).
func (b *Backend) probe(ctx context.Context) error {
	s, done, err := b.scratch(".probe-")
	if err != nil {
		return err
	}
	defer done()
	cmd := append([]string{"python3", "-c", libraryProbe}, pythonPackages...)
	res, err := s.Exec(ctx, cmd, sandbox.ExecOptions{Timeout: 30 * time.Second})
	if setup := (*SetupError)(nil); errors.As(err, &setup) {
		return setup
	}
	if err != nil {
		return &SetupError{
			Problem: "bubblewrap cannot create a sandbox here: " + err.Error(),
			Fix: "unprivileged user namespaces may be disabled (check `sysctl user.max_user_namespaces`, " +
				"`kernel.unprivileged_userns_clone`, or on Ubuntu 24.04+ `kernel.apparmor_restrict_unprivileged_userns`), " +
				"or terp runs inside a container that forbids them; enable them or use `--sandbox docker`",
			Err: err,
		}
	}
	missing, dirs, _ := strings.Cut(res.Stdout, "\n")
	switch res.ExitCode {
	case 0:
		b.recordProbe(true, strings.Fields(dirs))
		return nil
	case 3:
		return &SetupError{
			Problem: fmt.Sprintf("the sandbox's Python (%s) lacks %s", b.cfg.Python, strings.TrimSpace(missing)),
			Fix:     pythonFix(),
		}
	default:
		return &SetupError{
			Problem: fmt.Sprintf("the sandbox's Python (%s) does not run (exit %d): %s", b.cfg.Python, res.ExitCode, strings.TrimSpace(res.Stderr)),
			Fix:     pythonFix(),
		}
	}
}
