package adversarial

import (
	"context"
	"fmt"
	"io/fs"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/moby/moby/client"

	"github.com/terpdev/terp/internal/sandbox"
	"github.com/terpdev/terp/internal/sandbox/cpuos"
	"github.com/terpdev/terp/internal/sandbox/docker"
	"github.com/terpdev/terp/internal/sandbox/local"
	"github.com/terpdev/terp/internal/terptest"
)

// backend is a set of sandbox backends a case runs on.
type backend int

const (
	onLocal backend = 1 << iota
	onDocker
	onCPUOS

	onAll = onLocal | onDocker | onCPUOS
)

func (b backend) String() string {
	switch b {
	case onLocal:
		return "local"
	case onDocker:
		return "docker"
	case onCPUOS:
		return "cpuos"
	}
	return fmt.Sprintf("backend(%d)", int(b))
}

// target is one backend the hostile cases run against, with what the cases
// need to know about it.
type target struct {
	kind backend
	b    sandbox.Backend
	// other is another conversation's sandbox on the same backend, holding
	// host.secret in /work/other.txt; otherPath is where that file lives on
	// the machine that runs the sandboxes, for the code to try.
	other     sandbox.Sandbox
	otherPath string
}

// create makes a sandbox on tg that is closed when the test ends.
func (tg *target) create(t testing.TB, opt sandbox.Options) sandbox.Sandbox {
	t.Helper()
	if opt.Timeout == 0 {
		opt.Timeout = 10 * time.Minute
	}
	sbx, err := tg.b.Create(context.Background(), opt)
	if err != nil {
		t.Fatalf("create %s sandbox: %v", tg.kind, err)
	}
	t.Cleanup(func() {
		if err := sbx.Close(context.Background()); err != nil {
			t.Errorf("close sandbox: %v", err)
		}
	})
	return sbx
}

// plantOther creates tg.other with the secret in it.
func (tg *target) plantOther(t *testing.T) {
	t.Helper()
	tg.other = tg.create(t, sandbox.Options{})
	if err := tg.other.WriteFile(t.Context(), "/work/other.txt", strings.NewReader(host.secret)); err != nil {
		t.Fatal(err)
	}
	switch s := tg.other.(type) {
	case *local.Sandbox:
		tg.otherPath = s.HostDir() + "/other.txt"
	case *docker.Sandbox:
		// The volume's directory on the Docker host.
		v, err := dockerClient(t).VolumeInspect(t.Context(), "terp-"+string(s.ID()), client.VolumeInspectOptions{})
		if err != nil {
			t.Fatal(err)
		}
		tg.otherPath = v.Volume.Mountpoint + "/other.txt"
	default:
		// The cpuos server's sandboxes live under its local backend's root.
		_ = filepath.WalkDir(cpuosServer.root, func(p string, d fs.DirEntry, err error) error {
			if err == nil && d.Name() == "other.txt" {
				tg.otherPath = p
			}
			return nil
		})
		if tg.otherPath == "" {
			t.Fatalf("the other conversation's file is nowhere under %s", cpuosServer.root)
		}
	}
}

func localTarget() *target { return &target{kind: onLocal, b: host.backend} }

// The Docker backend is built once, on first use, and skipped loudly when
// there is no daemon or no test image, as internal/sandbox/docker's tests do.
var dockerOnce struct {
	sync.Once
	b   *docker.Backend
	cli *client.Client
	err error
}

func dockerTarget(t testing.TB) *target {
	t.Helper()
	img := terptest.DockerImage(t)
	dockerOnce.Do(func() {
		b, err := docker.New(docker.Config{Image: img})
		if err != nil {
			dockerOnce.err = err
			return
		}
		cli, err := client.New(client.FromEnv)
		if err != nil {
			dockerOnce.err = err
			return
		}
		dockerOnce.b, dockerOnce.cli = b, cli
	})
	if dockerOnce.err != nil {
		t.Fatal(dockerOnce.err)
	}
	return &target{kind: onDocker, b: dockerOnce.b}
}

func dockerClient(t testing.TB) *client.Client {
	dockerTarget(t)
	return dockerOnce.cli
}

// cpuosToken is the bearer token of the cpuos server the suite starts.
const cpuosToken = "adversarial-token"

// cpuosServer is a real cpuos.Server on its own local backend behind a real
// HTTP listener on 127.0.0.1, as `terp sandbox serve` runs it.
var cpuosServer struct {
	sync.Once
	srv  *cpuos.Server
	hs   *httptest.Server
	root string
	err  error
}

func cpuosTarget(t testing.TB) *target {
	t.Helper()
	cs := &cpuosServer
	cs.Do(func() {
		cs.root, cs.err = os.MkdirTemp("", "terp-adversarial-cpuos-")
		if cs.err != nil {
			return
		}
		var lb *local.Backend
		if lb, cs.err = local.New(local.Config{Root: cs.root}); cs.err != nil {
			return
		}
		if cs.srv, cs.err = cpuos.NewServer(lb, cpuosToken); cs.err != nil {
			return
		}
		cs.hs = httptest.NewServer(cs.srv.Handler())
	})
	if cs.err != nil {
		t.Fatal(cs.err)
	}
	b, err := cpuos.New(cpuos.Config{BaseURL: cs.hs.URL, APIKey: cpuosToken})
	if err != nil {
		t.Fatal(err)
	}
	return &target{kind: onCPUOS, b: b}
}

// stopCPUOS closes the cpuos server, if one was started, from teardown.
func stopCPUOS() {
	cs := &cpuosServer
	if cs.hs != nil {
		cs.hs.Close()
		_ = cs.srv.Close(context.Background())
	}
	if cs.root != "" {
		os.RemoveAll(cs.root)
	}
}

// kindOf says which backend runs sbx.
func kindOf(sbx sandbox.Sandbox) backend {
	switch sbx.(type) {
	case *docker.Sandbox:
		return onDocker
	case *cpuos.Sandbox:
		return onCPUOS
	}
	return onLocal
}

// noSurvivors fails unless nothing the step started is left running. For
// the local backend, and for cpuos, whose server runs the local backend on
// this machine, the host looks for processes in the pid namespace the code
// reported ("PIDNS <inode>"). A Docker sandbox's container outlives its
// steps by design, so there the test asks the daemon for the container's
// processes (docker top) and expects only its init and keep-alive.
func noSurvivors(t testing.TB, sbx sandbox.Sandbox, stdout string) {
	t.Helper()
	if s, ok := sbx.(*docker.Sandbox); ok {
		if left := leftInContainer(t, s); len(left) > 0 {
			t.Errorf("processes survived the step in the container:\n%s", strings.Join(left, "\n"))
		}
		return
	}
	waitNamespaceEmpty(t, stdout)
}

// leftInContainer lists the processes of s's container other than its init
// and keep-alive, allowing the kernel a moment to remove killed ones.
func leftInContainer(t testing.TB, s *docker.Sandbox) []string {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		top, err := dockerClient(t).ContainerTop(t.Context(), s.ContainerID(), client.ContainerTopOptions{Arguments: []string{"-o", "pid,args"}})
		if err != nil {
			t.Fatalf("docker top: %v", err)
		}
		var left []string
		for _, p := range top.Processes {
			cmd := p[len(p)-1]
			if strings.HasPrefix(cmd, "/sbin/docker-init") || cmd == "sleep infinity" {
				continue
			}
			left = append(left, strings.Join(p, " "))
		}
		if len(left) == 0 || time.Now().After(deadline) {
			return left
		}
		time.Sleep(100 * time.Millisecond)
	}
}
