package cli

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/terpdev/terp/internal/config"
	"github.com/terpdev/terp/internal/conversation"
	terpmcp "github.com/terpdev/terp/internal/mcp"
	"github.com/terpdev/terp/internal/sandbox"
	"github.com/terpdev/terp/internal/serve"
)

// mcpOptions holds everything `terp mcp` needs, parsed from its flags.
type mcpOptions struct {
	f     *Factory
	flags *pflag.FlagSet
	// http is the address of the Streamable HTTP (and SSE) listener; ""
	// serves stdio.
	http string
	// grace is how long a stopping HTTP server lets calls finish.
	grace time.Duration
	// name is the server's name told to clients (see mcp.Config.Name).
	name string
	// expireAfter is how long an unused sandbox is kept.
	expireAfter time.Duration
	// logFormat is one of logFormats.
	logFormat string
	// maxRequest bounds an HTTP request's body.
	maxRequest int64
	// warm is how many sandboxes are kept made ahead (see serveOptions).
	warm int
}

// mcpConfigFlags are the run flags that make sense without a model.
var mcpConfigFlags = []string{
	"sandbox", "exec-mode", "prewarm", "timeout", "interrupt-grace", "sandbox-timeout", "max-stdout", "max-stderr",
	"memory-limit", "process-limit", "file-size-limit", "max-download-size",
	"cpuos-url", "cpuos-template", "docker-image", "kubernetes-namespace", "kubernetes-warm-pool", "kubernetes-router-url", "kubernetes-kubeconfig",
	"network", "network-allow", "network-trusted-ranges",
}

// mcpTokenEnv holds the bearer token HTTP clients must send.
const mcpTokenEnv = "TERP_MCP_TOKEN"

func newCmdMCP(f *Factory, runF func(context.Context, *mcpOptions) error) *cobra.Command {
	opts := &mcpOptions{f: f}
	cmd := &cobra.Command{
		Use:   "mcp [--http ADDR]",
		Short: "Serve terp's sandboxes to MCP clients: stateful Python with charts and files",
		Long: `Mcp is a Model Context Protocol server: an MCP client (a desktop assistant, an
editor, an agent framework) gets terp's sandbox with a persistent Python kernel.
Its tools are python (also named run_python: one tool), upload_file,
list_files, download_file and reset; files the code saves come back as images
(charts) or resource links, readable as terp://work/PATH resources.

Each client session has its own sandbox, never shared: over stdio (the
default, for a client that starts terp mcp itself) the process's one session;
over HTTP each MCP session, or each x-session-id a client sends (vLLM does),
or, for a client of the sessionless protocol (2026-07-28), each handle terp
mints: the first python or upload_file call's result gives it, and later
calls pass it as their "sandbox" argument. A sandbox idle for idle_pause is
paused (files kept, variables lost) and woken by the next call; it is closed
with its session, or, when an id or a handle names it, once unused for
--expire-after; its conversation is kept, for terp sessions. A sandbox an id
or a handle names (a stdio session's has a handle too, which its first result
gives) is paused when terp mcp stops, and the next terp mcp on the same data
directory resumes it at the next call that names it: files kept, Python
restarted. No model is involved: the client writes the code.

--http ADDR serves Streamable HTTP (at any path, such as /mcp) and the legacy
SSE transport at /sse, and /healthz. Clients send "Authorization: Bearer
$TERP_MCP_TOKEN"; without TERP_MCP_TOKEN only a loopback address is served,
to anyone on this machine. It logs each request, each run of code and each
sandbox opened, closed and expired on stderr (--log-format json for JSON
lines); over stdio only warnings.

See docs/mcp.md for the tools' schemas and client configuration.`,
		Example: `  terp mcp                                  # stdio, as an MCP client starts it
  terp mcp --http 127.0.0.1:8765            # http://127.0.0.1:8765/mcp, and /sse
  TERP_MCP_TOKEN=$(openssl rand -hex 16) terp mcp --http 0.0.0.0:8765`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			opts.flags = cmd.Flags()
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return runMCP(cmd.Context(), opts)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&opts.http, "http", "", "serve Streamable HTTP and SSE on `ADDR` instead of stdio")
	fl.StringVar(&opts.name, "name", "terp", "the server's `NAME` told to clients; vLLM's --tool-server uses it as the tool namespace, and gpt-oss's python tool wants python")
	fl.DurationVar(&opts.grace, "grace", 10*time.Second, "on SIGTERM, how long running calls may finish (--http)")
	fl.DurationVar(&opts.expireAfter, "expire-after", terpmcp.DefaultExpireAfter, "close a sandbox that an x-session-id or a handle names, or an HTTP session, after `DURATION` without calls")
	opts.maxRequest = terpmcp.DefaultMaxRequest
	fl.Var(sizeValue{&opts.maxRequest}, "max-request-size", "largest HTTP request body (`SIZE`): an upload_file carries its file in it as base64, a third larger")
	fl.StringVar(&opts.logFormat, "log-format", logFormats[0], "the log's `FORMAT` on stderr: "+strings.Join(logFormats, " or "))
	fl.IntVar(&opts.warm, "warm", 1, "sandboxes to keep made ahead, with Python started and the prewarm imported, for the next sessions (`N`; 0: none)")
	if err := cmd.RegisterFlagCompletionFunc("log-format", completeChoices(logFormats)); err != nil {
		panic(err)
	}
	addConfigFlags(cmd, mcpConfigFlags...)
	return cmd
}

func runMCP(ctx context.Context, opts *mcpOptions) error {
	f := opts.f
	token := strings.TrimSpace(f.Getenv(mcpTokenEnv))
	if opts.http != "" && token == "" {
		if err := checkListen(opts.http, false); err != nil {
			return usagef("--http %s is not a loopback address: set %s to the token clients must send", opts.http, mcpTokenEnv)
		}
	}
	if opts.expireAfter <= 0 {
		return usagef("--expire-after must be above 0, not %s", opts.expireAfter)
	}
	if !slices.Contains(logFormats, opts.logFormat) {
		return usagef("--log-format is one of %s, not %q", strings.Join(logFormats, ", "), opts.logFormat)
	}
	if opts.warm < 0 || opts.warm > maxWarm {
		return usagef("--warm is %d: give between 0 (none) and %d sandboxes kept ready", opts.warm, maxWarm)
	}
	cfg, err := f.Config(onlyFlags(opts.flags, mcpConfigFlags))
	if err != nil {
		return err
	}
	// A client that starts terp mcp shows its stderr as the server's log,
	// or keeps it in a file: warnings only, there.
	level := slog.LevelInfo
	if opts.http == "" {
		level = slog.LevelWarn
	}
	log := serverLogger(f.IO.ErrOut, opts.logFormat, level)
	for _, w := range cfg.Warnings() {
		log.Warn(w)
	}
	// One backend serves every session's sandbox.
	backend, err := f.NewBackend(cfg)
	if err != nil {
		return err
	}
	st, err := f.Store()
	if err != nil {
		return err
	}
	svc := conversation.New(conversation.Deps{
		Store:      st,
		NewBackend: func(*config.Config) (sandbox.Backend, error) { return backend, nil },
		Warm:       opts.warm,
		Log:        log,
	})
	defer svc.Close()
	// The sandboxes are containers of a terp serve host, which keeps their
	// records in a directory of their own (not terp serve's, whose records
	// are its clients'). Over HTTP it checks the token, bounds and logs
	// the requests; over stdio it serves no HTTP, and the one session is
	// the principal "local"'s.
	var keys map[string]serve.Principal
	if token != "" && opts.http != "" {
		keys = map[string]serve.Principal{token: {Name: mcpTokenEnv}}
	}
	host, err := serve.New(serve.Config{Conversations: svc, Settings: cfg, Keys: keys, NoAuth: len(keys) == 0,
		Caps: serve.Caps{Request: opts.maxRequest}, DataDir: filepath.Join(f.DataDir(), "mcp"), Log: log})
	if err != nil {
		return err
	}
	srv := terpmcp.New(terpmcp.Config{Host: host, Settings: cfg, Name: opts.name, Version: versionString(),
		Log: log, ExpireAfter: opts.expireAfter})
	// The first session's sandbox is ready before its first call.
	if err := srv.KeepWarm(); err != nil {
		return err
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		srv.Close(cctx)
		host.Close(cctx)
	}()
	if opts.http == "" {
		err := srv.Run(ctx, &mcp.StdioTransport{})
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	host.Register(srv.Protocol())
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", opts.http)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", opts.http, err)
	}
	defer func() { _ = ln.Close() }()
	fmt.Fprintf(f.IO.ErrOut, "terp: serving MCP on http://%s/mcp (Streamable HTTP) and http://%s/sse (SSE), %s sandboxes\n",
		ln.Addr(), ln.Addr(), cfg.Sandbox)
	return serveHTTP(ctx, ln, host.Handler(), opts.grace, nil, defaultHTTPTimeouts)
}
