package cli

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/terpdev/terp/internal/config"
	"github.com/terpdev/terp/internal/sandbox"
	"github.com/terpdev/terp/internal/sandbox/kubernetes"
)

// kubernetesChecks stand in for the sandbox check when the sandbox is
// kubernetes: can terp talk to a cluster, does it serve agent-sandbox with
// the warm pool terp claims from (and may terp read it), and does a claimed
// pod run Python with the libraries. Each names what is missing.
func kubernetesChecks(ctx context.Context, f *Factory, cfg *config.Config) []check {
	cluster := check{Name: "kubernetes"}
	sbx := check{Name: "sandbox"}
	backend, err := f.NewBackend(cfg)
	if err != nil {
		cluster.Status, cluster.Detail = checkFail, err.Error()
		cluster.Fix = "Run terp where it has a service account (the Deployment in examples/kubernetes), or set kubernetes_kubeconfig (KUBECONFIG); " +
			cfg.CpuosAPIKeyEnv + " must hold the sandbox pods' token (docs/kubernetes.md)."
		sbx.Status, sbx.Detail = checkSkip, "needs a cluster"
		return []check{cluster, sbx}
	}
	kb, ok := backend.(*kubernetes.Backend)
	if !ok { // a test's stand-in backend
		return []check{sandboxCheck(ctx, f, cfg)}
	}
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := kb.Check(cctx); err != nil {
		cluster.Status, cluster.Detail = checkFail, err.Error()
		var se *kubernetes.SetupError
		if errors.As(err, &se) {
			cluster.Detail, cluster.Fix = se.Problem, strings.ToUpper(se.Fix[:1])+se.Fix[1:]+"."
		}
		sbx.Status, sbx.Detail = checkSkip, "needs agent-sandbox and the warm pool"
		return []check{cluster, sbx}
	}
	cluster.Status = checkOK
	cluster.Detail = fmt.Sprintf("agent-sandbox serves SandboxClaims; warm pool %q in namespace %q", cfg.KubernetesWarmPool, cfg.KubernetesNamespace)
	sctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	began := time.Now()
	s, err := kb.Create(sctx, sandbox.Options{Timeout: 5 * time.Minute})
	if err != nil {
		sbx.Status, sbx.Detail = checkFail, "cannot claim a sandbox: "+err.Error()
		sbx.Fix = "Look at the pool's sandboxes and pods (kubectl -n " + cfg.KubernetesNamespace + " get sandboxwarmpool,sandboxclaim,sandbox,pod) and the pods' logs; the token in " + cfg.CpuosAPIKeyEnv + " must be the one the SandboxTemplate gives the pods."
		return []check{cluster, sbx}
	}
	defer func() { _ = s.Close(context.WithoutCancel(ctx)) }()
	claimed := time.Since(began)
	out, err := s.Exec(sctx, cpuosImports, sandbox.ExecOptions{Timeout: time.Minute})
	switch {
	case err != nil:
		sbx.Status, sbx.Detail = checkFail, "cannot run Python in the claimed pod: "+err.Error()
		sbx.Fix = "Check the sandbox pod's log; its image must be the one make kubernetes-sandbox-image builds."
	case out.ExitCode != 0 || !strings.HasPrefix(out.Stdout, "terp-doctor "):
		sbx.Status, sbx.Detail = checkFail, fmt.Sprintf("Python in the pod failed (exit %d): %s", out.ExitCode, strings.TrimSpace(out.Stderr))
		sbx.Fix = "The sandbox image needs python3 with numpy, pandas and matplotlib: build it with make kubernetes-sandbox-image."
	default:
		sbx.Status = checkOK
		sbx.Detail = fmt.Sprintf("claimed a pod in %s; Python %s with numpy, pandas and matplotlib", claimed.Round(time.Millisecond), strings.TrimSpace(strings.TrimPrefix(out.Stdout, "terp-doctor ")))
	}
	return []check{cluster, sbx}
}
