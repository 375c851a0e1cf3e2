package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/terpdev/terp/internal/sandbox"
	"github.com/terpdev/terp/internal/sandbox/cpuos"
	"github.com/terpdev/terp/internal/sandbox/local"
	"github.com/terpdev/terp/internal/sandbox/pod"
)

// defaultServeAddr is where `terp sandbox serve` listens and where
// cpuos_url points by default.
const defaultServeAddr = "127.0.0.1:8377"

func newCmdSandbox(f *Factory) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "sandbox <command>",
		Short: "Serve sandboxes to other terps",
		Args:  cobra.NoArgs,
		RunE:  func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	cmd.AddCommand(newCmdSandboxServe(f))
	return cmd
}

func newCmdSandboxServe(f *Factory) *cobra.Command {
	var listen, tokenEnv, isolation string
	var allowRemote bool
	cmd := &cobra.Command{
		Use:   "serve [--listen ADDR] [--token-env VAR] [--isolation bwrap|pod]",
		Short: "Run a cpuos-compatible sandbox server on this machine's local sandboxes",
		Long: `serve speaks the cpuos wire contract (see internal/sandbox/cpuos/contract.go)
on top of this machine's bubblewrap sandboxes. Point a terp at it with
--sandbox cpuos --cpuos-url http://ADDR: for development of the cpuos
backend, or to run the sandboxes of terps elsewhere on this machine.

Every request must carry the bearer token held in the variable --token-env
names (CPUOS_API_KEY by default, which is also what the client sends); serve
refuses to start without one. It listens on loopback only unless
--allow-remote is given; on another network, put it behind TLS.
Live sandboxes are closed when serve stops; paused ones stay on disk.

--isolation pod is for the image of the kubernetes backend (docs/kubernetes.md):
the pod it runs in is the sandbox, so the code runs without bubblewrap, as
serve's own non-root user, with rlimits, bounded output, timeouts that kill
the command's process group and the /work watch; the pod's read-only root,
NetworkPolicy, seccomp profile and runtime class do the rest. It serves one
sandbox at a time in /work, and refuses to run as root.`,
		Example: `  CPUOS_API_KEY=$(openssl rand -hex 16) terp sandbox serve &
  terp ask --sandbox cpuos --cpuos-url http://127.0.0.1:8377 "What is 2**100?"`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			token := strings.TrimSpace(f.Getenv(tokenEnv))
			if token == "" {
				return usagef("sandbox serve needs a bearer token: set %s (or name another variable with --token-env)", tokenEnv)
			}
			if err := checkListen(listen, allowRemote); err != nil {
				return err
			}
			backend, err := servedBackend(f, cmd, isolation)
			if err != nil {
				return err
			}
			var lc net.ListenConfig
			ln, err := lc.Listen(cmd.Context(), "tcp", listen)
			if err != nil {
				return err
			}
			return serveSandboxes(cmd.Context(), f.IO.ErrOut, ln, backend, token)
		},
	}
	cmd.Flags().StringVar(&listen, "listen", defaultServeAddr, "address to listen on")
	cmd.Flags().StringVar(&tokenEnv, "token-env", "CPUOS_API_KEY", "variable holding the bearer token clients must send")
	cmd.Flags().BoolVar(&allowRemote, "allow-remote", false, "allow a non-loopback listen address")
	cmd.Flags().StringVar(&isolation, "isolation", "bwrap", "bwrap: a bubblewrap sandbox per conversation; pod: run the code directly, in a pod that is the sandbox")
	addConfigFlags(cmd, "network-trusted-ranges")
	return cmd
}

// servedBackend is what serve serves: bubblewrap sandboxes on this
// machine, or the pod's one sandbox.
func servedBackend(f *Factory, cmd *cobra.Command, isolation string) (sandbox.Backend, error) {
	switch isolation {
	case "pod":
		return pod.New(pod.Config{KillStrays: true})
	case "bwrap":
	default:
		return nil, usagef("--isolation %q: use bwrap (this machine's sandboxes) or pod (inside a Kubernetes pod)", isolation)
	}
	cfg, err := f.Config(cmd.Flags())
	if err != nil {
		return nil, err
	}
	root, err := sandboxDir(f.Getenv, f.DataDir(), "served-sandboxes")
	if err != nil {
		return nil, err
	}
	return local.New(local.Config{Root: root, HostUIDs: cfg.SandboxUIDs, EgressOptions: egressOptions(cfg)})
}

// checkListen refuses a non-loopback address unless allowRemote.
func checkListen(addr string, allowRemote bool) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return usagef("--listen %q: %v", addr, err)
	}
	if allowRemote || host == "localhost" {
		return nil
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() {
		return nil
	}
	return usagef("--listen %q is not a loopback address; add --allow-remote to serve other machines", addr)
}

// serveSandboxes serves the cpuos contract on ln until ctx ends.
func serveSandboxes(ctx context.Context, log io.Writer, ln net.Listener, backend sandbox.Backend, token string) error {
	srv, err := cpuos.NewServer(backend, token)
	if err != nil {
		return err
	}
	fmt.Fprintf(log, "terp: serving sandboxes on http://%s\n", ln.Addr())
	err = serveHTTP(ctx, ln, srv.Handler(), 10*time.Second, nil, defaultHTTPTimeouts)
	cctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return errors.Join(err, srv.Close(cctx))
}

// abortable is a handler whose requests serveHTTP can end when they
// outlast the grace period: they run in BaseContext's context, and Abort
// cancels it, after which each answers with a status that says why.
type abortable interface {
	BaseContext(net.Listener) context.Context
	Abort()
}

// serveHTTP serves h on ln until ctx ends, then stops accepting and lets the
// requests in flight finish for up to grace; those still running are then
// aborted (when ab is not nil) and given a few seconds to answer. A server
// stopped that way is no error. Clients slower than t allows are cut off.
func serveHTTP(ctx context.Context, ln net.Listener, h http.Handler, grace time.Duration, ab abortable, t httpTimeouts) error {
	hs := t.server(h)
	if ab != nil {
		hs.BaseContext = ab.BaseContext
	}
	done := make(chan error, 1)
	go func() { done <- hs.Serve(ln) }()
	var err error
	select {
	case err = <-done:
	case <-ctx.Done():
		sctx, cancel := context.WithTimeout(context.Background(), grace)
		serr := hs.Shutdown(sctx)
		cancel()
		if serr != nil && ab != nil {
			ab.Abort()
			sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			serr = hs.Shutdown(sctx)
			cancel()
		}
		if serr != nil {
			_ = hs.Close()
		}
		err = <-done
	}
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}
