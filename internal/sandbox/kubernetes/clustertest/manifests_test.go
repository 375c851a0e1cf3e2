package clustertest

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"k8s.io/apimachinery/pkg/runtime/serializer/json"
	"k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/yaml"
)

// TestCoreManifestsDecodeStrictly checks the manifests' Kubernetes objects
// (Deployment, Service, RBAC, NetworkPolicy, Namespace) against client-go's
// types: a misspelt or misplaced field fails. This API server serves only
// CRDs, so it cannot run them through the real admission and validation,
// which a cluster's `kubectl apply --dry-run=server` does (docs/kubernetes.md).
// The agent-sandbox objects are checked against the CRDs in
// TestBackendOnAPIServer.
func TestCoreManifestsDecodeStrictly(t *testing.T) {
	strict := json.NewSerializerWithOptions(json.DefaultMetaFactory, scheme.Scheme, scheme.Scheme, json.SerializerOptions{Yaml: true, Strict: true})
	kinds := map[string]bool{}
	for _, d := range manifestDocs(t) {
		kinds[d.GetKind()] = true
		if _, err := scheme.Scheme.New(d.GroupVersionKind()); err != nil {
			continue // an agent-sandbox kind
		}
		if _, _, err := strict.Decode(d.raw, nil, nil); err != nil {
			t.Errorf("%s: %s %s: %v", d.file, d.GetKind(), d.GetName(), err)
		}
		if ns := d.GetNamespace(); d.GetKind() != "Namespace" && ns != namespace {
			t.Errorf("%s: %s %s is in namespace %q, not %q", d.file, d.GetKind(), d.GetName(), ns, namespace)
		}
	}
	for _, k := range []string{"SandboxTemplate", "SandboxWarmPool", "Deployment", "Service", "ServiceAccount", "Role", "RoleBinding", "NetworkPolicy"} {
		if !kinds[k] {
			t.Errorf("the manifests have no %s", k)
		}
	}

	// kubectl apply -k applies what the kustomization lists: every file.
	dir := filepath.Join("..", "..", "..", "..", "examples", "kubernetes")
	data, err := os.ReadFile(filepath.Join(dir, "kustomization.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var k struct {
		Resources []string `json:"resources"`
	}
	if err := yaml.Unmarshal(data, &k); err != nil {
		t.Fatalf("kustomization.yaml: %v", err)
	}
	files, _ := filepath.Glob(filepath.Join(dir, "*.yaml"))
	for _, f := range files {
		if b := filepath.Base(f); b != "kustomization.yaml" && !slices.Contains(k.Resources, b) {
			t.Errorf("kustomization.yaml does not list %s", b)
		}
	}
}
