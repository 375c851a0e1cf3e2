package kubernetes

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"k8s.io/client-go/rest"

	"github.com/terpdev/terp/internal/sandbox"
)

// The backend's work, and its errors for missing CRDs, a missing pool and a
// claim that never gets Ready, run against a real API server in
// clustertest. Here: what New refuses, and RBAC refusals, which that server
// (no authorizer) cannot give, from a stand-in over real HTTP.

func TestNewRefuses(t *testing.T) {
	rc := &rest.Config{Host: "http://127.0.0.1:1"}
	tests := []struct {
		cfg  Config
		want string
	}{
		{Config{REST: rc, APIKey: "k"}, "no warm pool; set kubernetes_warm_pool"},
		{Config{REST: rc, WarmPool: "p"}, "set CPUOS_API_KEY"},
		{Config{REST: rc, WarmPool: "p", APIKey: "k", RouterURL: "router:8080"}, "kubernetes_router_url \"router:8080\" is not an http(s) URL"},
	}
	for _, tt := range tests {
		if _, err := New(tt.cfg); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("New(%+v) = %v, want %q", tt.cfg, err, tt.want)
		}
	}
}

func TestForbiddenSaysWhichRole(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if r.URL.Path == "/apis/extensions.agents.x-k8s.io/v1beta1" {
			_, _ = w.Write([]byte(`{"kind":"APIResourceList","apiVersion":"v1","groupVersion":"extensions.agents.x-k8s.io/v1beta1","resources":[` +
				`{"name":"sandboxclaims","namespaced":true,"kind":"SandboxClaim","verbs":["create"]},` +
				`{"name":"sandboxwarmpools","namespaced":true,"kind":"SandboxWarmPool","verbs":["get"]}]}`))
			return
		}
		if r.Method == http.MethodGet { // the pool
			_, _ = w.Write([]byte(`{"apiVersion":"extensions.agents.x-k8s.io/v1beta1","kind":"SandboxWarmPool","metadata":{"name":"pool","namespace":"terp"},"spec":{"sandboxTemplateRef":{"name":"t"}}}`))
			return
		}
		w.WriteHeader(http.StatusForbidden)
		_, _ = w.Write([]byte(`{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"Forbidden","code":403,"message":"sandboxclaims.extensions.agents.x-k8s.io is forbidden"}`))
	}))
	defer srv.Close()
	b, err := New(Config{REST: &rest.Config{Host: srv.URL}, Namespace: "terp", WarmPool: "pool", APIKey: "k"})
	if err != nil {
		t.Fatal(err)
	}
	_, err = b.Create(t.Context(), sandbox.Options{})
	var se *SetupError
	if !errors.As(err, &se) || !strings.Contains(err.Error(), `terp may not create SandboxClaims in namespace "terp"`) || !strings.Contains(se.Fix, "rbac.yaml") {
		t.Fatalf("Create when claims are forbidden: %v", err)
	}
}
