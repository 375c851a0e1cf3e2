package pod

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/terpdev/terp/internal/sandbox"
	"github.com/terpdev/terp/internal/sandbox/local"
)

var (
	_ sandbox.Backend = (*Backend)(nil)
	_ sandbox.Sandbox = (*Sandbox)(nil)
)

// Config configures the pod backend.
type Config struct {
	// Work is the directory the code knows as /work. In a pod it is
	// sandbox.WorkDir itself (the emptyDir's mount), the default.
	Work string
	// Python is what "python3" and "python" at the start of a command
	// run; local.DefaultPython when empty.
	Python string
	// KillStrays makes Pause and Close kill every process of this uid but
	// the server and its ancestors: right in a pod, which holds nothing
	// else, and wrong anywhere else.
	KillStrays bool
}

// Backend holds the one sandbox a pod serves. It is safe for concurrent
// use.
type Backend struct {
	cfg     Config
	prlimit string

	mu      sync.Mutex
	current *Sandbox // the live or paused sandbox; nil before Create and after Close
}

// New checks that the code would not run as root and that prlimit and
// Python are there.
func New(cfg Config) (*Backend, error) {
	if os.Geteuid() == 0 {
		return nil, errors.New("pod sandbox: refusing to run the code as root; run terp sandbox serve --isolation pod as a non-root uid (the SandboxTemplate's runAsUser: 1000, runAsNonRoot: true)")
	}
	if cfg.Work == "" {
		cfg.Work = sandbox.WorkDir
	}
	if cfg.Python == "" {
		cfg.Python = local.DefaultPython
	}
	if fi, err := os.Stat(cfg.Work); err != nil || !fi.IsDir() {
		return nil, fmt.Errorf("pod sandbox: %s is not a directory: mount a volume there (the SandboxTemplate's emptyDir)", cfg.Work)
	}
	// Close empties Work: it must be the pod's own volume, never a
	// directory of a machine someone works on.
	if mounted, err := mountPoint(cfg.Work); err != nil || !mounted {
		return nil, fmt.Errorf("pod sandbox: %s is not a mount point; pod mode runs only in a pod whose /work is a volume of its own (the SandboxTemplate's emptyDir), since closing a sandbox empties it", cfg.Work)
	}
	if _, err := os.Stat(cfg.Python); err != nil {
		return nil, fmt.Errorf("pod sandbox: no Python at %s: the image needs python3 with numpy, pandas and matplotlib: %w", cfg.Python, err)
	}
	prlimit, err := exec.LookPath("prlimit")
	if err != nil {
		return nil, fmt.Errorf("pod sandbox: prlimit (util-linux) is missing, so commands cannot get their rlimits: %w", err)
	}
	return &Backend{cfg: cfg, prlimit: prlimit}, nil
}

// Create starts the pod's sandbox in /work, which must be empty. A pod
// holds one sandbox: a second Create before Close is refused.
func (b *Backend) Create(ctx context.Context, opt sandbox.Options) (sandbox.Sandbox, error) {
	switch opt.Network.Mode {
	case "", sandbox.NetworkNone:
	default:
		return nil, fmt.Errorf("create sandbox: network %s: in a Kubernetes pod the SandboxTemplate's NetworkPolicy decides egress, and this server cannot enforce another; use --network none and change the policy (docs/kubernetes.md)", opt.Network)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.current != nil {
		return nil, fmt.Errorf("create sandbox: this pod already holds sandbox %s; each conversation claims a pod of its own", b.current.id)
	}
	if entries, err := os.ReadDir(b.cfg.Work); err != nil || len(entries) > 0 {
		return nil, fmt.Errorf("create sandbox: %s holds files of an earlier sandbox (the container restarted?): this pod cannot take a new one; delete its claim", b.cfg.Work)
	}
	var raw [6]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return nil, err
	}
	fillDefaults(&opt)
	s := &Sandbox{b: b, id: hex.EncodeToString(raw[:]), opt: opt, procs: map[*proc]struct{}{}}
	s.start()
	b.current = s
	return s, nil
}

// Resume reopens the paused sandbox id. Its files are as the code left
// them; its lifetime starts again. Any other id is sandbox.ErrExpired: the
// pod's sandbox was closed, or the container restarted and forgot it.
func (b *Backend) Resume(ctx context.Context, id sandbox.SessionID) (sandbox.Sandbox, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	s := b.current
	if s == nil || s.id != string(id) {
		return nil, fmt.Errorf("resume sandbox %s: not in this pod: %w", id, sandbox.ErrExpired)
	}
	s.mu.Lock()
	st := s.state
	s.mu.Unlock()
	if st != sandbox.Paused {
		return nil, fmt.Errorf("resume sandbox %s: it is not paused", id)
	}
	again := &Sandbox{b: b, id: s.id, opt: s.opt, procs: map[*proc]struct{}{}}
	again.start()
	b.current = again
	return again, nil
}

// fillDefaults gives opt the local backend's defaults.
func fillDefaults(opt *sandbox.Options) {
	if opt.Timeout <= 0 {
		opt.Timeout = local.DefaultTimeout
	}
	l := &opt.Limits
	if l.MemoryBytes <= 0 {
		l.MemoryBytes = local.DefaultMemoryBytes
	}
	if l.Processes <= 0 {
		l.Processes = local.DefaultProcesses
	}
	if l.FileSizeBytes <= 0 {
		l.FileSizeBytes = local.DefaultFileSizeBytes
	}
	if l.WorkBytes <= 0 {
		l.WorkBytes = local.DefaultWorkBytes
	}
}

// emptyDir removes everything inside dir, keeping dir (a mount point).
func emptyDir(dir string) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	var errs []error
	for _, e := range entries {
		errs = append(errs, os.RemoveAll(filepath.Join(dir, e.Name())))
	}
	return errors.Join(errs...)
}

// Sandbox is the pod's sandbox, from Create or Resume to Pause or Close.
type Sandbox struct {
	b        *Backend
	id       string
	opt      sandbox.Options
	deadline time.Time
	watch    *sandbox.WorkWatch

	mu    sync.Mutex
	state sandbox.State
	procs map[*proc]struct{}
}

func (s *Sandbox) start() {
	s.deadline = time.Now().Add(s.opt.Timeout)
	s.watch = &sandbox.WorkWatch{
		Limit:       s.opt.Limits.WorkBytes,
		MinInterval: 100 * time.Millisecond,
		MaxInterval: 5 * time.Second,
		Measure:     func() int64 { return sandbox.WorkUsage(s.b.cfg.Work) },
		Running: func() bool {
			s.mu.Lock()
			defer s.mu.Unlock()
			return len(s.procs) > 0 && s.state == sandbox.Running
		},
		Stop: func(why string) {
			for _, p := range s.running() {
				p.stopFor(why)
			}
		},
	}
}

// ID names the sandbox for Resume.
func (s *Sandbox) ID() sandbox.SessionID { return sandbox.SessionID(s.id) }

func (s *Sandbox) files() (sandbox.WorkFiles, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.state == sandbox.Closed {
		return sandbox.WorkFiles{}, fmt.Errorf("sandbox %s is closed", s.id)
	}
	return sandbox.WorkFiles{Dir: s.b.cfg.Work}, nil
}

func (s *Sandbox) running() []*proc {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]*proc, 0, len(s.procs))
	for p := range s.procs {
		out = append(out, p)
	}
	return out
}

// stop ends every command and moves the sandbox to st.
func (s *Sandbox) stop(st sandbox.State) bool {
	s.mu.Lock()
	if s.state == sandbox.Closed || (s.state == st) {
		s.mu.Unlock()
		return false
	}
	s.state = st
	procs := make([]*proc, 0, len(s.procs))
	for p := range s.procs {
		procs = append(procs, p)
	}
	s.mu.Unlock()
	for _, p := range procs {
		p.kill(killStopped)
	}
	if s.b.cfg.KillStrays {
		killStrays()
	}
	return true
}

// Pause stops the sandbox's processes and keeps /work; Resume with the
// returned id goes on with its files.
func (s *Sandbox) Pause(ctx context.Context) (sandbox.SessionID, error) {
	s.mu.Lock()
	st := s.state
	s.mu.Unlock()
	if st == sandbox.Closed {
		return "", fmt.Errorf("pause sandbox %s: it is closed", s.id)
	}
	s.stop(sandbox.Paused)
	return s.ID(), nil
}

// Close stops everything and empties /work; the pod can then take another
// sandbox, though the Kubernetes backend deletes its claim instead.
func (s *Sandbox) Close(ctx context.Context) error {
	if !s.stop(sandbox.Closed) {
		return nil
	}
	s.b.mu.Lock()
	if s.b.current != nil && s.b.current.id == s.id {
		s.b.current = nil
	}
	s.b.mu.Unlock()
	return emptyDir(s.b.cfg.Work)
}

// killStrays kills every process of this uid that is neither this process
// nor one of its ancestors: what the code left behind, setsid'd or not.
func killStrays() {
	keep := map[int]bool{}
	for pid := os.Getpid(); pid > 1; {
		keep[pid] = true
		pid = parentOf(pid)
	}
	keep[1] = true
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return
	}
	uid := os.Getuid()
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || keep[pid] {
			continue
		}
		fi, err := os.Stat("/proc/" + e.Name())
		if err != nil {
			continue
		}
		if st, ok := fi.Sys().(*syscall.Stat_t); ok && int(st.Uid) == uid {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}

// parentOf reads pid's parent from /proc; 0 when it cannot.
func parentOf(pid int) int {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	// The command name may hold spaces and parentheses: fields start after
	// the last ')'.
	i := strings.LastIndexByte(string(data), ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(string(data[i+1:]))
	if len(f) < 2 {
		return 0
	}
	ppid, _ := strconv.Atoi(f[1])
	return ppid
}

// mountPoint reports whether dir is where a filesystem is mounted.
func mountPoint(dir string) (bool, error) {
	data, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return false, err
	}
	for line := range strings.SplitSeq(string(data), "\n") {
		// The fifth field is the mount point, with spaces as \040.
		if f := strings.Fields(line); len(f) > 4 && f[4] == filepath.Clean(dir) {
			return true, nil
		}
	}
	return false, nil
}
