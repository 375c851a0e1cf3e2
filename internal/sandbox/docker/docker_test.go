package docker

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"

	"github.com/terpdev/terp/internal/egress/egresstest"
	"github.com/terpdev/terp/internal/kernel"
	"github.com/terpdev/terp/internal/sandbox"
	"github.com/terpdev/terp/internal/terptest"
)

func run(t *testing.T, s *Sandbox, script string, opt sandbox.ExecOptions) sandbox.ExecResult {
	t.Helper()
	res, err := s.Exec(testCtx(t), []string{"sh", "-c", script}, opt)
	if err != nil {
		t.Fatalf("Exec %q: %v", script, err)
	}
	return res
}

func inspect(t *testing.T, s *Sandbox) container.InspectResponse {
	t.Helper()
	res, err := peer(t).ContainerInspect(testCtx(t), s.containerID, client.ContainerInspectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return res.Container
}

func TestAPIVersionNegotiated(t *testing.T) {
	b := newBackend(t)
	d, err := b.Ping(testCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("daemon %s at %s, API %s (terp speaks %s to %s)", d.Version, d.Host, d.APIVersion, minAPIVersion, maxAPIVersion)
	v, err := peer(t).ServerVersion(testCtx(t), client.ServerVersionOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want := maxAPIVersion
	if olderAPI(v.APIVersion, maxAPIVersion) {
		want = v.APIVersion
	}
	if os.Getenv("DOCKER_API_VERSION") == "" && d.APIVersion != want {
		t.Errorf("negotiated API %q, the daemon speaks up to %s and terp up to %s", d.APIVersion, v.APIVersion, maxAPIVersion)
	}
}

// TestLimitsApplied checks both what the daemon was told and what the code
// inside feels.
func TestLimitsApplied(t *testing.T) {
	b := newBackend(t)
	lim := sandbox.Limits{MemoryBytes: 256 << 20, Processes: 64, FileSizeBytes: 8 << 20}
	s := create(t, b, sandbox.Options{Timeout: 10 * time.Minute, Limits: lim})
	c := inspect(t, s)
	hc := c.HostConfig
	if hc.Memory != lim.MemoryBytes || hc.MemorySwap != lim.MemoryBytes {
		t.Errorf("Memory %d MemorySwap %d, want both %d", hc.Memory, hc.MemorySwap, lim.MemoryBytes)
	}
	if hc.PidsLimit == nil || *hc.PidsLimit != int64(lim.Processes) {
		t.Errorf("PidsLimit %v, want %d", hc.PidsLimit, lim.Processes)
	}
	if hc.NanoCPUs <= 0 || hc.NanoCPUs > int64(DefaultCPUs*1e9) {
		t.Errorf("NanoCPUs %d, want a limit of at most %v CPUs", hc.NanoCPUs, DefaultCPUs)
	}
	if !slices.Equal(hc.CapDrop, []string{"ALL"}) || !slices.Contains(hc.SecurityOpt, "no-new-privileges") {
		t.Errorf("CapDrop %v SecurityOpt %v", hc.CapDrop, hc.SecurityOpt)
	}
	if hc.Init == nil || !*hc.Init || hc.NetworkMode != "none" || !hc.ReadonlyRootfs {
		t.Errorf("Init %v NetworkMode %q ReadonlyRootfs %v", hc.Init, hc.NetworkMode, hc.ReadonlyRootfs)
	}
	if len(hc.Ulimits) != 1 || hc.Ulimits[0].Name != "fsize" || hc.Ulimits[0].Hard != lim.FileSizeBytes {
		t.Errorf("Ulimits %v, want fsize %d", hc.Ulimits, lim.FileSizeBytes)
	}
	// The container's own processes run as nobody, out of the code's reach.
	if c.Config.User != "65534:65534" || c.Config.Labels[labelID] != s.id {
		t.Errorf("User %q labels %v", c.Config.User, c.Config.Labels)
	}

	// Inside: a non-root user without capabilities who cannot gain any.
	res := run(t, s, "id -u; grep -E '^(CapEff|NoNewPrivs)' /proc/self/status", sandbox.ExecOptions{})
	want := "1000\nCapEff:\t0000000000000000\nNoNewPrivs:\t1\n"
	if res.Stdout != want {
		t.Errorf("identity:\n%s\nwant:\n%s", res.Stdout, want)
	}
	// A file past the size limit stops its writer.
	res = run(t, s, "head -c 16000000 /dev/zero > /work/big; echo $?; wc -c < /work/big", sandbox.ExecOptions{})
	if f := strings.Fields(res.Stdout); len(f) != 2 || f[0] == "0" || f[1] != "8388608" {
		t.Errorf("writing 16 MB with an 8 MiB limit: %q %q", res.Stdout, res.Stderr)
	}
	// Memory beyond the limit (and no swap to spill into) is killed.
	res = run(t, s, "python3 -c 'b = bytearray(600 << 20); print(len(b))'", sandbox.ExecOptions{Timeout: time.Minute})
	if res.ExitCode != 137 {
		t.Errorf("allocating 600 MiB with a 256 MiB limit: exit %d, stdout %q stderr %q", res.ExitCode, res.Stdout, res.Stderr)
	}
	// Processes beyond the pids limit cannot start.
	res = run(t, s, "python3 -c 'import os, time\nn = 0\ntry:\n    for _ in range(200):\n        if os.fork() == 0:\n            time.sleep(30); os._exit(0)\n        n += 1\nexcept OSError:\n    pass\nprint(n)'", sandbox.ExecOptions{Timeout: time.Minute})
	if n := strings.TrimSpace(res.Stdout); n == "" || n == "200" {
		t.Errorf("forking 200 processes with a limit of 64: started %q (%s)", n, res.Stderr)
	}
	// The root is read-only; /tmp and /work are not.
	res = run(t, s, "touch /usr/x 2>/dev/null && echo root-writable; touch /tmp/x /work/x && echo ok", sandbox.ExecOptions{})
	if res.Stdout != "ok\n" {
		t.Errorf("writable places: %q %q", res.Stdout, res.Stderr)
	}
}

// procs lists the command lines of the container's processes.
func procs(t *testing.T, s *Sandbox) string {
	t.Helper()
	res := run(t, s, `for p in /proc/[0-9]*; do tr '\0' ' ' < $p/cmdline; echo; done`, sandbox.ExecOptions{})
	return res.Stdout
}

func TestChildrenGone(t *testing.T) {
	b := newBackend(t)
	s := create(t, b, sandbox.Options{})
	start := time.Now()
	// Children in the background, a grandchild in its own process group,
	// and one that ignores SIGTERM: all die with the command.
	res := run(t, s, "sleep 301 & (trap '' TERM; sleep 302) & python3 -c 'import os, time; os.setpgid(0, 0); time.sleep(303)' & sleep 60",
		sandbox.ExecOptions{Timeout: time.Second})
	if !res.TimedOut || res.ExitCode != sandbox.ExitTimedOut {
		t.Errorf("TimedOut %v exit %d", res.TimedOut, res.ExitCode)
	}
	if d := time.Since(start); d > 15*time.Second {
		t.Errorf("a 1 s timeout took %v", d)
	}
	// A command that exits normally leaves nothing behind either, even
	// a child still holding its stdout.
	res = run(t, s, "sleep 304 & echo started", sandbox.ExecOptions{Timeout: 30 * time.Second})
	if res.Stdout != "started\n" || res.TimedOut {
		t.Errorf("background child: %+v", res)
	}
	if ps := procs(t, s); strings.Contains(ps, "sleep 30") {
		t.Errorf("processes survived their command:\n%s", ps)
	}
}

func TestContextCancelKills(t *testing.T) {
	b := newBackend(t)
	s := create(t, b, sandbox.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_, err := s.Exec(ctx, []string{"sh", "-c", "sleep 305 & sleep 306"}, sandbox.ExecOptions{})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Exec after its context ended: %v", err)
	}
	if ps := procs(t, s); strings.Contains(ps, "sleep 30") {
		t.Errorf("processes survived a canceled command:\n%s", ps)
	}
}

func TestStartSignal(t *testing.T) {
	b := newBackend(t)
	s := create(t, b, sandbox.Options{})
	p, err := s.Start(testCtx(t), []string{"sh", "-c", "trap 'echo got-int; exit 3' INT; sleep 307 & cat; wait"}, sandbox.ExecOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Stdin().Write([]byte("hello\n")); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 6)
	if _, err := readFull(p.Stdout(), buf); err != nil || string(buf) != "hello\n" {
		t.Fatalf("echo through cat: %q %v", buf, err)
	}
	if err := p.Signal(sandbox.SIGKILL); err != nil {
		t.Fatal(err)
	}
	done := make(chan int, 1)
	go func() { code, _ := p.Wait(); done <- code }()
	select {
	case code := <-done:
		if code != 137 {
			t.Errorf("exit %d after SIGKILL, want 137", code)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("Wait did not return after SIGKILL")
	}
	if ps := procs(t, s); strings.Contains(ps, "sleep 307") {
		t.Errorf("a child survived SIGKILL:\n%s", ps)
	}
}

func readFull(r interface{ Read([]byte) (int, error) }, buf []byte) (int, error) {
	n := 0
	for n < len(buf) {
		k, err := r.Read(buf[n:])
		n += k
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

func TestResumeFromFreshBackend(t *testing.T) {
	b := newBackend(t)
	s := create(t, b, sandbox.Options{Timeout: 10 * time.Minute})
	if err := s.WriteFile(testCtx(t), "/work/keep.txt", strings.NewReader("kept")); err != nil {
		t.Fatal(err)
	}
	before := inspect(t, s)
	id, err := s.Pause(testCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	if st := inspect(t, s).State; !st.Paused {
		t.Fatalf("after Pause the container is %s, not paused", st.Status)
	}
	if _, err := s.Exec(testCtx(t), []string{"true"}, sandbox.ExecOptions{}); err == nil {
		t.Error("a paused Sandbox ran a command")
	}

	// A new terp process: a new client, nothing shared.
	b2, err := New(Config{Image: terptest.DockerImage(t)})
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(1100 * time.Millisecond) // the name holds the deadline in seconds
	resumed := time.Now()
	again, err := b2.Resume(testCtx(t), id)
	if err != nil {
		t.Fatalf("Resume: %v", err)
	}
	after := inspect(t, again.(*Sandbox))
	if after.ID != before.ID || !after.State.Running || after.State.Paused {
		t.Errorf("resumed container %s state %+v, want %s running", after.ID, after.State, before.ID)
	}
	// The lifetime starts again, and Prune sees it in the name.
	m := namePattern().FindStringSubmatch(strings.TrimPrefix(after.Name, "/"))
	if m == nil {
		t.Fatalf("the container's name %s holds no deadline", after.Name)
	}
	deadline, _ := strconv.ParseInt(m[2], 10, 64)
	if want := resumed.Add(10 * time.Minute).Unix(); deadline < want || deadline > want+5 {
		t.Errorf("the name %s holds deadline %d, want %d (resume time plus the lifetime; before: %s)", after.Name, deadline, want, before.Name)
	}
	res, err := again.Exec(testCtx(t), []string{"cat", "/work/keep.txt"}, sandbox.ExecOptions{})
	if err != nil || res.Stdout != "kept" {
		t.Errorf("after resume: %q %v", res.Stdout, err)
	}
}

func TestPruneExpired(t *testing.T) {
	b := newBackend(t)
	short := create(t, b, sandbox.Options{Timeout: 2 * time.Second})
	long := create(t, b, sandbox.Options{Timeout: 10 * time.Minute})
	pausedShort := create(t, b, sandbox.Options{Timeout: 2 * time.Second})
	if _, err := pausedShort.Pause(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	time.Sleep(3 * time.Second)

	if _, err := short.Exec(testCtx(t), []string{"true"}, sandbox.ExecOptions{}); !errors.Is(err, sandbox.ErrExpired) {
		t.Errorf("Exec past the lifetime: %v, want ErrExpired", err)
	}
	removed, err := b.Prune(testCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(removed, short.ID()) || slices.Contains(removed, long.ID()) || slices.Contains(removed, pausedShort.ID()) {
		t.Errorf("Prune removed %v; want %s but not %s (alive) or %s (paused)", removed, short.ID(), long.ID(), pausedShort.ID())
	}
	if _, err := peer(t).ContainerInspect(testCtx(t), short.containerID, client.ContainerInspectOptions{}); !cerrdefs.IsNotFound(err) {
		t.Errorf("the expired container is still there: %v", err)
	}
	if _, err := peer(t).VolumeInspect(testCtx(t), volumeName(short.id), client.VolumeInspectOptions{}); !cerrdefs.IsNotFound(err) {
		t.Errorf("the expired volume is still there: %v", err)
	}
	if _, err := b.Resume(testCtx(t), short.ID()); !errors.Is(err, sandbox.ErrExpired) {
		t.Errorf("Resume of a pruned sandbox: %v, want ErrExpired", err)
	}
	// A paused sandbox does not expire: it resumes with a new lifetime.
	again, err := b.Resume(testCtx(t), pausedShort.ID())
	if err != nil {
		t.Fatalf("Resume of a paused sandbox past its first deadline: %v", err)
	}
	if res, err := again.Exec(testCtx(t), []string{"true"}, sandbox.ExecOptions{}); err != nil || res.ExitCode != 0 {
		t.Errorf("Exec after resume: %+v %v", res, err)
	}
}

func TestAbsentImage(t *testing.T) {
	newBackend(t) // skips without a daemon
	b, err := New(Config{Image: "terp-no-such-image:never"})
	if err != nil {
		t.Fatal(err)
	}
	_, err = b.Create(testCtx(t), sandbox.Options{})
	var se *SetupError
	if !errors.As(err, &se) {
		t.Fatalf("Create with a missing image: %v, want a SetupError", err)
	}
	for _, want := range []string{"terp-no-such-image:never", "FROM python:3.12-slim", "pip install numpy pandas matplotlib", "make docker-test-image"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the error does not say %q: %v", want, err)
		}
	}
}

func TestMissingLibrary(t *testing.T) {
	b := newBackend(t)
	saved := pythonPackages
	pythonPackages = append(slices.Clone(saved), "terp_no_such_module")
	t.Cleanup(func() { pythonPackages = saved })
	err := b.Check(testCtx(t))
	var se *SetupError
	if !errors.As(err, &se) || !strings.Contains(se.Problem, "lacks the Python libraries terp_no_such_module") || !strings.Contains(se.Fix, "pip install") {
		t.Fatalf("Check with a missing library: %v", err)
	}
	// Create checks in the sandbox it made, and removes it.
	_, err = newBackend(t).Create(testCtx(t), sandbox.Options{})
	if !errors.As(err, &se) || !strings.Contains(se.Problem, "terp_no_such_module") {
		t.Fatalf("Create with a missing library: %v", err)
	}
}

func TestHostEnvNotInContainer(t *testing.T) {
	t.Setenv("TERP_DOCKER_HOST_SECRET", "leaked-value")
	b := newBackend(t)
	s := create(t, b, sandbox.Options{})
	env := strings.Join(inspect(t, s).Config.Env, "\n")
	if strings.Contains(env, "leaked-value") || strings.Contains(env, "TERP_") {
		t.Errorf("the container's environment holds terp's:\n%s", env)
	}
	res := run(t, s, "cat /proc/self/environ | tr '\\0' '\\n'", sandbox.ExecOptions{Env: []string{"STEP=1"}})
	if strings.Contains(res.Stdout, "leaked-value") || !strings.Contains(res.Stdout, "STEP=1") || !strings.Contains(res.Stdout, "HOME=/tmp") {
		t.Errorf("a command's environment:\n%s", res.Stdout)
	}
}

// The allowlist mode on Docker: NetworkMode stays "none", the proxy's socket
// arrives through a bind mount, and the code reaches exactly the allowed
// hosts, through two commands (the first starts the bridge, the second
// shares it), the kernel, and a pause and resume by a fresh Backend.
func TestNetworkAllowlist(t *testing.T) {
	b := newBackend(t)
	egressDir := t.TempDir()
	b.cfg.EgressDir, b.cfg.EgressOptions = egressDir, egresstest.Options(t)
	s := create(t, b, sandbox.Options{Network: sandbox.Network{Mode: sandbox.NetworkAllowlist, Allow: []string{"pypi.org", "*.pypi.org"}}})
	if hc := inspect(t, s).HostConfig; hc.NetworkMode != "none" {
		t.Errorf("NetworkMode %q, want none", hc.NetworkMode)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	probe := fmt.Sprintf(egresstest.Probe, ln.Addr().(*net.TCPAddr).Port)
	for i := range 2 {
		res, err := s.Exec(testCtx(t), []string{"python3", "-c", probe}, sandbox.ExecOptions{Timeout: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		for _, want := range egresstest.Want {
			if !strings.Contains(res.Stdout, want) {
				t.Errorf("command %d: stdout lacks %q:\n%s%s", i+1, want, res.Stdout, res.Stderr)
			}
		}
	}

	if _, err := s.Pause(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	fresh := newBackend(t)
	fresh.cfg.EgressDir, fresh.cfg.EgressOptions = egressDir, egresstest.Options(t)
	sb, err := fresh.Resume(testCtx(t), s.ID())
	if err != nil {
		t.Fatal(err)
	}
	k, err := kernel.Start(testCtx(t), sb, kernel.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer k.Close()
	code := `import ssl, urllib.request
urllib.request.urlopen("https://pypi.org/", context=ssl._create_unverified_context(), timeout=10).read().decode()`
	for i := range 2 {
		res, err := k.Run(testCtx(t), code, time.Minute)
		if err != nil || !strings.Contains(res.Stdout, "hello from pypi.org") {
			t.Errorf("kernel run %d after resume: %+v %v", i+1, res, err)
		}
	}
	if err := sb.Close(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	if entries, _ := os.ReadDir(egressDir); len(entries) != 0 {
		t.Errorf("Close left %d entries in the egress directory", len(entries))
	}
}

// A daemon elsewhere cannot bind a socket of this machine: the allowlist
// mode says so before anything is created.
func TestNetworkAllowlistNeedsLocalDaemon(t *testing.T) {
	t.Setenv("DOCKER_HOST", "tcp://build-box.invalid:2376")
	b, err := New(Config{}) // no daemon is asked: the image does not matter
	if err != nil {
		t.Fatal(err)
	}
	_, err = b.Create(t.Context(), sandbox.Options{Network: sandbox.Network{Mode: sandbox.NetworkAllowlist, Allow: []string{"pypi.org"}}})
	if err == nil || !strings.Contains(err.Error(), "needs a Docker daemon on this machine") {
		t.Errorf("Create = %v, want the local-daemon refusal", err)
	}
}

// TestSSHHost needs no daemon: the client cannot speak ssh, and New says
// how to forward the socket instead.
func TestSSHHost(t *testing.T) {
	t.Setenv("DOCKER_HOST", "ssh://me@build-box")
	_, err := New(Config{})
	var se *SetupError
	if !errors.As(err, &se) || !strings.Contains(se.Fix, "ssh -nNT -L /tmp/docker.sock:/var/run/docker.sock me@build-box") {
		t.Errorf("New with an ssh DOCKER_HOST: %v", err)
	}
}

func TestWorkingDir(t *testing.T) {
	b := newBackend(t)
	s := create(t, b, sandbox.Options{})
	run(t, s, "mkdir -p /work/sub", sandbox.ExecOptions{})
	if res := run(t, s, "pwd", sandbox.ExecOptions{Dir: "/work/sub"}); res.Stdout != "/work/sub\n" {
		t.Errorf("pwd in /work/sub: %q %q", res.Stdout, res.Stderr)
	}
	if _, err := s.Exec(testCtx(t), []string{"pwd"}, sandbox.ExecOptions{Dir: "/work/nope"}); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a missing directory under /work: %v, want ErrNotExist", err)
	}
	// Elsewhere the runtime finds out; its complaint reaches the caller.
	res := run(t, s, "pwd", sandbox.ExecOptions{Dir: "/nope"})
	if res.ExitCode == 0 || !strings.Contains(res.Stdout+res.Stderr, "/nope") {
		t.Errorf("a missing directory outside /work: %+v", res)
	}
}

// TestKernelKilledAndRestarted is the kernel's last resort on Docker: a step
// deaf to SIGINT is killed with its children, and a fresh worker takes over
// with the files kept and the variables lost.
func TestKernelKilledAndRestarted(t *testing.T) {
	b := newBackend(t)
	s := create(t, b, sandbox.Options{})
	k, err := kernel.Start(testCtx(t), s, kernel.Options{Grace: 500 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k.Close() })
	res, err := k.Run(testCtx(t), "kept = 1\nopen('/work/kept.txt', 'w').write('file')", time.Minute)
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("first step: %+v %v", res, err)
	}
	res, err = k.Run(testCtx(t), "import signal, subprocess, time\nsubprocess.Popen(['sleep', '308'])\n"+
		"signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})\nprint('sleeping', flush=True)\ntime.sleep(60)", time.Second)
	if err != nil || !res.TimedOut || res.ExitCode != sandbox.ExitTimedOut || res.Stdout != "sleeping\n" {
		t.Fatalf("a step deaf to SIGINT: %+v %v", res, err)
	}
	if !strings.Contains(res.Notice, "killed") || !strings.Contains(res.Notice, "variables and imports were lost") {
		t.Errorf("notice %q", res.Notice)
	}
	res, err = k.Run(testCtx(t), "print(open('/work/kept.txt').read(), 'kept' in globals())", time.Minute)
	if err != nil || res.Stdout != "file False\n" {
		t.Errorf("after the restart: %+v %v", res, err)
	}
	if ps := procs(t, s); strings.Contains(ps, "sleep 308") {
		t.Errorf("the killed step's child survived:\n%s", ps)
	}
}

func TestListErrors(t *testing.T) {
	b := newBackend(t)
	s := create(t, b, sandbox.Options{})
	run(t, s, "printf x > /work/f; ln -s / /work/root", sandbox.ExecOptions{})
	if _, err := s.List(testCtx(t), "/work/nope"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("List of a missing directory: %v, want ErrNotExist", err)
	}
	if _, err := s.List(testCtx(t), "/work/f"); err == nil || !strings.Contains(err.Error(), "not a directory") {
		t.Errorf("List of a file: %v", err)
	}
	if _, err := s.List(testCtx(t), "/etc"); err == nil {
		t.Error("List outside /work succeeded")
	}
	// A link the code made to / is not followed.
	files, err := s.List(testCtx(t), "")
	if err != nil || len(files) != 1 || files[0].Path != "f" {
		t.Errorf("List of /work with a link to /: %+v %v", files, err)
	}
}

// TestWriteThroughNoLink: a directory the code turned into a link inside
// /work is not written through; terp's file would land over the code's.
func TestWriteThroughNoLink(t *testing.T) {
	b := newBackend(t)
	s := create(t, b, sandbox.Options{})
	res := run(t, s, "mkdir /work/mine && echo mine > /work/mine/main.py && ln -s mine /work/.terp", sandbox.ExecOptions{Timeout: time.Minute})
	if res.ExitCode != 0 {
		t.Fatalf("setup: %+v", res)
	}
	err := s.WriteFile(testCtx(t), "/work/.terp/main.py", strings.NewReader("terp's"))
	if err == nil || !strings.Contains(err.Error(), "symlink") {
		t.Errorf("WriteFile through the link = %v, want it refused", err)
	}
	if res := run(t, s, "cat /work/mine/main.py", sandbox.ExecOptions{Timeout: time.Minute}); res.Stdout != "mine\n" {
		t.Errorf("/work/mine/main.py now holds %q", res.Stdout)
	}
}
