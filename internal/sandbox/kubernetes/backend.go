// Package kubernetes runs each conversation's sandbox in a pod of its own,
// through kubernetes-sigs/agent-sandbox: Create makes a SandboxClaim
// (extensions.agents.x-k8s.io/v1beta1) from a SandboxWarmPool, waits until
// the claim is Ready, and talks terp's own sandbox contract (package cpuos)
// to `terp sandbox serve --isolation pod` in that pod: in the cluster by the
// sandbox's service name or pod IP, from outside through agent-sandbox's
// sandbox-router (X-Sandbox-ID, X-Sandbox-Namespace, X-Sandbox-Port).
//
// The session id is "<claim>/<id in the pod>": stored with the
// conversation, it lets any terp serve replica find the pod again. Pause
// stops the pod's processes and keeps the claim, so /work stays on the
// pod's emptyDir; Close deletes the claim, and agent-sandbox deletes the
// sandbox and its pod. The claim's lifecycle.shutdownTime is the sandbox's
// lifetime, so a terp that dies leaves nothing running past it.
//
// Why not operatingMode: Suspended for Pause: agent-sandbox v1.0.1 offers
// it on a Sandbox, not on a claim, and suspending deletes the pod; /work
// would survive only on a volume claim, and a claim with
// volumeClaimTemplates is always cold-started, losing the warm pool that
// makes a new conversation's first step fast. See docs/kubernetes.md.
package kubernetes

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/terpdev/terp/internal/sandbox"
	"github.com/terpdev/terp/internal/sandbox/cpuos"
)

var _ sandbox.Backend = (*Backend)(nil)

// Defaults for what Config leaves at zero.
const (
	DefaultPort         = 8377
	DefaultReadyTimeout = 2 * time.Minute
	DefaultWarmPool     = "terp-python"
)

// Config configures the backend.
type Config struct {
	// Namespace holds the warm pool and the claims; "default" when empty.
	Namespace string
	// WarmPool names the SandboxWarmPool claims are taken from.
	WarmPool string
	// RouterURL, when set, is agent-sandbox's sandbox-router, through
	// which terp reaches the pods from outside the cluster; when empty terp
	// dials the sandbox's service name or pod IP, from inside the cluster.
	RouterURL string
	// Port is where terp sandbox serve listens in the pod; DefaultPort
	// when zero.
	Port int
	// Kubeconfig is the kubeconfig file; when empty terp uses the pod's
	// service account in a cluster, else $KUBECONFIG or ~/.kube/config.
	Kubeconfig string
	// REST, when set, is used instead of Kubeconfig (tests).
	REST *rest.Config
	// APIKey is the bearer token the pods' servers require (the Secret
	// the SandboxTemplate gives them); APIKeyEnv names its variable.
	APIKey    string
	APIKeyEnv string
	// ReadyTimeout bounds the wait for a claim to become Ready;
	// DefaultReadyTimeout when zero.
	ReadyTimeout time.Duration
	// HTTPClient reaches the pods; a plain client when nil.
	HTTPClient *http.Client
}

// Backend creates sandboxes as SandboxClaims. It is safe for concurrent
// use.
type Backend struct {
	cfg    Config
	dyn    dynamic.Interface
	apiURL string       // the API server's root
	api    *http.Client // to it, with the configured credentials

	checkMu sync.Mutex
	checked bool
}

// New builds the clients; it makes no request.
func New(cfg Config) (*Backend, error) {
	if cfg.Namespace == "" {
		cfg.Namespace = "default"
	}
	if cfg.WarmPool == "" {
		return nil, errors.New("kubernetes sandbox: no warm pool; set kubernetes_warm_pool (--kubernetes-warm-pool) to a SandboxWarmPool in " + cfg.Namespace)
	}
	if cfg.Port == 0 {
		cfg.Port = DefaultPort
	}
	if cfg.ReadyTimeout <= 0 {
		cfg.ReadyTimeout = DefaultReadyTimeout
	}
	if cfg.APIKeyEnv == "" {
		cfg.APIKeyEnv = "CPUOS_API_KEY"
	}
	if cfg.APIKey == "" {
		return nil, fmt.Errorf("kubernetes sandbox: no token for the pods' sandbox servers; set %s to the Secret the SandboxTemplate gives them (docs/kubernetes.md)", cfg.APIKeyEnv)
	}
	if cfg.RouterURL != "" {
		u, err := url.Parse(cfg.RouterURL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, fmt.Errorf("kubernetes sandbox: kubernetes_router_url %q is not an http(s) URL", cfg.RouterURL)
		}
	}
	rc := cfg.REST
	if rc == nil {
		var err error
		if rc, err = restConfig(cfg.Kubeconfig); err != nil {
			return nil, err
		}
	}
	dyn, err := dynamic.NewForConfig(rc)
	if err != nil {
		return nil, fmt.Errorf("kubernetes sandbox: %w", err)
	}
	// Discovery by hand: client-go's discovery client registers every
	// built-in API group, which would double the size of terp's binary.
	api, err := rest.HTTPClientFor(rc)
	if err != nil {
		return nil, fmt.Errorf("kubernetes sandbox: %w", err)
	}
	apiURL, _, err := rest.DefaultServerUrlFor(rc)
	if err != nil {
		return nil, fmt.Errorf("kubernetes sandbox: %w", err)
	}
	if cfg.HTTPClient == nil {
		cfg.HTTPClient = &http.Client{}
	}
	return &Backend{cfg: cfg, dyn: dyn, api: api, apiURL: strings.TrimRight(apiURL.String(), "/")}, nil
}

// restConfig is the in-cluster service account when there is one and no
// kubeconfig was named, else the kubeconfig.
func restConfig(kubeconfig string) (*rest.Config, error) {
	if kubeconfig == "" {
		if rc, err := rest.InClusterConfig(); err == nil {
			return rc, nil
		}
	}
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	if kubeconfig != "" {
		rules.ExplicitPath = kubeconfig
	}
	rc, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{}).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("kubernetes sandbox: no cluster to talk to: not in a pod, and no kubeconfig (set kubernetes_kubeconfig or KUBECONFIG): %w", err)
	}
	return rc, nil
}

// Check makes sure the cluster serves agent-sandbox's API and that the warm
// pool exists and may be read, and says what is missing. terp doctor calls
// it; the first Create does too.
func (b *Backend) Check(ctx context.Context) error {
	b.checkMu.Lock()
	defer b.checkMu.Unlock()
	if b.checked {
		return nil
	}
	gv := groupVersion.String()
	res, err := b.resources(ctx, gv)
	if err != nil {
		if apierrors.IsNotFound(err) {
			return &SetupError{Problem: "the cluster does not serve " + gv + ": agent-sandbox's CRDs are not installed",
				Fix: "install agent-sandbox v1.0.1 with its extensions (docs/kubernetes.md, \"Install agent-sandbox\")", Err: err}
		}
		return b.apiError(err, "reach the API server")
	}
	served := map[string]bool{}
	for _, r := range res.APIResources {
		served[r.Name] = true
	}
	for _, r := range []string{claims.Resource, warmPools.Resource} {
		if !served[r] {
			return &SetupError{Problem: "the cluster serves " + gv + " without " + r,
				Fix: "install agent-sandbox v1.0.1 with its extensions (docs/kubernetes.md)"}
		}
	}
	_, err = b.dyn.Resource(warmPools).Namespace(b.cfg.Namespace).Get(ctx, b.cfg.WarmPool, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return &SetupError{Problem: fmt.Sprintf("there is no SandboxWarmPool %q in namespace %q", b.cfg.WarmPool, b.cfg.Namespace),
			Fix: "apply the manifests (kubectl apply -k examples/kubernetes) or set kubernetes_warm_pool and kubernetes_namespace to the pool you made", Err: err}
	}
	if err != nil {
		return b.apiError(err, "get SandboxWarmPool "+b.cfg.WarmPool)
	}
	b.checked = true
	return nil
}

// resources is the API server's discovery document for gv; an API
// status error (404 when gv is not served) when it answers with one.
func (b *Backend) resources(ctx context.Context, gv string) (*metav1.APIResourceList, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, b.apiURL+"/apis/"+gv, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "application/json")
	resp, err := b.api.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		var st metav1.Status
		if json.Unmarshal(body, &st) != nil || st.Code == 0 {
			st = metav1.Status{Code: int32(resp.StatusCode), Message: strings.TrimSpace(string(body))}
			switch resp.StatusCode {
			case http.StatusNotFound:
				st.Reason = metav1.StatusReasonNotFound
			case http.StatusForbidden:
				st.Reason = metav1.StatusReasonForbidden
			case http.StatusUnauthorized:
				st.Reason = metav1.StatusReasonUnauthorized
			}
		}
		return nil, &apierrors.StatusError{ErrStatus: st}
	}
	var list metav1.APIResourceList
	if err := json.Unmarshal(body, &list); err != nil {
		return nil, fmt.Errorf("the API server's discovery of %s: %w", gv, err)
	}
	return &list, nil
}

// apiError turns the API's refusals into what to do about them.
func (b *Backend) apiError(err error, what string) error {
	if apierrors.IsForbidden(err) || apierrors.IsUnauthorized(err) {
		return &SetupError{Problem: fmt.Sprintf("terp may not %s in namespace %q", what, b.cfg.Namespace),
			Fix: "bind terp's service account to the Role in examples/kubernetes/rbac.yaml (get on sandboxwarmpools; create, get, list, watch, patch, delete on sandboxclaims)", Err: err}
	}
	return fmt.Errorf("kubernetes sandbox: %s: %w", what, err)
}

// SetupError says what the cluster lacks and what to do.
type SetupError struct {
	Problem string
	Fix     string
	Err     error
}

func (e *SetupError) Error() string { return "kubernetes sandbox: " + e.Problem + ": " + e.Fix }

func (e *SetupError) Unwrap() error { return e.Err }

// Create claims a sandbox from the warm pool, waits until it is Ready and
// creates terp's sandbox in its pod.
func (b *Backend) Create(ctx context.Context, opt sandbox.Options) (sandbox.Sandbox, error) {
	if err := b.Check(ctx); err != nil {
		return nil, err
	}
	lifetime := opt.Timeout
	if lifetime <= 0 {
		lifetime = 30 * time.Minute
	}
	claim := &sandboxClaim{
		TypeMeta: metav1.TypeMeta{APIVersion: groupVersion.String(), Kind: "SandboxClaim"},
		ObjectMeta: metav1.ObjectMeta{
			GenerateName: "terp-",
			Namespace:    b.cfg.Namespace,
			Labels:       map[string]string{"app.kubernetes.io/managed-by": "terp"},
			Annotations:  map[string]string{lifetimeAnnotation: lifetime.String()},
		},
	}
	claim.Spec.WarmPoolRef.Name = b.cfg.WarmPool
	claim.Spec.Lifecycle = &claimLifecycle{ShutdownTime: shutdownTime(lifetime), ShutdownPolicy: "Delete"}
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(claim)
	if err != nil {
		return nil, err
	}
	made, err := b.dyn.Resource(claims).Namespace(b.cfg.Namespace).Create(ctx, &unstructured.Unstructured{Object: obj}, metav1.CreateOptions{FieldValidation: "Strict"})
	if err != nil {
		return nil, b.apiError(err, "create SandboxClaims")
	}
	name := made.GetName()
	pod, err := b.ready(ctx, name, made.GetResourceVersion())
	if err == nil {
		var inner sandbox.Sandbox
		if inner, err = pod.Create(ctx, opt); err == nil {
			return &Sandbox{b: b, claim: name, Sandbox: inner}, nil
		}
		err = fmt.Errorf("kubernetes sandbox: claim %s is Ready but its pod's sandbox server refused: %w", name, err)
	}
	// Nothing may be left holding a pod.
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	_ = b.deleteClaim(dctx, name)
	return nil, err
}

// Resume finds the claim named in id and connects to its pod's sandbox. A
// claim that is gone is sandbox.ErrExpired.
func (b *Backend) Resume(ctx context.Context, id sandbox.SessionID) (sandbox.Sandbox, error) {
	name, inner, ok := strings.Cut(string(id), "/")
	if !ok || name == "" || inner == "" {
		return nil, fmt.Errorf("resume sandbox %q: not a kubernetes sandbox id (claim/id): %w", id, sandbox.ErrExpired)
	}
	got, err := b.dyn.Resource(claims).Namespace(b.cfg.Namespace).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("resume sandbox %s: its SandboxClaim is gone: %w", id, sandbox.ErrExpired)
	}
	if err != nil {
		return nil, b.apiError(err, "get SandboxClaims")
	}
	if got.GetDeletionTimestamp() != nil {
		return nil, fmt.Errorf("resume sandbox %s: its SandboxClaim is being deleted: %w", id, sandbox.ErrExpired)
	}
	// The sandbox's lifetime starts again, as on every backend: so does the
	// claim's.
	if lifetime, err := time.ParseDuration(got.GetAnnotations()[lifetimeAnnotation]); err == nil && lifetime > 0 {
		patch, _ := json.Marshal(map[string]any{"spec": map[string]any{"lifecycle": map[string]any{"shutdownTime": shutdownTime(lifetime)}}})
		if got, err = b.dyn.Resource(claims).Namespace(b.cfg.Namespace).Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
			if apierrors.IsNotFound(err) {
				return nil, fmt.Errorf("resume sandbox %s: its SandboxClaim is gone: %w", id, sandbox.ErrExpired)
			}
			return nil, b.apiError(err, "patch SandboxClaims")
		}
	}
	pod, err := b.ready(ctx, name, got.GetResourceVersion())
	if err != nil {
		return nil, err
	}
	s, err := pod.Resume(ctx, sandbox.SessionID(inner))
	if err != nil {
		var ae *cpuos.APIError
		if errors.As(err, &ae) && ae.Status == http.StatusNotFound {
			return nil, fmt.Errorf("resume sandbox %s: its pod no longer holds it (the container restarted?): %w", id, sandbox.ErrExpired)
		}
		return nil, err
	}
	return &Sandbox{b: b, claim: name, Sandbox: s}, nil
}

// ready waits, through a watch, until the claim is Ready and names an
// address, and returns a client of its pod's sandbox server.
func (b *Backend) ready(ctx context.Context, name, rv string) (*cpuos.Backend, error) {
	ctx, cancel := context.WithTimeout(ctx, b.cfg.ReadyTimeout)
	defer cancel()
	rc := b.dyn.Resource(claims).Namespace(b.cfg.Namespace)
	var last *sandboxClaim
	for {
		got, err := rc.Get(ctx, name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			return nil, fmt.Errorf("kubernetes sandbox: SandboxClaim %s was deleted while terp waited for it: %w", name, sandbox.ErrExpired)
		case err != nil && ctx.Err() == nil:
			return nil, b.apiError(err, "get SandboxClaims")
		case err == nil:
			if last, err = toClaim(got); err != nil {
				return nil, err
			}
			if pod, ok := b.podClient(last); ok {
				return pod, nil
			}
			rv = got.GetResourceVersion()
		}
		if ctx.Err() != nil {
			return nil, b.notReady(name, last)
		}
		w, err := rc.Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + name, ResourceVersion: rv})
		if err != nil {
			if ctx.Err() != nil {
				return nil, b.notReady(name, last)
			}
			return nil, b.apiError(err, "watch SandboxClaims")
		}
		for ev := range w.ResultChan() {
			if ev.Type == watch.Deleted {
				w.Stop()
				return nil, fmt.Errorf("kubernetes sandbox: SandboxClaim %s was deleted while terp waited for it: %w", name, sandbox.ErrExpired)
			}
			u, ok := ev.Object.(*unstructured.Unstructured)
			if !ok {
				continue // a watch error: start again from a Get
			}
			if last, err = toClaim(u); err != nil {
				w.Stop()
				return nil, err
			}
			if pod, ok := b.podClient(last); ok {
				w.Stop()
				return pod, nil
			}
		}
		w.Stop()
	}
}

// lifetimeAnnotation records a claim's sandbox lifetime, so that Resume, in
// any replica, can move the claim's shutdownTime as far again.
const lifetimeAnnotation = "terp.dev/sandbox-lifetime"

// shutdownTime is a little past a sandbox's lifetime from now, so that a
// conversation resumed near its end still finds the pod; what a dead terp
// left is removed then.
func shutdownTime(lifetime time.Duration) *metav1.Time {
	return &metav1.Time{Time: time.Now().Add(lifetime + time.Minute).UTC().Truncate(time.Second)}
}

func toClaim(u *unstructured.Unstructured) (*sandboxClaim, error) {
	var c sandboxClaim
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &c); err != nil {
		return nil, fmt.Errorf("kubernetes sandbox: SandboxClaim %s: %w", u.GetName(), err)
	}
	return &c, nil
}

// notReady says what the claim was waiting for when time ran out.
func (b *Backend) notReady(name string, c *sandboxClaim) error {
	state := "no status yet: is agent-sandbox's controller running, with its extensions enabled?"
	if c != nil {
		if cond := meta(c.Status.Conditions, "Ready"); cond != nil {
			state = fmt.Sprintf("Ready is %s (%s: %s)", cond.Status, cond.Reason, cond.Message)
		}
		if c.Status.Sandbox.Name != "" && c.Status.Sandbox.ServiceFQDN == "" && len(c.Status.Sandbox.PodIPs) == 0 {
			state += "; its sandbox " + c.Status.Sandbox.Name + " has no address yet"
		}
	}
	return fmt.Errorf("kubernetes sandbox: SandboxClaim %s in %s was not Ready within %s: %s; check the warm pool %q (kubectl -n %s get sandboxwarmpool,sandbox,pod)",
		name, b.cfg.Namespace, b.cfg.ReadyTimeout, state, b.cfg.WarmPool, b.cfg.Namespace)
}

func meta(conds []metav1.Condition, t string) *metav1.Condition {
	for i := range conds {
		if conds[i].Type == t {
			return &conds[i]
		}
	}
	return nil
}

// podClient is a client of the claim's pod once the claim is Ready with an
// address.
func (b *Backend) podClient(c *sandboxClaim) (*cpuos.Backend, bool) {
	cond := meta(c.Status.Conditions, "Ready")
	st := c.Status.Sandbox
	if cond == nil || cond.Status != metav1.ConditionTrue || st.Name == "" {
		return nil, false
	}
	port := strconv.Itoa(b.cfg.Port)
	hc := b.cfg.HTTPClient
	var base string
	switch {
	case b.cfg.RouterURL != "":
		base = b.cfg.RouterURL
		hc = &http.Client{Transport: routed{
			next: transport(hc),
			headers: map[string]string{
				"X-Sandbox-ID": st.Name, "X-Sandbox-Namespace": b.cfg.Namespace, "X-Sandbox-Port": port,
				cpuos.HeaderToken: b.cfg.APIKey,
			},
		}, Timeout: hc.Timeout}
	case st.ServiceFQDN != "":
		base = "http://" + st.ServiceFQDN + ":" + port
	case len(st.PodIPs) > 0:
		base = "http://" + hostPort(st.PodIPs[0], port)
	default:
		return nil, false
	}
	pod, err := cpuos.New(cpuos.Config{BaseURL: base, APIKey: b.cfg.APIKey, APIKeyEnv: b.cfg.APIKeyEnv, HTTPClient: hc})
	if err != nil {
		return nil, false
	}
	return pod, true
}

func hostPort(ip, port string) string {
	if strings.Contains(ip, ":") {
		return "[" + ip + "]:" + port
	}
	return ip + ":" + port
}

func transport(hc *http.Client) http.RoundTripper {
	if hc.Transport != nil {
		return hc.Transport
	}
	return http.DefaultTransport
}

// routed adds sandbox-router's headers to every request.
type routed struct {
	next    http.RoundTripper
	headers map[string]string
}

func (r routed) RoundTrip(req *http.Request) (*http.Response, error) {
	req = req.Clone(req.Context())
	for k, v := range r.headers {
		req.Header.Set(k, v)
	}
	return r.next.RoundTrip(req)
}

func (b *Backend) deleteClaim(ctx context.Context, name string) error {
	policy := metav1.DeletePropagationBackground
	err := b.dyn.Resource(claims).Namespace(b.cfg.Namespace).Delete(ctx, name, metav1.DeleteOptions{PropagationPolicy: &policy})
	if err != nil && !apierrors.IsNotFound(err) {
		return b.apiError(err, "delete SandboxClaims")
	}
	return nil
}

// Sandbox is a claimed pod's sandbox: the pod server's, with the claim's
// name in its id.
type Sandbox struct {
	sandbox.Sandbox
	b     *Backend
	claim string
}

// Claim is the name of the SandboxClaim holding the sandbox's pod.
func (s *Sandbox) Claim() string { return s.claim }

// ID is "<claim>/<id in the pod>", which Resume accepts.
func (s *Sandbox) ID() sandbox.SessionID {
	return sandbox.SessionID(s.claim + "/" + string(s.Sandbox.ID()))
}

// Pause stops the code in the pod and keeps the claim and /work.
func (s *Sandbox) Pause(ctx context.Context) (sandbox.SessionID, error) {
	if _, err := s.Sandbox.Pause(ctx); err != nil {
		return "", err
	}
	return s.ID(), nil
}

// Close deletes the claim; agent-sandbox removes the sandbox and its pod.
// The pod's server is told first, so a pod that lingers holds no code.
func (s *Sandbox) Close(ctx context.Context) error {
	cerr := s.Sandbox.Close(ctx)
	var ae *cpuos.APIError
	if errors.As(cerr, &ae) && ae.Status == http.StatusNotFound {
		cerr = nil
	}
	return errors.Join(s.b.deleteClaim(ctx, s.claim), cerrIfLive(cerr))
}

// cerrIfLive drops the pod server's failure to close when the pod is
// already gone: deleting the claim is what counts.
func cerrIfLive(err error) error {
	if err == nil {
		return nil
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		return nil
	}
	return err
}
