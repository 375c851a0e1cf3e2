package docker

import (
	"context"
	"crypto/rand"
	_ "embed"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/terpdev/terp/internal/egress"
	"github.com/terpdev/terp/internal/sandbox"
)

var (
	_ sandbox.Backend = (*Backend)(nil)
	_ sandbox.Pruner  = (*Backend)(nil)
	_ sandbox.Sandbox = (*Sandbox)(nil)
)

// Defaults for what Config and sandbox.Options leave at zero. They match the
// local backend's, so a conversation behaves the same on either.
const (
	DefaultImage         = "python:3.12-slim"
	DefaultUser          = "1000:1000"
	DefaultCPUs          = 2.0
	DefaultTimeout       = 30 * time.Minute
	DefaultMemoryBytes   = 2 << 30
	DefaultProcesses     = 256
	DefaultFileSizeBytes = 1 << 30
	DefaultWorkBytes     = 4 << 30
)

// Labels terp puts on its containers and volumes, so that Resume and Prune
// find them on a Docker host that runs other things too.
const (
	labelID       = "dev.terp.sandbox"  // the sandbox id
	labelTimeout  = "dev.terp.timeout"  // the lifetime, as a Go duration
	labelWork     = "dev.terp.work"     // Limits.WorkBytes, in bytes
	labelDeadline = "dev.terp.deadline" // the first deadline, RFC 3339
)

// Config configures the Docker backend.
type Config struct {
	// Image is the image every sandbox runs. It needs python3 with numpy,
	// pandas and matplotlib (see the README for a Dockerfile). Empty means
	// DefaultImage.
	Image string
	// User runs the code, as numeric UID:GID, so that no passwd entry is
	// needed in the image. Empty means DefaultUser.
	User string
	// CPUs is how many CPUs a sandbox may use; it is capped at what the
	// daemon's machine has. Zero means DefaultCPUs.
	CPUs float64
	// EgressDir holds one directory per sandbox in the allowlist network
	// mode, with the proxy's socket, bound into its container. Empty means
	// terp's directory in the user's cache directory.
	EgressDir string
	// EgressOptions are passed to the allowlist mode's proxy: the address
	// ranges the operator trusts (network_trusted_ranges), and in tests a
	// loopback server standing in for a public host.
	EgressOptions []egress.Option
}

// Backend creates one long-lived container per sandbox on a Docker host. It
// is safe for concurrent use.
type Backend struct {
	cfg      Config
	eng      *engine
	uid, gid int

	checkMu   sync.Mutex
	prepared  bool // the daemon answers and has the image
	libraries bool // the image's Python has the libraries
	ncpu      int
	remapped  bool // the daemon runs containers in user namespaces (userns-remap)
}

// New builds the client from the environment (DOCKER_HOST, DOCKER_CERT_PATH,
// DOCKER_TLS_VERIFY, DOCKER_API_VERSION; see engine.go) and validates cfg.
// It does not talk to the daemon: Check does, and Create calls it once.
func New(cfg Config) (*Backend, error) {
	if cfg.Image == "" {
		cfg.Image = DefaultImage
	}
	if cfg.User == "" {
		cfg.User = DefaultUser
	}
	if cfg.CPUs <= 0 {
		cfg.CPUs = DefaultCPUs
	}
	uid, gid, err := parseUser(cfg.User)
	if err != nil {
		return nil, err
	}
	ec := engineConfigFromEnv()
	if strings.HasPrefix(ec.Host, "ssh://") {
		// The docker command runs ssh itself for these; terp speaks to
		// unix and tcp sockets only.
		return nil, &SetupError{
			Problem: "terp cannot use DOCKER_HOST=" + ec.Host + " directly: it reaches the Docker daemon through a unix or tcp socket, not ssh",
			Fix:     "forward the remote socket, e.g. `ssh -nNT -L /tmp/docker.sock:/var/run/docker.sock " + strings.TrimPrefix(ec.Host, "ssh://") + "` and DOCKER_HOST=unix:///tmp/docker.sock, or use tcp:// with DOCKER_TLS_VERIFY",
		}
	}
	// The API version is negotiated on the first request (a 20.10 daemon
	// speaks 1.41).
	eng, err := newEngine(ec)
	if err != nil {
		return nil, &SetupError{
			Problem: "the Docker client cannot be configured from the environment",
			Fix:     "check DOCKER_HOST (e.g. unix:///var/run/docker.sock or tcp://host:2376), DOCKER_CERT_PATH and DOCKER_API_VERSION",
			Err:     err,
		}
	}
	if cfg.EgressDir == "" {
		cache, err := os.UserCacheDir()
		if err != nil {
			cache = os.TempDir()
		}
		cfg.EgressDir = filepath.Join(cache, "terp", "egress")
	}
	return &Backend{cfg: cfg, eng: eng, uid: uid, gid: gid}, nil
}

// keepAliveUser is the unprivileged user the container's own processes run
// as: nobody, or one below it when the code itself runs as nobody.
func keepAliveUser(codeUID int) string {
	if codeUID == 65534 {
		return "65533:65533"
	}
	return "65534:65534"
}

// parseUser reads a numeric UID[:GID].
func parseUser(user string) (uid, gid int, err error) {
	u, g, hasGroup := strings.Cut(user, ":")
	uid, err = strconv.Atoi(u)
	if err == nil && hasGroup {
		gid, err = strconv.Atoi(g)
	} else {
		gid = uid
	}
	if err != nil || uid < 0 || gid < 0 {
		return 0, 0, fmt.Errorf("docker sandbox: user %q is not a numeric UID:GID such as %s", user, DefaultUser)
	}
	if uid == 0 || gid == 0 {
		// Without the daemon's userns-remap, the container's root is the
		// host's: /proc/sys is read-only there, but the rest of what stands
		// between the code and the host would be one bug away.
		return 0, 0, fmt.Errorf("docker sandbox: user %q is root; the code never runs as root, use an unprivileged one such as %s", user, DefaultUser)
	}
	return uid, gid, nil
}

// HostUsers says, for `terp doctor`, which host uid the code runs as. It
// is meaningful once Check has run.
func (b *Backend) HostUsers() string {
	b.checkMu.Lock()
	defer b.checkMu.Unlock()
	if b.remapped {
		return fmt.Sprintf("uid %d in the container, an unprivileged host uid through the daemon's userns-remap", b.uid)
	}
	return fmt.Sprintf("host uid %d (the daemon does not remap uids; never root)", b.uid)
}

// Image is the image sandboxes run.
func (b *Backend) Image() string { return b.cfg.Image }

// Host is the daemon's address, from DOCKER_HOST or the default socket.
func (b *Backend) Host() string { return b.eng.Host() }

// Daemon describes the Docker daemon terp talks to.
type Daemon struct {
	Version    string // the engine's, e.g. "20.10.24+dfsg1"
	APIVersion string // negotiated, e.g. "1.41"
	Host       string
}

// Ping reaches the daemon and negotiates the API version. Its error is a
// *SetupError saying how to start or point at a daemon.
func (b *Backend) Ping(ctx context.Context) (Daemon, error) {
	d := Daemon{Host: b.Host()}
	if err := b.eng.Ping(ctx); err != nil {
		return d, &SetupError{
			Problem: "cannot reach the Docker daemon at " + d.Host,
			Fix:     "start it (sudo systemctl start docker, or dockerd as root), or set DOCKER_HOST to a daemon you can reach (unix:///path/to/docker.sock, or tcp://host:2376 with DOCKER_TLS_VERIFY=1); your user needs access to its socket (the docker group)",
			Err:     err,
		}
	}
	v, err := b.eng.Version(ctx)
	if err != nil {
		return d, fmt.Errorf("docker version: %w", err)
	}
	d.Version, d.APIVersion = v.Version, b.eng.APIVersion()
	return d, nil
}

// InspectImage makes sure the image is on the Docker host. Its error for a
// missing image is a *SetupError saying how to get one.
func (b *Backend) InspectImage(ctx context.Context) error {
	err := b.eng.ImageInspect(ctx, b.cfg.Image)
	if isNotFound(err) {
		return &SetupError{
			Problem: fmt.Sprintf("the image %s is not on the Docker host", b.cfg.Image),
			Fix:     imageFix(b.cfg.Image),
			Err:     err,
		}
	}
	if err != nil {
		return fmt.Errorf("inspect image %s: %w", b.cfg.Image, err)
	}
	return nil
}

// imageFix says how to get an image with the libraries the model expects.
func imageFix(image string) string {
	return fmt.Sprintf("build one with numpy, pandas and matplotlib: a Dockerfile with `FROM python:3.12-slim` and "+
		"`RUN pip install numpy pandas matplotlib`, then `docker build -t terp-python .` and --docker-image terp-python "+
		"(or docker_image in the config file); without a registry, `make docker-test-image` builds terp-python:debian12 "+
		"from Debian's packages (the image now configured is %s)", image)
}

// pythonPackages are what the image's python3 must import.
var pythonPackages = []string{"numpy", "pandas", "matplotlib"}

// Check reaches the daemon, finds the image and runs python3 in a
// throwaway sandbox to make sure numpy, pandas and matplotlib import.
// `terp doctor` calls it; Create does the same checks once per Backend, the
// last one in the sandbox it creates rather than in one more container.
func (b *Backend) Check(ctx context.Context) error {
	if err := b.prepare(ctx); err != nil {
		return err
	}
	if b.librariesChecked() {
		return nil
	}
	s, err := b.create(ctx, sandbox.Options{Timeout: 5 * time.Minute})
	if err != nil {
		return err
	}
	defer func() { _ = s.Close(context.WithoutCancel(ctx)) }()
	return b.checkLibraries(ctx, s)
}

// prepare reaches the daemon and finds the image, once per Backend.
func (b *Backend) prepare(ctx context.Context) error {
	b.checkMu.Lock()
	defer b.checkMu.Unlock()
	if b.prepared {
		return nil
	}
	if _, err := b.Ping(ctx); err != nil {
		return err
	}
	if err := b.InspectImage(ctx); err != nil {
		return err
	}
	info, err := b.eng.Info(ctx)
	if err != nil {
		return fmt.Errorf("docker info: %w", err)
	}
	b.ncpu = info.NCPU
	b.remapped = slices.ContainsFunc(info.SecurityOptions, func(o string) bool { return strings.Contains(o, "name=userns") })
	b.prepared = true
	return nil
}

func (b *Backend) librariesChecked() bool {
	b.checkMu.Lock()
	defer b.checkMu.Unlock()
	return b.libraries
}

// checkLibraries makes sure the image's python3 finds numpy, pandas and
// matplotlib (without importing them, which would take a second).
func (b *Backend) checkLibraries(ctx context.Context, s *Sandbox) error {
	script := "import importlib.util, sys\n" +
		"missing = [m for m in sys.argv[1:] if importlib.util.find_spec(m) is None]\n" +
		"print(' '.join(missing))\n"
	res, err := s.Exec(ctx, append([]string{"python3", "-c", script}, pythonPackages...), sandbox.ExecOptions{Timeout: 2 * time.Minute})
	if err != nil {
		return fmt.Errorf("run python3 in %s: %w", b.cfg.Image, err)
	}
	out := strings.TrimSpace(res.Stdout + res.Stderr)
	switch {
	case res.ExitCode == 127 || strings.Contains(out, "executable file not found"):
		return &SetupError{Problem: fmt.Sprintf("the image %s has no python3", b.cfg.Image), Fix: imageFix(b.cfg.Image)}
	case res.ExitCode != 0:
		return &SetupError{
			Problem: fmt.Sprintf("python3 in %s fails (exit %d): %s", b.cfg.Image, res.ExitCode, out),
			Fix:     imageFix(b.cfg.Image),
		}
	case strings.TrimSpace(res.Stdout) != "":
		return &SetupError{
			Problem: fmt.Sprintf("the image %s lacks the Python libraries %s", b.cfg.Image, strings.TrimSpace(res.Stdout)),
			Fix:     imageFix(b.cfg.Image),
		}
	}
	b.checkMu.Lock()
	b.libraries = true
	b.checkMu.Unlock()
	return nil
}

// Create starts a new container and its /work volume. Zero fields of opt get
// the defaults above: a 30 minute lifetime, 2 GiB of memory (swap
// included), 256 processes and 1 GiB files. The first Create of a Backend
// also checks the image's Python libraries, and fails with a *SetupError
// saying how to build a suitable image.
func (b *Backend) Create(ctx context.Context, opt sandbox.Options) (sandbox.Sandbox, error) {
	if err := b.checkNetwork(opt.Network); err != nil {
		return nil, err
	}
	if err := b.prepare(ctx); err != nil {
		return nil, err
	}
	s, err := b.create(ctx, opt)
	if err != nil {
		return nil, err
	}
	if !b.librariesChecked() {
		if err := b.checkLibraries(ctx, s); err != nil {
			_ = s.Close(context.WithoutCancel(ctx))
			return nil, err
		}
	}
	return s, nil
}

func (b *Backend) create(ctx context.Context, opt sandbox.Options) (*Sandbox, error) {
	if opt.Timeout <= 0 {
		opt.Timeout = DefaultTimeout
	}
	l := opt.Limits
	if l.MemoryBytes <= 0 {
		l.MemoryBytes = DefaultMemoryBytes
	}
	if l.Processes <= 0 {
		l.Processes = DefaultProcesses
	}
	if l.FileSizeBytes <= 0 {
		l.FileSizeBytes = DefaultFileSizeBytes
	}
	if l.WorkBytes <= 0 {
		l.WorkBytes = DefaultWorkBytes
	}
	id, err := newID()
	if err != nil {
		return nil, err
	}
	now := time.Now().UTC()
	deadline := now.Add(opt.Timeout)
	labels := map[string]string{
		labelID:       id,
		labelTimeout:  opt.Timeout.String(),
		labelDeadline: deadline.Format(time.RFC3339),
		labelWork:     strconv.FormatInt(l.WorkBytes, 10),
	}
	networkLabels(labels, opt.Network)
	vol := volumeName(id)
	if err := b.eng.VolumeCreate(ctx, vol, labels); err != nil {
		return nil, fmt.Errorf("create sandbox volume: %w", err)
	}
	var proxy *egress.Socket
	cleanup := func(cid string) {
		ctx := context.WithoutCancel(ctx)
		if cid != "" {
			_ = b.eng.ContainerRemove(ctx, cid)
		}
		_ = b.eng.VolumeRemove(ctx, vol, true)
		proxy.Close()
		_ = b.removeEgressDir(id)
	}
	// Built here, never taken from terp's environment. The image's own
	// (PATH, LANG, PYTHON_VERSION) stays.
	env := []string{
		"HOME=/tmp",
		"MPLBACKEND=Agg",
		"PYTHONUNBUFFERED=1",
		"LC_ALL=C.UTF-8",
	}
	// The volume is mounted twice, at /work and at /mnt/data (the name
	// notebook-trained models use): one directory, which the code can
	// neither unmount nor replace under a read-only root.
	var mounts []mount
	for _, target := range []string{sandbox.WorkDir, sandbox.DataDir} {
		mounts = append(mounts, mount{
			Type:          "volume",
			Source:        vol,
			Target:        target,
			VolumeOptions: &volumeOptions{NoCopy: true},
		})
	}
	if opt.Network.Mode == sandbox.NetworkAllowlist {
		if proxy, err = b.startEgress(id, opt.Network.Allow); err != nil {
			cleanup("")
			return nil, err
		}
		for _, kv := range egress.Env() {
			env = append(env, kv[0]+"="+kv[1])
		}
		mounts = append(mounts, b.egressMount(id))
	}

	cpus := b.cfg.CPUs
	if b.ncpu > 0 {
		cpus = min(cpus, float64(b.ncpu))
	}
	networkMode := "none"
	if opt.Network.Mode == sandbox.NetworkFull {
		networkMode = "" // the daemon's default network
	}
	profile, err := seccompProfile()
	if err != nil {
		cleanup("")
		return nil, fmt.Errorf("docker sandbox: seccomp profile: %w", err)
	}
	cid, err := b.eng.ContainerCreate(ctx, containerName(id, deadline), containerCreate{
		Image: b.cfg.Image,
		// docker-init and the keep-alive run as a user the code is not:
		// code that kills (or ptraces) every process it can would
		// otherwise stop the container with them, and lose the
		// conversation's sandbox. Commands are execs that name
		// b.cfg.User themselves.
		User:       keepAliveUser(b.uid),
		Hostname:   "terp",
		WorkingDir: sandbox.WorkDir,
		// The container only has to stay up: every command is an exec.
		Entrypoint: []string{"sleep"},
		Cmd:        []string{"infinity"},
		Env:        env,
		Labels:     labels,
		HostConfig: hostConfig{
			NetworkMode: networkMode,
			Mounts:      mounts,
			// The image stays as built; the code writes to /work (a volume,
			// which docker cp reaches, unlike a tmpfs) and /tmp. /tmp lives
			// as long as the container and its pages count against the
			// memory limit, so it gets half of it: a /tmp the code filled
			// leaves room for the Python worker that must clean it up.
			ReadonlyRootfs: true,
			Tmpfs:          map[string]string{"/tmp": "rw,nosuid,nodev,exec,size=" + strconv.FormatInt(l.MemoryBytes/2, 10)},
			CapDrop:        []string{"ALL"},
			SecurityOpt:    []string{"no-new-privileges", "seccomp=" + profile},
			Init:           true,
			LogConfig:      logConfig{Type: "none"},
			Memory:         l.MemoryBytes,
			MemorySwap:     l.MemoryBytes, // no swap beyond the memory limit
			PidsLimit:      int64(l.Processes),
			NanoCPUs:       int64(cpus * 1e9),
			Ulimits:        []ulimit{{Name: "fsize", Soft: l.FileSizeBytes, Hard: l.FileSizeBytes}},
		},
	})
	if err != nil {
		cleanup("")
		if isNotFound(err) {
			return nil, &SetupError{Problem: fmt.Sprintf("the image %s is not on the Docker host", b.cfg.Image), Fix: imageFix(b.cfg.Image), Err: err}
		}
		return nil, fmt.Errorf("create sandbox container: %w", err)
	}
	if err := b.eng.ContainerStart(ctx, cid); err != nil {
		cleanup(cid)
		return nil, fmt.Errorf("start sandbox container: %w", err)
	}
	s := b.newSandbox(id, cid, opt.Timeout, deadline, l.WorkBytes)
	s.egress = proxy
	// A new volume's root belongs to root. The code runs as b.cfg.User,
	// and root without capabilities cannot chown, but as the owner it can
	// open the directory up.
	if err := s.rootExec(ctx, "chmod", "0777", sandbox.WorkDir); err != nil {
		cleanup(cid)
		return nil, fmt.Errorf("prepare %s: %w", sandbox.WorkDir, err)
	}
	return s, nil
}

// Resume finds the sandbox's container, unpauses it and kills whatever a
// terp that died left running in it. Its files are as the code left them;
// its lifetime starts again from now. A sandbox whose container or volume is
// gone, or that was left running past its lifetime, returns an error
// wrapping sandbox.ErrExpired (the latter is removed).
func (b *Backend) Resume(ctx context.Context, id sandbox.SessionID) (sandbox.Sandbox, error) {
	if !idPattern().MatchString(string(id)) {
		return nil, fmt.Errorf("resume sandbox %q: not a docker sandbox id: %w", id, sandbox.ErrExpired)
	}
	c, err := b.find(ctx, string(id))
	if err != nil {
		return nil, fmt.Errorf("resume sandbox %s: %w", id, err)
	}
	timeout, _ := time.ParseDuration(c.Labels[labelTimeout])
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	if err := b.eng.VolumeInspect(ctx, volumeName(string(id))); isNotFound(err) {
		_ = b.remove(ctx, c.ID, string(id))
		return nil, fmt.Errorf("resume sandbox %s: its volume is gone: %w", id, sandbox.ErrExpired)
	}
	switch c.State {
	case statePaused:
		if err := b.unpause(ctx, c.ID); err != nil {
			return nil, fmt.Errorf("resume sandbox %s: %w", id, err)
		}
	case stateRunning:
		if expired(c, time.Now()) {
			_ = b.remove(ctx, c.ID, string(id))
			return nil, fmt.Errorf("resume sandbox %s: its %s lifetime ended while it was not paused: %w", id, timeout, sandbox.ErrExpired)
		}
	default:
		// Stopped, e.g. by a daemon restart: the volume still has the files.
		if err := b.eng.ContainerStart(ctx, c.ID); err != nil {
			return nil, fmt.Errorf("resume sandbox %s: restart its container: %w", id, err)
		}
	}
	deadline := time.Now().UTC().Add(timeout)
	// The deadline lives in the container's name, the one thing about a
	// container that can change, so that Prune sees the renewed lifetime.
	if name := containerName(string(id), deadline); !slices.Contains(c.Names, "/"+name) {
		if err := b.eng.ContainerRename(ctx, c.ID, name); err != nil {
			return nil, fmt.Errorf("resume sandbox %s: %w", id, err)
		}
	}
	work, _ := strconv.ParseInt(c.Labels[labelWork], 10, 64)
	if work <= 0 {
		work = DefaultWorkBytes // a container made before the label existed
	}
	s := b.newSandbox(string(id), c.ID, timeout, deadline, work)
	for attempt := 0; ; attempt++ {
		err := s.signalAll(ctx, 9)
		if err == nil {
			break
		}
		// The late pause event described at unpause.
		if attempt == 3 || !strings.Contains(err.Error(), "is paused") {
			return nil, fmt.Errorf("resume sandbox %s: %w", id, err)
		}
		if err := b.unpause(ctx, c.ID); err != nil {
			return nil, fmt.Errorf("resume sandbox %s: %w", id, err)
		}
	}
	if allow, ok := labeledAllowlist(c.Labels); ok {
		if s.egress, err = b.startEgress(string(id), allow); err != nil {
			return nil, fmt.Errorf("resume sandbox %s: %w", id, err)
		}
	}
	return s, nil
}

// unpause unfreezes a container and waits until the daemon agrees it runs.
// A 20.10 daemon records a pause both when asked and when containerd's
// event arrives; an event that comes after an unpause marks the running
// container paused again, and execs are then refused. Unpausing once more
// clears it.
func (b *Backend) unpause(ctx context.Context, containerID string) error {
	for attempt := 0; ; attempt++ {
		err := b.eng.ContainerUnpause(ctx, containerID)
		if err != nil && attempt == 0 {
			return err
		}
		for range 5 {
			paused, err := b.eng.ContainerPaused(ctx, containerID)
			if err != nil {
				return err
			}
			if !paused {
				return nil
			}
			select {
			case <-time.After(20 * time.Millisecond):
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		if attempt == 5 {
			return fmt.Errorf("container %.12s stays paused after unpause", containerID)
		}
	}
}

// find returns the container of sandbox id, or an error wrapping
// sandbox.ErrExpired when there is none.
func (b *Backend) find(ctx context.Context, id string) (containerSummary, error) {
	list, err := b.eng.ContainerList(ctx, labelID+"="+id)
	if err != nil {
		return containerSummary{}, err
	}
	if len(list) == 0 {
		return containerSummary{}, sandbox.ErrExpired
	}
	return list[0], nil
}

// remove deletes a sandbox's container and volume, as far as they exist.
func (b *Backend) remove(ctx context.Context, containerID, id string) error {
	var errs []error
	if containerID != "" {
		if err := b.eng.ContainerRemove(ctx, containerID); err != nil && !isNotFound(err) {
			errs = append(errs, err)
		}
	}
	if err := b.eng.VolumeRemove(ctx, volumeName(id), true); err != nil && !isNotFound(err) {
		errs = append(errs, err)
	}
	if err := b.removeEgressDir(id); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// Prune removes the sandboxes left running past their lifetime, as a terp
// that was killed leaves them, and returns their ids. Paused sandboxes are
// kept: they belong to conversations that may resume. Volumes whose
// container is gone are removed once their lifetime is over.
func (b *Backend) Prune(ctx context.Context) ([]sandbox.SessionID, error) {
	list, err := b.eng.ContainerList(ctx, labelID)
	if err != nil {
		return nil, fmt.Errorf("prune sandboxes: %w", err)
	}
	now := time.Now()
	var removed []sandbox.SessionID
	var errs []error
	have := map[string]bool{}
	for _, c := range list {
		id := c.Labels[labelID]
		have[id] = true
		if c.State == statePaused || !expired(c, now) {
			continue
		}
		if err := b.remove(ctx, c.ID, id); err != nil {
			errs = append(errs, err)
			continue
		}
		removed = append(removed, sandbox.SessionID(id))
	}
	vols, err := b.eng.VolumeList(ctx, labelID)
	if err != nil {
		return removed, errors.Join(append(errs, err)...)
	}
	for _, v := range vols {
		id := v.Labels[labelID]
		deadline, err := time.Parse(time.RFC3339, v.Labels[labelDeadline])
		if have[id] || err != nil || now.Before(deadline) {
			continue
		}
		if err := b.eng.VolumeRemove(ctx, v.Name, false); err == nil {
			removed = append(removed, sandbox.SessionID(id))
		}
	}
	return removed, errors.Join(errs...)
}

// expired reports whether a container is past the deadline its name holds
// (or, failing that, its label).
func expired(c containerSummary, now time.Time) bool {
	var deadline time.Time
	for _, n := range c.Names {
		if m := namePattern().FindStringSubmatch(strings.TrimPrefix(n, "/")); m != nil {
			sec, _ := strconv.ParseInt(m[2], 10, 64)
			deadline = time.Unix(sec, 0)
		}
	}
	if deadline.IsZero() {
		var err error
		if deadline, err = time.Parse(time.RFC3339, c.Labels[labelDeadline]); err != nil {
			return false
		}
	}
	return now.After(deadline)
}

// idPattern is what newID makes; namePattern is a container's name, which
// carries the sandbox's current deadline in Unix seconds.
var (
	idPattern   = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[0-9a-f]{12}$`) })
	namePattern = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^terp-([0-9a-f]{12})-(\d+)$`) })
)

func containerName(id string, deadline time.Time) string {
	return fmt.Sprintf("terp-%s-%d", id, deadline.Unix())
}

func volumeName(id string) string { return "terp-" + id }

func newID() (string, error) {
	var b [6]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	return hex.EncodeToString(b[:]), nil
}

// SetupError is returned when the Docker host cannot run terp's sandboxes.
// It says what is wrong and what the user should do about it.
type SetupError struct {
	Problem string // what is wrong, e.g. "cannot reach the Docker daemon"
	Fix     string // what to do, e.g. "start it"
	Err     error  // the underlying cause, if any
}

func (e *SetupError) Error() string { return e.Problem + ": " + e.Fix }

func (e *SetupError) Unwrap() error { return e.Err }
