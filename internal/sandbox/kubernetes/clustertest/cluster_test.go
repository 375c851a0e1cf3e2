package clustertest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.etcd.io/etcd/server/v3/embed"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	"k8s.io/apiextensions-apiserver/test/integration/fixtures"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	extv1beta1 "sigs.k8s.io/agent-sandbox/extensions/api/v1beta1"
	"sigs.k8s.io/yaml"

	"github.com/terpdev/terp/internal/sandbox"
	"github.com/terpdev/terp/internal/sandbox/cpuos"
	"github.com/terpdev/terp/internal/sandbox/pod"
)

// The test binary is also the pods' server: run with podServeEnv naming a
// Unix socket, inside a fake pod, it serves the cpuos contract on the pod
// backend there, as `terp sandbox serve --isolation pod` does in the image.
const (
	podServeEnv = "TERP_TEST_POD_SERVE"
	podTokenEnv = "TERP_TEST_POD_TOKEN"
)

func TestMain(m *testing.M) {
	if sock := os.Getenv(podServeEnv); sock != "" {
		os.Exit(servePod(sock, os.Getenv(podTokenEnv)))
	}
	os.Exit(m.Run())
}

func servePod(sock, token string) int {
	b, err := pod.New(pod.Config{KillStrays: true})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	srv, err := cpuos.NewServer(b, token)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	ln, err := net.Listen("unix", sock)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	_ = http.Serve(ln, srv.Handler())
	return 0
}

const (
	namespace = "terp"
	token     = "pod-token-for-tests"
)

// cluster is the API server, its clients and the fake controller's pods.
type cluster struct {
	rest *rest.Config
	dyn  dynamic.Interface
	ext  apiextensionsclient.Interface

	mu     sync.Mutex
	pods   map[string]*fakePod // by claim name
	dir    string
	exe    string // the test binary, where the pods' uids may run it
	next   uint32
	podErr error // why the last pod did not start
}

// podError is why a fake pod did not start, if one did not: the claims of
// a test that cannot start pods never get Ready, and each would wait for
// its timeout.
func (c *cluster) podError() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.podErr
}

// startCluster starts etcd and the API server for the test.
func startCluster(t *testing.T) *cluster {
	t.Helper()
	etcdURL := startEtcd(t)
	t.Setenv("KUBE_INTEGRATION_ETCD_URL", etcdURL)
	stop, rc, _, err := fixtures.StartDefaultServer(t)
	if err != nil {
		t.Fatalf("start the API server: %v", err)
	}
	t.Cleanup(stop)
	rc = rest.CopyConfig(rc)
	rc.QPS, rc.Burst = 200, 400
	dyn, err := dynamic.NewForConfig(rc)
	if err != nil {
		t.Fatal(err)
	}
	ext, err := apiextensionsclient.NewForConfig(rc)
	if err != nil {
		t.Fatal(err)
	}
	dir, err := os.MkdirTemp("", "terp-pods-")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o711); err != nil {
		t.Fatal(err)
	}
	// go test leaves the binary in a directory only its user may enter; the
	// pods run as uids of their own.
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	exe := filepath.Join(dir, "terp-pod-server")
	if err := copyFile(self, exe); err != nil {
		t.Fatal(err)
	}
	c := &cluster{rest: rc, dyn: dyn, ext: ext, pods: map[string]*fakePod{}, dir: dir, exe: exe}
	t.Cleanup(func() {
		c.mu.Lock()
		for _, p := range c.pods {
			p.stop()
		}
		c.mu.Unlock()
		_ = os.RemoveAll(dir)
	})
	return c
}

// freeURL is an http URL on a loopback port nobody listens on.
func freeURL(t *testing.T) url.URL {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return url.URL{Scheme: "http", Host: addr}
}

func startEtcd(t *testing.T) string {
	cfg := embed.NewConfig()
	cfg.Dir = t.TempDir()
	cfg.LogLevel = "error"
	cfg.LogOutputs = []string{filepath.Join(cfg.Dir, "etcd.log")} // not the test's output
	client, peer := freeURL(t), freeURL(t)
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{client}, []url.URL{client}
	cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{peer}, []url.URL{peer}
	cfg.InitialCluster = cfg.InitialClusterFromName(cfg.Name)
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		t.Fatalf("start etcd: %v", err)
	}
	t.Cleanup(e.Close)
	select {
	case <-e.Server.ReadyNotify():
	case <-time.After(60 * time.Second):
		t.Fatal("etcd did not start within a minute")
	}
	return client.String()
}

// moduleDir is the module cache's copy of mod at the version go.mod names
// (downloaded if missing).
func moduleDir(t *testing.T, mod string) string {
	t.Helper()
	out, err := exec.Command("go", "mod", "download", "-json", mod).Output()
	if err != nil {
		t.Fatalf("go mod download %s: %v", mod, err)
	}
	var m struct{ Dir, Version string }
	if err := json.Unmarshal(out, &m); err != nil || m.Dir == "" {
		t.Fatalf("go mod download %s: %v (%s)", mod, err, out)
	}
	t.Logf("%s %s from %s", mod, m.Version, m.Dir)
	return m.Dir
}

// installCRDs creates agent-sandbox's CRDs, from the module go.mod names,
// and waits until they are served.
func (c *cluster) installCRDs(t *testing.T) {
	t.Helper()
	dir := filepath.Join(moduleDir(t, "sigs.k8s.io/agent-sandbox"), "k8s", "crds")
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no CRDs in %s: %v", dir, err)
	}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var crd apiextensionsv1.CustomResourceDefinition
		if err := yaml.UnmarshalStrict(data, &crd); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		if _, err := c.ext.ApiextensionsV1().CustomResourceDefinitions().Create(t.Context(), &crd, metav1.CreateOptions{}); err != nil {
			t.Fatalf("create CRD %s: %v", crd.Name, err)
		}
		deadline := time.Now().Add(30 * time.Second)
		for {
			got, err := c.ext.ApiextensionsV1().CustomResourceDefinitions().Get(t.Context(), crd.Name, metav1.GetOptions{})
			if err == nil && established(got) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("CRD %s not established: %v", crd.Name, err)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	// Discovery lags the Established condition a little.
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, err := c.dyn.Resource(extv1beta1.GroupVersion.WithResource("sandboxclaims")).Namespace(namespace).List(t.Context(), metav1.ListOptions{})
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("sandboxclaims not served: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func established(crd *apiextensionsv1.CustomResourceDefinition) bool {
	for _, c := range crd.Status.Conditions {
		if c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue {
			return true
		}
	}
	return false
}

// fakePod is one claim's pod: terp's pod-mode server in a bubblewrap
// namespace, listening on a Unix socket.
type fakePod struct {
	cmd  *exec.Cmd
	sock string
	done chan struct{}
}

func (p *fakePod) stop() {
	_ = p.cmd.Process.Kill()
	<-p.done
}

// startPod starts a pod: a read-only root with the host's /usr and /etc,
// /work and /mnt/data bound to one directory (the emptyDir), /tmp of its
// own, no network, uid 1000, as the SandboxTemplate makes it. When the
// test runs as root the pod runs as a host uid of its own.
func (c *cluster) startPod(t *testing.T, name string) (*fakePod, error) {
	exe := c.exe
	dir := filepath.Join(c.dir, name)
	for _, d := range []string{dir, filepath.Join(dir, "work"), filepath.Join(dir, "run")} {
		if err := os.Mkdir(d, 0o755); err != nil {
			return nil, err
		}
	}
	var cred *syscall.Credential
	if os.Geteuid() == 0 {
		c.mu.Lock()
		c.next++
		uid := sandbox.DefaultUIDs.First + 1000 + c.next
		c.mu.Unlock()
		for _, d := range []string{dir, filepath.Join(dir, "work"), filepath.Join(dir, "run")} {
			if err := os.Chown(d, int(uid), int(uid)); err != nil {
				return nil, err
			}
		}
		cred = &syscall.Credential{Uid: uid, Gid: uid}
	}
	args := []string{"--unshare-all", "--unshare-user", "--uid", "1000", "--gid", "1000",
		"--die-with-parent", "--new-session", "--clearenv",
		"--ro-bind", "/usr", "/usr"}
	for _, d := range []string{"bin", "sbin", "lib", "lib64"} {
		if target, err := os.Readlink("/" + d); err == nil {
			args = append(args, "--symlink", target, "/"+d)
		} else if _, err := os.Stat("/" + d); err == nil {
			args = append(args, "--ro-bind", "/"+d, "/"+d)
		}
	}
	args = append(args,
		"--ro-bind", "/etc", "/etc",
		"--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp",
		"--dir", "/work", "--bind", filepath.Join(dir, "work"), "/work",
		"--dir", "/mnt/data", "--bind", filepath.Join(dir, "work"), "/mnt/data",
		"--dir", "/run/terp", "--bind", filepath.Join(dir, "run"), "/run/terp",
		"--ro-bind", exe, "/terp",
		"--remount-ro", "/",
		"--setenv", podServeEnv, "/run/terp/sandbox.sock",
		"--setenv", podTokenEnv, token,
		"--setenv", "PATH", "/usr/bin:/bin",
		"--", "/terp")
	cmd := exec.Command("bwrap", args...)
	cmd.Env = []string{}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = os.Stderr, io.MultiWriter(os.Stderr, &out)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred, Setpgid: true}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start bwrap: %w", err)
	}
	p := &fakePod{cmd: cmd, sock: filepath.Join(dir, "run", "sandbox.sock"), done: make(chan struct{})}
	go func() { _ = cmd.Wait(); close(p.done) }()
	deadline := time.Now().Add(20 * time.Second)
	for {
		if conn, err := net.Dial("unix", p.sock); err == nil {
			conn.Close()
			return p, nil
		}
		select {
		case <-p.done:
			return nil, fmt.Errorf("the pod's server exited: %v: %s", cmd.ProcessState, bytes.TrimSpace(out.Bytes()))
		default:
		}
		if time.Now().After(deadline) {
			p.stop()
			return nil, errors.New("the pod's server did not listen within 20s")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// dialer reaches a pod's server by the host name the claim's status gives
// (its service name, "<sandbox>.<namespace>.svc.cluster.local"), as
// cluster DNS would.
func (c *cluster) dial(ctx context.Context, _, addr string) (net.Conn, error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	name, _, _ := strings.Cut(host, ".")
	c.mu.Lock()
	p := c.pods[name]
	c.mu.Unlock()
	if p == nil {
		return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
	}
	var d net.Dialer
	return d.DialContext(ctx, "unix", p.sock)
}

func (c *cluster) httpClient() *http.Client {
	return &http.Client{Transport: &http.Transport{DialContext: c.dial, MaxIdleConnsPerHost: 8}}
}

// playController does agent-sandbox's part until ctx ends: each new claim
// on the warm pool gets a pod and becomes Ready, naming its sandbox and the
// service's DNS name; a deleted claim's pod is stopped.
func (c *cluster) playController(ctx context.Context, t *testing.T) {
	res := c.dyn.Resource(extv1beta1.GroupVersion.WithResource("sandboxclaims")).Namespace(namespace)
	w, err := res.Watch(ctx, metav1.ListOptions{})
	if err != nil {
		t.Errorf("controller: watch claims: %v", err)
		return
	}
	defer w.Stop()
	for ev := range w.ResultChan() {
		u, ok := ev.Object.(*unstructured.Unstructured)
		if !ok {
			continue
		}
		name := u.GetName()
		switch ev.Type {
		case watch.Added:
			var claim extv1beta1.SandboxClaim
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &claim); err != nil {
				t.Errorf("controller: claim %s: %v", name, err)
				continue
			}
			if claim.Spec.WarmPoolRef.Name != warmPool {
				continue // left unready, as a claim on a missing pool is
			}
			p, err := c.startPod(t, name)
			if err != nil {
				t.Errorf("controller: pod for %s: %v", name, err)
				c.mu.Lock()
				c.podErr = err
				c.mu.Unlock()
				continue
			}
			c.mu.Lock()
			c.pods[name] = p
			c.mu.Unlock()
			claim.Status = extv1beta1.SandboxClaimStatus{
				Conditions: []metav1.Condition{{Type: "Ready", Status: metav1.ConditionTrue, Reason: "SandboxReady",
					Message: "the fake controller's pod is up", LastTransitionTime: metav1.Now()}},
				SandboxStatus: extv1beta1.SandboxStatus{Name: name, ServiceFQDN: name + "." + namespace + ".svc.cluster.local", PodIPs: []string{"10.0.0.1"}},
			}
			obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&claim)
			if err != nil {
				t.Errorf("controller: %v", err)
				continue
			}
			if _, err := res.UpdateStatus(ctx, &unstructured.Unstructured{Object: obj}, metav1.UpdateOptions{}); err != nil && ctx.Err() == nil {
				t.Errorf("controller: set %s Ready: %v", name, err)
			}
		case watch.Deleted:
			c.mu.Lock()
			p := c.pods[name]
			delete(c.pods, name)
			c.mu.Unlock()
			if p != nil {
				p.stop()
			}
		}
	}
}

// claimsLeft lists the claims still in the namespace.
func (c *cluster) claimsLeft(t *testing.T) []string {
	t.Helper()
	list, err := c.dyn.Resource(extv1beta1.GroupVersion.WithResource("sandboxclaims")).Namespace(namespace).List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, it := range list.Items {
		names = append(names, it.GetName())
	}
	return names
}

// copyFile copies an executable to dst, readable and executable by all.
func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o755)
	if err != nil {
		return err
	}
	_, err = io.Copy(out, in)
	return errors.Join(err, out.Close())
}
