package cli

import (
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/terpdev/terp/internal/llm/llmtest"
	"github.com/terpdev/terp/internal/terptest"
)

// fakeAPIServer answers what kubernetesChecks asks a cluster: agent-sandbox's
// discovery document (when crds) and the warm pool, which terp is
// forbidden to read (when !rbac). The backend's happy path and its other
// failures run against a real API server in
// internal/sandbox/kubernetes/clustertest.
func fakeAPIServer(t *testing.T, crds, rbac bool) string {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		switch {
		case r.URL.Path == "/apis/extensions.agents.x-k8s.io/v1beta1" && crds:
			_, _ = w.Write([]byte(`{"kind":"APIResourceList","apiVersion":"v1","groupVersion":"extensions.agents.x-k8s.io/v1beta1","resources":[` +
				`{"name":"sandboxclaims","namespaced":true,"kind":"SandboxClaim","verbs":["create","get","list","watch","delete"]},` +
				`{"name":"sandboxwarmpools","namespaced":true,"kind":"SandboxWarmPool","verbs":["get"]}]}`))
		case strings.HasSuffix(r.URL.Path, "/sandboxwarmpools/terp-python") && !rbac:
			w.WriteHeader(http.StatusForbidden)
			_, _ = w.Write([]byte(`{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"Forbidden","code":403,` +
				`"message":"sandboxwarmpools.extensions.agents.x-k8s.io \"terp-python\" is forbidden: User \"system:serviceaccount:terp:default\" cannot get resource \"sandboxwarmpools\""}`))
		default:
			w.WriteHeader(http.StatusNotFound)
			_, _ = w.Write([]byte(`{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"NotFound","code":404,"message":"the server could not find the requested resource"}`))
		}
	}))
	t.Cleanup(srv.Close)
	kubeconfig := filepath.Join(terptest.TempDir(t), "kubeconfig")
	cfg := "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: " + srv.URL +
		"\ncontexts:\n- name: c\n  context:\n    cluster: c\n    user: u\ncurrent-context: c\nusers:\n- name: u\n  user:\n    token: t\n"
	if err := os.WriteFile(kubeconfig, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return kubeconfig
}

func TestDoctorKubernetes(t *testing.T) {
	tests := []struct {
		name           string
		env            map[string]string
		crds, rbac     bool
		detail, fix    string
		noKubeconfig   bool
		sandboxSkipped string
	}{
		{name: "no token", crds: true, rbac: true,
			detail: "set CPUOS_API_KEY to the Secret the SandboxTemplate gives them", sandboxSkipped: "needs a cluster"},
		{name: "no cluster", env: map[string]string{"CPUOS_API_KEY": "k"}, noKubeconfig: true,
			detail: "no cluster to talk to", fix: "kubernetes_kubeconfig", sandboxSkipped: "needs a cluster"},
		{name: "no CRDs", env: map[string]string{"CPUOS_API_KEY": "k"},
			detail: "agent-sandbox's CRDs are not installed", fix: "Install agent-sandbox v1.0.1", sandboxSkipped: "needs agent-sandbox"},
		{name: "no RBAC", env: map[string]string{"CPUOS_API_KEY": "k"}, crds: true,
			detail: `terp may not get SandboxWarmPool terp-python in namespace "terp"`, fix: "rbac.yaml", sandboxSkipped: "needs agent-sandbox"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := llmtest.New(t, llmtest.Fixed(llmtest.RunPython("print(1)")))
			env := serverEnv(s)
			for k, v := range tt.env {
				env[k] = v
			}
			kubeconfig := fakeAPIServer(t, tt.crds, tt.rbac)
			if tt.noKubeconfig {
				kubeconfig = filepath.Join(terptest.TempDir(t), "missing")
			}
			rep, r := doctorJSON(t, env, "--sandbox", "kubernetes", "--kubernetes-namespace", "terp", "--kubernetes-kubeconfig", kubeconfig)
			if r.code != 1 || rep.OK {
				t.Errorf("exit %d, ok %v; want 1, false\n%s", r.code, rep.OK, r.stdout)
			}
			c := checkNamed(t, rep, "kubernetes")
			if c.Status != checkFail || !strings.Contains(c.Detail, tt.detail) || !strings.Contains(c.Fix, tt.fix) {
				t.Errorf("kubernetes check = %+v; want a failure with %q in its detail and %q in its fix", c, tt.detail, tt.fix)
			}
			if sc := checkNamed(t, rep, "sandbox"); sc.Status != checkSkip || !strings.Contains(sc.Detail, tt.sandboxSkipped) {
				t.Errorf("sandbox check = %+v; want skipped, %q", sc, tt.sandboxSkipped)
			}
		})
	}
}
