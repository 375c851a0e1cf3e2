package clustertest

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	extv1beta1 "sigs.k8s.io/agent-sandbox/extensions/api/v1beta1"
	"sigs.k8s.io/yaml"

	"github.com/terpdev/terp/internal/sandbox"
	"github.com/terpdev/terp/internal/sandbox/conformance"
	"github.com/terpdev/terp/internal/sandbox/kubernetes"
)

// warmPool is the pool the manifests define and the fake controller serves.
const warmPool = "terp-python"

// TestBackendOnAPIServer is the kubernetes backend through a real API
// server with agent-sandbox's CRDs: what it says when they or the pool are
// missing, the manifests validated against the CRDs' schemas, then the
// conformance suite with the test as the controller, a second replica
// resuming a paused sandbox, the sandbox-router path and a claim that
// never becomes Ready.
func TestBackendOnAPIServer(t *testing.T) {
	if _, err := exec.LookPath("bwrap"); err != nil {
		t.Fatal("bwrap is missing; the fake pods run in bubblewrap (make test-deps installs it)")
	}
	c := startCluster(t)
	cfg := kubernetes.Config{
		Namespace: namespace, WarmPool: warmPool, REST: c.rest, APIKey: token,
		HTTPClient: c.httpClient(), ReadyTimeout: 30 * time.Second,
	}
	newBackend := func(t *testing.T, cfg kubernetes.Config) *kubernetes.Backend {
		t.Helper()
		b, err := kubernetes.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}

	t.Run("no CRDs", func(t *testing.T) {
		err := newBackend(t, cfg).Check(t.Context())
		if err == nil || !strings.Contains(err.Error(), "agent-sandbox's CRDs are not installed") {
			t.Fatalf("Check before the CRDs: %v, want it to say they are not installed", err)
		}
	})
	c.installCRDs(t)

	t.Run("no warm pool", func(t *testing.T) {
		b := newBackend(t, cfg)
		_, err := b.Create(t.Context(), sandbox.Options{})
		if err == nil || !strings.Contains(err.Error(), `no SandboxWarmPool "terp-python" in namespace "terp"`) {
			t.Fatalf("Create before the pool: %v, want it to name the missing pool", err)
		}
		if left := c.claimsLeft(t); len(left) != 0 {
			t.Errorf("claims made without a pool: %v", left)
		}
	})

	t.Run("manifests", func(t *testing.T) { c.applyManifests(t) })
	if t.Failed() {
		t.FailNow()
	}

	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { c.playController(ctx, t) })
	defer wg.Wait()
	defer cancel()

	b := newBackend(t, cfg)
	t.Run("conformance", func(t *testing.T) {
		conformance.Run(t, func(t *testing.T) sandbox.Backend {
			if err := c.podError(); err != nil {
				t.Fatalf("the fake pods do not start, so no claim gets Ready: %v", err)
			}
			return b
		})
	})
	if left := c.claimsLeft(t); len(left) != 0 {
		t.Errorf("claims left after the conformance suite closed its sandboxes: %v", left)
	}

	t.Run("another replica resumes", func(t *testing.T) {
		sbx, err := b.Create(t.Context(), sandbox.Options{Timeout: 5 * time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		defer sbx.Close(context.Background())
		claim := sbx.(*kubernetes.Sandbox).Claim()
		if !strings.HasPrefix(string(sbx.ID()), claim+"/") {
			t.Errorf("id %s does not start with the claim's name %s", sbx.ID(), claim)
		}
		got, err := c.dyn.Resource(extv1beta1.GroupVersion.WithResource("sandboxclaims")).Namespace(namespace).Get(t.Context(), claim, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if pool, _, _ := unstructured.NestedString(got.Object, "spec", "warmPoolRef", "name"); pool != warmPool {
			t.Errorf("the claim's warmPoolRef is %q", pool)
		}
		before, ok, _ := unstructured.NestedString(got.Object, "spec", "lifecycle", "shutdownTime")
		if !ok {
			t.Error("the claim has no lifecycle.shutdownTime: a terp that dies would leave its pod forever")
		}
		if err := sbx.WriteFile(t.Context(), "/work/state.txt", strings.NewReader("kept")); err != nil {
			t.Fatal(err)
		}
		id, err := sbx.Pause(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(1100 * time.Millisecond) // shutdownTime has whole seconds
		other := newBackend(t, cfg)         // a second terp serve replica
		again, err := other.Resume(t.Context(), id)
		if err != nil {
			t.Fatalf("the other replica's Resume(%s): %v", id, err)
		}
		got, err = c.dyn.Resource(extv1beta1.GroupVersion.WithResource("sandboxclaims")).Namespace(namespace).Get(t.Context(), claim, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if after, _, _ := unstructured.NestedString(got.Object, "spec", "lifecycle", "shutdownTime"); after <= before {
			t.Errorf("resuming left the claim's shutdownTime at %s (was %s): the lifetime starts again on resume", after, before)
		}
		res, err := again.Exec(t.Context(), []string{"cat", "/mnt/data/state.txt"}, sandbox.ExecOptions{})
		if err != nil || res.Stdout != "kept" {
			t.Errorf("after resuming on another replica: %+v, %v", res, err)
		}
		if err := again.Close(t.Context()); err != nil {
			t.Fatal(err)
		}
		if _, err := b.Resume(t.Context(), id); !errors.Is(err, sandbox.ErrExpired) {
			t.Errorf("Resume after Close: %v, want ErrExpired", err)
		}
	})

	t.Run("pause kills what escaped its command", func(t *testing.T) {
		sbx, err := b.Create(t.Context(), sandbox.Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer sbx.Close(context.Background())
		// setsid leaves the command's process group, which the command's
		// end kills; pause kills every other process of the pod's uid.
		res, err := sbx.Exec(t.Context(), []string{"sh", "-c", "setsid sh -c 'while :; do echo . >> /work/beat; sleep 0.1; done' >/dev/null 2>&1 & sleep 0.5"}, sandbox.ExecOptions{})
		if err != nil || res.ExitCode != 0 {
			t.Fatalf("start the escaping loop: %+v, %v", res, err)
		}
		beats := func(s sandbox.Sandbox) int64 {
			files, err := s.List(t.Context(), "/work")
			if err != nil {
				t.Fatal(err)
			}
			for _, f := range files {
				if f.Path == "beat" {
					return f.Size
				}
			}
			return 0
		}
		time.Sleep(time.Second)
		if beats(sbx) == 0 {
			t.Fatal("the escaped loop never wrote: the test proves nothing")
		}
		id, err := sbx.Pause(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		again, err := b.Resume(t.Context(), id)
		if err != nil {
			t.Fatal(err)
		}
		before := beats(again)
		time.Sleep(time.Second)
		if after := beats(again); after != before {
			t.Errorf("/work/beat grew from %d to %d bytes after pause: the escaped process survived", before, after)
		}
	})

	t.Run("through sandbox-router", func(t *testing.T) {
		router, seen := c.fakeRouter(t)
		rcfg := cfg
		rcfg.RouterURL = router.URL
		rcfg.HTTPClient = nil
		rb := newBackend(t, rcfg)
		sbx, err := rb.Create(t.Context(), sandbox.Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer sbx.Close(context.Background())
		res, err := sbx.Exec(t.Context(), []string{"python3", "-c", "print(6*7)"}, sandbox.ExecOptions{})
		if err != nil || res.Stdout != "42\n" {
			t.Fatalf("Exec through the router: %+v, %v", res, err)
		}
		claim := sbx.(*kubernetes.Sandbox).Claim()
		if h := seen(); h.Get("X-Sandbox-ID") != claim || h.Get("X-Sandbox-Namespace") != namespace || h.Get("X-Sandbox-Port") != "8377" {
			t.Errorf("the router saw X-Sandbox-ID %q, X-Sandbox-Namespace %q, X-Sandbox-Port %q; want %s, %s, 8377",
				h.Get("X-Sandbox-ID"), h.Get("X-Sandbox-Namespace"), h.Get("X-Sandbox-Port"), claim, namespace)
		}
	})

	t.Run("never Ready", func(t *testing.T) {
		// A pool the fake controller does not serve, as a pool whose pods
		// cannot start.
		pool := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": extv1beta1.GroupVersion.String(), "kind": "SandboxWarmPool",
			"metadata": map[string]any{"name": "stuck", "namespace": namespace},
			"spec":     map[string]any{"replicas": int64(1), "sandboxTemplateRef": map[string]any{"name": "terp-python"}},
		}}
		if _, err := c.dyn.Resource(extv1beta1.GroupVersion.WithResource("sandboxwarmpools")).Namespace(namespace).Create(t.Context(), pool, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		scfg := cfg
		scfg.WarmPool, scfg.ReadyTimeout = "stuck", 2*time.Second
		_, err := newBackend(t, scfg).Create(t.Context(), sandbox.Options{})
		if err == nil || !strings.Contains(err.Error(), "was not Ready within 2s") || !strings.Contains(err.Error(), `warm pool "stuck"`) {
			t.Fatalf("Create on a pool that never gets Ready: %v", err)
		}
		if left := c.claimsLeft(t); len(left) != 0 {
			t.Errorf("the claim that never got Ready was left behind: %v", left)
		}
	})
}

// fakeRouter stands in for agent-sandbox's sandbox-router: it routes by
// X-Sandbox-ID and consumes Authorization, as the real one does. seen
// returns the headers of the last request.
func (c *cluster) fakeRouter(t *testing.T) (*httptest.Server, func() http.Header) {
	var mu sync.Mutex
	var last http.Header
	proxy := &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			r.Out.URL.Scheme = "http"
			r.Out.URL.Host = r.In.Header.Get("X-Sandbox-ID") + "." + r.In.Header.Get("X-Sandbox-Namespace") + ".svc.cluster.local:" + r.In.Header.Get("X-Sandbox-Port")
			r.Out.Header.Del("Authorization")
		},
		Transport:     &http.Transport{DialContext: c.dial},
		FlushInterval: -1,
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		last = r.Header.Clone()
		mu.Unlock()
		if r.Header.Get("X-Sandbox-ID") == "" {
			http.Error(w, "X-Sandbox-ID is required", http.StatusBadRequest)
			return
		}
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv, func() http.Header {
		mu.Lock()
		defer mu.Unlock()
		return last
	}
}

// applyManifests validates every agent-sandbox object in
// examples/kubernetes against the CRDs (a server-side dry run with strict
// field validation), then creates them for the rest of the test. The
// other objects are core Kubernetes kinds, which this API server does not
// serve: they are decoded strictly into client-go's types (manifests_test.go).
func (c *cluster) applyManifests(t *testing.T) {
	docs := manifestDocs(t)
	n := 0
	for _, d := range docs {
		gv, err := schema.ParseGroupVersion(d.GetAPIVersion())
		if err != nil {
			t.Fatalf("%s: %v", d.file, err)
		}
		if gv.Group != extv1beta1.GroupVersion.Group && gv.Group != "agents.x-k8s.io" {
			continue
		}
		n++
		gvr := gv.WithResource(strings.ToLower(d.GetKind()) + "s")
		res := c.dyn.Resource(gvr).Namespace(d.GetNamespace())
		if _, err := res.Create(t.Context(), d.Unstructured, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}, FieldValidation: "Strict"}); err != nil {
			t.Errorf("%s: %s %s does not validate against agent-sandbox's CRD: %v", d.file, d.GetKind(), d.GetName(), err)
			continue
		}
		if _, err := res.Create(t.Context(), d.Unstructured, metav1.CreateOptions{FieldValidation: "Strict"}); err != nil {
			t.Errorf("%s: create %s %s: %v", d.file, d.GetKind(), d.GetName(), err)
		}
	}
	if n < 2 {
		t.Errorf("found %d agent-sandbox objects in the manifests, want the SandboxTemplate and the SandboxWarmPool", n)
	}
	// The check itself: a field the CRD does not know is refused.
	bad := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": extv1beta1.GroupVersion.String(), "kind": "SandboxWarmPool",
		"metadata": map[string]any{"name": "typo", "namespace": namespace},
		"spec":     map[string]any{"replica": int64(1), "sandboxTemplateRef": map[string]any{"name": "terp-python"}},
	}}
	_, err := c.dyn.Resource(extv1beta1.GroupVersion.WithResource("sandboxwarmpools")).Namespace(namespace).Create(t.Context(), bad, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}, FieldValidation: "Strict"})
	if err == nil || !strings.Contains(err.Error(), "replica") {
		t.Errorf("a warm pool with a misspelt field passed the dry run: %v", err)
	}
}

// manifestDoc is one object of a manifest file.
type manifestDoc struct {
	*unstructured.Unstructured
	file string
	raw  []byte
}

// manifestDocs reads every object of examples/kubernetes but the
// kustomization.
func manifestDocs(t *testing.T) []manifestDoc {
	t.Helper()
	dir := filepath.Join("..", "..", "..", "..", "examples", "kubernetes")
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no manifests in %s: %v", dir, err)
	}
	var docs []manifestDoc
	for _, f := range files {
		if filepath.Base(f) == "kustomization.yaml" {
			continue
		}
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, part := range bytes.Split(data, []byte("\n---\n")) {
			js, err := yaml.YAMLToJSON(part)
			if err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			if string(js) == "null" {
				continue
			}
			u := &unstructured.Unstructured{}
			if err := u.UnmarshalJSON(js); err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			docs = append(docs, manifestDoc{Unstructured: u, file: filepath.Base(f), raw: part})
		}
	}
	return docs
}
