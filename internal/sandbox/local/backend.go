package local

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/terpdev/terp/internal/egress"
	"github.com/terpdev/terp/internal/sandbox"
)

var (
	_ sandbox.Backend = (*Backend)(nil)
	_ sandbox.Sandbox = (*Sandbox)(nil)
)

// Defaults for what sandbox.Options leaves at zero.
const (
	DefaultTimeout       = 30 * time.Minute
	DefaultMemoryBytes   = 2 << 30
	DefaultProcesses     = 256
	DefaultFileSizeBytes = 1 << 30
	DefaultWorkBytes     = 4 << 30
)

// DefaultPython is the interpreter commands get when Config.Python is empty.
// It is Debian's, whose numpy, pandas and matplotlib come from apt and live
// under /usr, the one host tree the sandbox sees.
const DefaultPython = "/usr/bin/python3"

// Config configures the bubblewrap backend.
type Config struct {
	// Root is the host directory holding one subdirectory per sandbox,
	// normally $XDG_DATA_HOME/terp/sandboxes. It is created, private to the
	// user, if missing. Empty means that default.
	Root string
	// Python is the interpreter that "python3" and "python" at the start of a
	// command resolve to. It must live under /usr. Empty means DefaultPython.
	Python string
	// BwrapPath is the bubblewrap binary. Empty means "bwrap" looked up in
	// PATH.
	BwrapPath string
	// HostUIDs are the host uids sandboxes run as when terp runs as root,
	// one per sandbox. The zero value means sandbox.DefaultUIDs. Unused
	// otherwise: the code then runs as terp's user.
	HostUIDs sandbox.UIDRange
	// EgressOptions are passed to the allowlist mode's proxy: the address
	// ranges the operator trusts (network_trusted_ranges), and in tests a
	// loopback server standing in for a public host.
	EgressOptions []egress.Option
}

// Backend creates bubblewrap sandboxes under one root directory. It is safe
// for concurrent use.
type Backend struct {
	cfg      Config
	features bwrapFeatures
	layout   []string // the host part of every command line, see hostLayout
	limits   *limitHost
	prlimit  string // util-linux prlimit, which starts bwrap when it runs as another uid
	maxList  int    // List's bound; sandbox.MaxListEntries but in tests
	filter   []byte // the compiled seccomp filter; nil when off
	noFilter string // why filter is nil

	checkMu sync.Mutex
	checked bool

	fontSeed atomic.Pointer[string] // the host path of matplotlib's font cache, once there is one (fontseed.go)
}

// New checks that bubblewrap and Python are installed and prepares the root
// directory. The errors say what to install; New does not start a sandbox
// (Check does, and Create calls it once).
func New(cfg Config) (*Backend, error) {
	if cfg.BwrapPath == "" {
		cfg.BwrapPath = "bwrap"
	}
	bwrap, err := exec.LookPath(cfg.BwrapPath)
	if err != nil {
		return nil, &SetupError{
			Problem: "bubblewrap is not installed",
			Fix:     "run `sudo apt-get install bubblewrap` (Debian/Ubuntu) or `sudo dnf install bubblewrap`",
			Err:     err,
		}
	}
	cfg.BwrapPath = bwrap

	if cfg.Python == "" {
		cfg.Python = DefaultPython
	}
	if err := checkPython(cfg.Python); err != nil {
		return nil, err
	}

	if cfg.HostUIDs.Count == 0 {
		cfg.HostUIDs = sandbox.DefaultUIDs
	}
	if cfg.Root == "" {
		cfg.Root, err = defaultRoot()
		if err != nil {
			return nil, err
		}
	}
	if cfg.Root, err = filepath.Abs(cfg.Root); err != nil {
		return nil, err
	}
	var prlimit string
	if !runsAsRoot() {
		if err := os.MkdirAll(cfg.Root, 0o700); err != nil {
			return nil, fmt.Errorf("local sandbox: %w", err)
		}
	} else {
		if prlimit, err = exec.LookPath("prlimit"); err != nil {
			return nil, &SetupError{
				Problem: "terp runs as root, so sandboxes run as uids of their own and get their limits from prlimit, which is not installed",
				Fix:     "install util-linux (`sudo apt-get install util-linux`), or run terp as a normal user",
				Err:     err,
			}
		}
		// The sandboxes' uids must pass through Root, and may not list it.
		if err := MkdirSearchable(cfg.Root); err != nil {
			return nil, fmt.Errorf("local sandbox: %w", err)
		}
		if err := os.Chmod(cfg.Root, 0o711); err != nil {
			return nil, fmt.Errorf("local sandbox: %w", err)
		}
		if err := checkSearchable(cfg.Root); err != nil {
			return nil, err
		}
	}

	features, err := probeFeatures(bwrap)
	if err != nil {
		return nil, err
	}
	b := &Backend{
		cfg:      cfg,
		features: features,
		layout:   hostLayout(),
		prlimit:  prlimit,
		limits:   detectLimits(),
	}
	b.filter, b.noFilter = loadFilter(features)
	return b, nil
}

// LimitsMechanism says how resource limits are enforced on this machine:
// "cgroup v2", "cgroup v1" or "rlimit". Cgroups limit the memory a sandbox
// really uses and count its processes exactly; rlimits are the fallback and
// cap address space (which over-counts what BLAS and glibc reserve) and
// processes per user. The file size limit is always an rlimit.
func (b *Backend) LimitsMechanism() string { return b.limits.kind.String() }

// Root is the directory holding the sandboxes.
func (b *Backend) Root() string { return b.cfg.Root }

// Check runs a trivial command in a throwaway sandbox: it proves that bwrap
// can create namespaces here and that the sandbox's Python has numpy, pandas
// and matplotlib. It probes once per Backend, whatever an earlier process
// recorded; `terp doctor` calls it.
func (b *Backend) Check(ctx context.Context) error { return b.check(ctx, false) }

// check is Check; Create and Resume trust a recent pass recorded by an
// earlier process (probecache.go) instead of probing again.
func (b *Backend) check(ctx context.Context, trustRecord bool) error {
	b.checkMu.Lock()
	defer b.checkMu.Unlock()
	if b.checked {
		return nil
	}
	if !trustRecord || !b.probePassedBefore() {
		if err := b.probe(ctx); err != nil {
			b.recordProbe(false, nil)
			return err
		}
	}
	b.checked = true
	b.loadFontSeed(ctx)
	return nil
}

// Create makes a new sandbox directory and returns it as a *Sandbox. Zero
// fields of opt get the defaults above: a 30 minute lifetime, 2 GiB of
// memory, 256 processes and 1 GiB files. The lifetime only stops new
// commands; files stay readable until Close.
func (b *Backend) Create(ctx context.Context, opt sandbox.Options) (sandbox.Sandbox, error) {
	if err := b.check(ctx, true); err != nil {
		return nil, err
	}
	return b.create(ctx, opt)
}

func (b *Backend) create(ctx context.Context, opt sandbox.Options) (*Sandbox, error) {
	if err := egress.Check(opt.Network); err != nil {
		return nil, fmt.Errorf("create sandbox: %w", err)
	}
	m := meta{
		Created: time.Now().UTC(),
		Timeout: opt.Timeout,
		Limits:  opt.Limits,
		Network: opt.Network,
	}
	m.fillDefaults()
	for range 10 {
		id, err := newID()
		if err != nil {
			return nil, err
		}
		dir := filepath.Join(b.cfg.Root, id)
		if err := os.Mkdir(dir, 0o700); errors.Is(err, os.ErrExist) {
			continue
		} else if err != nil {
			return nil, fmt.Errorf("create sandbox: %w", err)
		}
		m.ID = id
		if runsAsRoot() {
			if err := b.allocateUID(dir, &m); err != nil {
				_ = removeTree(dir)
				return nil, fmt.Errorf("create sandbox: %w", err)
			}
		}
		s, err := b.open(dir, m)
		if err != nil {
			_ = removeTree(dir)
			return nil, err
		}
		return s, nil
	}
	return nil, errors.New("create sandbox: could not find a free id")
}

// discard removes what a sandbox left on the host after its terp died
// without closing it: the directory and the cgroups, which are found by
// name (create is idempotent for existing ones).
func (b *Backend) discard(dir string, m meta) {
	if cg, err := b.limits.create(m.ID, m.Limits); err == nil {
		_ = cg.remove()
	}
	_ = removeTree(dir)
}

// Resume reopens a paused sandbox. Its files are as the code left them; its
// lifetime (Options.Timeout) starts again from now. A session whose directory
// is gone returns an error wrapping sandbox.ErrExpired.
func (b *Backend) Resume(ctx context.Context, id sandbox.SessionID) (sandbox.Sandbox, error) {
	if err := b.check(ctx, true); err != nil {
		return nil, err
	}
	if !idPattern().MatchString(string(id)) {
		return nil, fmt.Errorf("resume sandbox %q: not a local sandbox id: %w", id, sandbox.ErrExpired)
	}
	dir := filepath.Join(b.cfg.Root, string(id))
	m, err := readMeta(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("resume sandbox %s: %w", id, sandbox.ErrExpired)
	}
	if err != nil {
		return nil, fmt.Errorf("resume sandbox %s: %w", id, err)
	}
	if _, err := os.Stat(filepath.Join(dir, "work")); err != nil {
		return nil, fmt.Errorf("resume sandbox %s: %w", id, sandbox.ErrExpired)
	}
	if m.expired(time.Now()) {
		// Left running past its lifetime: clean it up rather than revive it.
		b.discard(dir, m)
		return nil, fmt.Errorf("resume sandbox %s: its %s lifetime ended while it was not paused: %w", id, m.Timeout, sandbox.ErrExpired)
	}
	if runsAsRoot() && m.HostUID == 0 {
		// Made by a terp that ran sandboxes as root: give it a uid now.
		if err := b.allocateUID(dir, &m); err != nil {
			return nil, fmt.Errorf("resume sandbox %s: %w", id, err)
		}
	}
	return b.open(dir, m)
}

// open prepares an existing or new sandbox directory for use: its metadata,
// the synthesized /etc files and the cgroup.
func (b *Backend) open(dir string, m meta) (*Sandbox, error) {
	if err := os.MkdirAll(filepath.Join(dir, "work"), 0o755); err != nil {
		return nil, fmt.Errorf("create sandbox: %w", err)
	}
	if err := writeEtc(filepath.Join(dir, "etc")); err != nil {
		return nil, fmt.Errorf("create sandbox: %w", err)
	}
	if m.HostUID != 0 && !owned(filepath.Join(dir, "work"), m.HostUID) {
		if err := giveWork(dir, m.HostUID); err != nil {
			return nil, fmt.Errorf("create sandbox: give it to uid %d: %w", m.HostUID, err)
		}
	}
	m.Deadline = time.Now().UTC().Add(m.Timeout)
	m.Paused = false
	if err := writeMeta(dir, m); err != nil {
		return nil, fmt.Errorf("create sandbox: %w", err)
	}
	cg, err := b.limits.create(m.ID, m.Limits)
	if err != nil {
		return nil, fmt.Errorf("create sandbox: %w", err)
	}
	s := &Sandbox{
		b:        b,
		id:       m.ID,
		dir:      dir,
		work:     filepath.Join(dir, "work"),
		meta:     m,
		cgroup:   cg,
		deadline: m.Deadline,
		procs:    make(map[*proc]struct{}),
	}
	s.watch = s.newWorkWatch()
	if m.Network.Mode == sandbox.NetworkAllowlist {
		if s.egress, err = startEgress(dir, m.Network.Allow, b.cfg.EgressOptions); err != nil {
			if cg != nil {
				_ = cg.remove()
			}
			return nil, fmt.Errorf("create sandbox: %w", err)
		}
	}
	return s, nil
}

// idPattern is what newID makes. Resume checks it so that a session id can
// never name a path outside Root.
var idPattern = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`^[0-9a-f]{12}$`)
})

func newID() (string, error) {
	var b [6]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	return hex.EncodeToString(b[:]), nil
}

// defaultRoot is $XDG_DATA_HOME/terp/sandboxes, falling back to
// ~/.local/share as the XDG base directory specification says, and for root
// without XDG_DATA_HOME SystemDir/sandboxes, since root's home is closed to
// the uids root's sandboxes run as.
func defaultRoot() (string, error) {
	data := os.Getenv("XDG_DATA_HOME")
	if data == "" || !filepath.IsAbs(data) {
		if runsAsRoot() {
			return filepath.Join(SystemDir, "sandboxes"), nil
		}
		home, err := os.UserHomeDir()
		if err != nil {
			return "", fmt.Errorf("local sandbox: no Config.Root and no home directory: %w", err)
		}
		data = filepath.Join(home, ".local", "share")
	}
	return filepath.Join(data, "terp", "sandboxes"), nil
}

// pythonPackages is what the sandbox's Python must be able to import, with
// the Debian packages that provide it.
var pythonPackages = []string{"numpy", "pandas", "matplotlib"}

func pythonFix() string {
	var deb []string
	for _, p := range pythonPackages {
		deb = append(deb, "python3-"+p)
	}
	list := strings.Join(deb, " ")
	return "run `sudo apt-get install python3 " + list + "` (Debian/Ubuntu) or `sudo dnf install python3 " + list + "`"
}

// checkPython makes sure the interpreter exists and lives under /usr, the
// only host tree bound into the sandbox; a pyenv or venv interpreter under
// $HOME would not be visible there.
func checkPython(python string) error {
	if !filepath.IsAbs(python) {
		return &SetupError{
			Problem: fmt.Sprintf("the sandbox Python %q is not an absolute path", python),
			Fix:     "set it to " + DefaultPython,
		}
	}
	if _, err := os.Stat(python); err != nil {
		return &SetupError{
			Problem: fmt.Sprintf("python3 is not installed at %s", python),
			Fix:     pythonFix(),
			Err:     err,
		}
	}
	resolved, err := filepath.EvalSymlinks(python)
	if err != nil {
		return err
	}
	if !hostVisible(python) || !strings.HasPrefix(resolved, "/usr/") {
		return &SetupError{
			Problem: fmt.Sprintf("the sandbox Python %s is outside /usr, which is all the sandbox sees of the host", python),
			Fix:     "use " + DefaultPython + " and " + pythonFix(),
		}
	}
	return nil
}

// SetupError is returned when this machine cannot run local sandboxes. It
// says what is wrong and what the user should do about it.
type SetupError struct {
	Problem string // what is wrong, e.g. "bubblewrap is not installed"
	Fix     string // what to do, e.g. "run `sudo apt-get install bubblewrap`"
	Err     error  // the underlying cause, if any
}

func (e *SetupError) Error() string { return e.Problem + ": " + e.Fix }

func (e *SetupError) Unwrap() error { return e.Err }

// Prune removes the sandboxes under Root that were left running past their
// lifetime, as a terp that was killed leaves them, and returns their ids.
// Paused sandboxes are kept: they belong to conversations that may resume.
func (b *Backend) Prune(ctx context.Context) ([]sandbox.SessionID, error) {
	entries, err := os.ReadDir(b.cfg.Root)
	if err != nil {
		return nil, fmt.Errorf("prune sandboxes: %w", err)
	}
	now := time.Now()
	var removed []sandbox.SessionID
	for _, e := range entries {
		if ctx.Err() != nil {
			return removed, ctx.Err()
		}
		if !e.IsDir() || !idPattern().MatchString(e.Name()) {
			continue
		}
		dir := filepath.Join(b.cfg.Root, e.Name())
		m, err := readMeta(dir)
		if err != nil || !m.expired(now) {
			continue
		}
		b.discard(dir, m)
		removed = append(removed, sandbox.SessionID(m.ID))
	}
	return removed, nil
}
