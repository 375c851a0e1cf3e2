package cli

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/terpdev/terp/internal/agent"
	"github.com/terpdev/terp/internal/config"
	"github.com/terpdev/terp/internal/conversation"
	"github.com/terpdev/terp/internal/sandbox"
	"github.com/terpdev/terp/internal/serve"
	"github.com/terpdev/terp/internal/serve/jupyter"
	"github.com/terpdev/terp/internal/serve/librechat"
	"github.com/terpdev/terp/internal/serve/openaiapi"
)

// serveOptions holds everything `terp serve` needs, parsed from its flags.
type serveOptions struct {
	f        *Factory
	flags    *pflag.FlagSet
	listen   string
	keysFile string
	noAuth   bool
	// aliasSuffix and steps are the chat completions' alias suffix and
	// where they show the steps; see serve.Config.
	aliasSuffix string
	steps       string
	// grace is how long a stopping server lets running requests finish;
	// shutdownDelay how long before that it serves on with /readyz
	// saying it is stopping.
	grace         time.Duration
	shutdownDelay time.Duration
	// store is where the state is kept (see openServeStores); advertise
	// is the address other replicas sharing it reach this one at.
	store     string
	advertise string
	// publicURL is where clients reach the server, for the links in its
	// answers; linkLifetime how long those links work. See serve.Link.
	publicURL    string
	linkLifetime time.Duration
	// metricsListen is the address of the metrics' own listener; "" serves
	// none.
	metricsListen string
	// logFormat is one of logFormats; logDebug logs what clients send.
	logFormat string
	logDebug  bool
	// limits are what a key may use unless its line in the keys file says
	// otherwise, caps bound the whole server, timeouts how slowly a client
	// may send; see addLimitFlags.
	limits   serve.Limits
	caps     serve.Caps
	timeouts httpTimeouts
	// librechat are the settings of LibreChat's signed tokens; see
	// addLibreChatFlags.
	librechat libreChatFlags
	// warm is how many sandboxes the server keeps made ahead for each
	// kind of container (conversation.Deps.Warm).
	warm int
}

// maxWarm bounds --warm: each warm sandbox holds an interpreter with the
// data libraries imported (about 100 MB).
const maxWarm = 64

// logFormats are the formats of terp serve's log; the first is the default.
var logFormats = []string{"text", "json"}

// serveConfigFlags are the run flags that make sense for a server: not
// --out, since files stay in the containers.
var serveConfigFlags = batchConfigFlags

func newCmdServe(f *Factory, runF func(context.Context, *serveOptions) error) *cobra.Command {
	opts := &serveOptions{f: f}
	cmd := &cobra.Command{
		Use:   "serve [--listen ADDR] [--keys-file PATH | --no-auth] [--alias-suffix SUFFIX] [--steps MODE] [--metrics-listen ADDR] [--log-format text|json] [limits]",
		Short: "Serve the code interpreter as an OpenAI-compatible API for any open model",
		Long: `Serve speaks the OpenAI API to its clients and runs the code interpreter for
them: the Responses API with the code_interpreter tool, containers and files,
in terp's sandboxes, with the model server terp is configured for (--base-url,
--model) upstream. An app written for OpenAI's hosted code interpreter works
against it by changing its base URL and key.

Chat completions run the code interpreter when the request has the tool
"tools": [{"type": "code_interpreter"}] (as LiteLLM sends it), or names a
model with the alias suffix, MODEL+python, for clients that cannot add a
tool (Open WebUI, Continue); /v1/models lists an alias for each model
upstream, and --alias-suffix changes the suffix. The answer is one assistant
message, with the container's id in the X-Terp-Container header: send it
back to go on with the same variables and files. The steps (code and
output) are shown in reasoning_content, which chat UIs fold as thinking, in
the content before the answer, or not at all: --steps reasoning|content|none
sets the default, a request's "terp_steps" field chooses for itself. Files
the code saved are Markdown links to their content. Chat completions without
the tool or an alias go to the model server as they are, streamed or not.

Files the code saved are linked in answers at URLs a browser opens without
a key: each a signed copy of the file as it was, kept for --link-lifetime
(30 days) after the container is gone, served as a download unless it is an
image. Behind a proxy, --public-url https://HOST is the address links start
with. A chat client that sends back only the history goes on in the
container that gave its last answer.

Every request needs a bearer key: --keys-file names a file of "NAME KEY"
lines (# starts a comment), or TERP_SERVE_KEY holds one key. A key sees only
its own containers, files and responses. --no-auth is allowed on a loopback
address only; serve refuses to listen elsewhere without keys. The key of the
model server upstream stays on this machine.

Limits: each key may hold --key-containers live containers (64), send
--key-rpm requests a minute and use --key-tokens-per-day tokens a UTC day
(both unlimited unless given); a line of the keys file may set its own, as
"alice sk-... containers=8 rpm=60 tokens_per_day=2000000" (N or unlimited).
--max-containers and --max-runs bound the live containers and the turns
running at once across keys. With --store postgres:// replicas count a key's
limits and --max-containers together; --max-runs is each replica's own.
--max-upload and --max-request-size the sizes
of uploads (512MiB) and JSON bodies (8MiB). A client over a limit gets a 429
with Retry-After, which the OpenAI SDKs wait out and retry (not for tokens
per day: that waits for midnight UTC), or a 413 for a body over its size.
--header-timeout, --body-timeout and --idle-timeout cut off clients that send
too slowly or hold connections idle; nothing cuts off a long answer.

GET /healthz answers 200 while the process serves, and GET /readyz 200 when
the model server, the store and the sandbox backend work, or 503 naming the
check that failed and why; neither needs a key. Prometheus metrics are served
on a listener of their own, --metrics-listen ADDR, at /metrics (with the
probes beside them), without a key: they name every key and its use, so
bind it where only the scraper reaches.

Each request is logged on stderr with its method, route, status, duration,
key name and request id (the client's X-Request-Id when it sends a sane one,
returned in the answer's header); --log-format json writes JSON lines. Keys,
prompts, code and outputs are never logged, except with --log-debug, which
logs them all: for debugging only.

Containers, files and stored responses outlive the server: they are kept in
terp's data directory, or with --store postgres://... in a PostgreSQL
database that several replicas share behind a load balancer. On SIGTERM,
running requests get --grace to finish, then are stopped with a 503 saying
so; every container is paused, and a restart goes on with all of them.
Before that, for --shutdown-delay (5s), /readyz answers 503 while new
requests are still served, so that a load balancer stops sending first.
Replicas forward a container's requests to the one it is open in (at the
address it listens on, or --advertise URL), so its Python keeps its
variables; give them remote sandboxes (--sandbox cpuos or docker) for any
replica to take a container over when another dies.

LibreChat's agents run code through /librechat/v1, LibreChat's Code
Interpreter API: set LIBRECHAT_CODE_BASEURL=http://HOST:PORT/librechat/v1
and LIBRECHAT_CODE_API_KEY to a key of this server. Newer LibreChat can sign
a token for each request instead (Authorization: Bearer, EdDSA or RS256):
--librechat-jwt-key names the PEM file of its public key, which turns them
on; --librechat-jwt-kid the key id they must name; --librechat-jwt-issuer
and --librechat-jwt-audience what iss and aud must be (librechat, codeapi);
--librechat-jwt-tenant TENANT=NAME maps a token's tenant_id to the key of
that NAME in --keys-file, whose limits and files the request has ("*" maps
any other tenant; a tenant not mapped is the key of its own name).

See docs/serve.md for every endpoint and metric, docs/production.md for
running replicas, docs/jupyter.md and docs/librechat.md for the Jupyter and
LibreChat clients.`,
		Example: `  TERP_SERVE_KEY=$(openssl rand -hex 16) terp serve --base-url http://localhost:8000/v1 --model qwen3-32b
  terp serve --listen 0.0.0.0:8080 --keys-file /etc/terp/keys
  terp serve --no-auth   # 127.0.0.1:8080, for one user on this machine
  terp serve --keys-file /etc/terp/keys --metrics-listen 127.0.0.1:9090 --log-format json
  terp serve --listen 10.0.0.5:8080 --keys-file /etc/terp/keys --store postgres://terp:PW@db/terp --sandbox cpuos
  terp serve --keys-file /etc/terp/keys --librechat-jwt-key /etc/terp/librechat.pub --librechat-jwt-tenant '*=librechat'`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			opts.flags = cmd.Flags()
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return runServe(cmd.Context(), opts)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&opts.listen, "listen", "127.0.0.1:8080", "address to listen on")
	fl.StringVar(&opts.keysFile, "keys-file", "", "file of `PATH` with one \"NAME KEY [OPTION=N ...]\" per line: the keys clients may send, and their limits")
	fl.StringVar(&opts.store, "store", "", "`URL` of a PostgreSQL database (postgres://...) that replicas share; default: the data directory")
	fl.StringVar(&opts.advertise, "advertise", "", "`URL` other replicas reach this one at (http://HOST:PORT), with a shared --store")
	fl.StringVar(&opts.publicURL, "public-url", "", "`URL` clients reach the server at (https://HOST[/PREFIX] behind a proxy), which the links in answers start with; default: the address each request came to")
	fl.DurationVar(&opts.linkLifetime, "link-lifetime", serve.DefaultLinkLifetime, "how long the links to files in answers work, without a key (`DURATION`, e.g. 720h)")
	fl.DurationVar(&opts.grace, "grace", 30*time.Second, "on SIGTERM, how long running requests may finish before they are stopped")
	fl.DurationVar(&opts.shutdownDelay, "shutdown-delay", 5*time.Second, "on SIGTERM, how long the server still takes new requests while /readyz answers 503, for load balancers to stop sending (`DURATION`)")
	fl.BoolVar(&opts.noAuth, "no-auth", false, "accept requests without a key (loopback addresses only)")
	fl.StringVar(&opts.aliasSuffix, "alias-suffix", openaiapi.DefaultAliasSuffix, "`SUFFIX` that makes a chat model name (MODEL+python) an alias that runs the code interpreter on MODEL")
	fl.StringVar(&opts.steps, "steps", openaiapi.StepsModes[0], "where chat completions show the steps (`MODE`: "+strings.Join(openaiapi.StepsModes, ", ")+`); a request's "terp_steps" chooses for itself`)
	fl.StringVar(&opts.metricsListen, "metrics-listen", "", "`ADDR` of a listener of their own for /metrics, /healthz and /readyz, without a key")
	fl.StringVar(&opts.logFormat, "log-format", logFormats[0], "the log's `FORMAT` on stderr: "+strings.Join(logFormats, " or "))
	fl.IntVar(&opts.warm, "warm", 1, "sandboxes to keep made ahead, with Python started and the prewarm imported, for each kind of container clients made lately (`N`; 0: none)")
	fl.BoolVar(&opts.logDebug, "log-debug", false, "log at debug level, with what clients send: keys, prompts, code and outputs (never without it)")
	if err := cmd.RegisterFlagCompletionFunc("steps", completeChoices(openaiapi.StepsModes)); err != nil {
		panic(err)
	}
	if err := cmd.RegisterFlagCompletionFunc("log-format", completeChoices(logFormats)); err != nil {
		panic(err)
	}
	addLimitFlags(fl, opts)
	addLibreChatFlags(fl, &opts.librechat)
	addConfigFlags(cmd, serveConfigFlags...)
	return cmd
}

// checkPublicURL refuses a --public-url that links cannot start with.
func checkPublicURL(s string) error {
	if s == "" {
		return nil
	}
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
		return usagef("--public-url %q is not the address clients reach the server at: give http(s)://HOST[:PORT][/PREFIX]", s)
	}
	return nil
}

// serveKeys are the keys a server accepts, from --keys-file or
// TERP_SERVE_KEY, checked against the listen address, each with its limits.
func serveKeys(opts *serveOptions) (map[string]serve.Principal, error) {
	keys := map[string]serve.Principal{}
	switch {
	case opts.keysFile != "" && opts.noAuth:
		return nil, usagef("--keys-file and --no-auth contradict each other; give one")
	case opts.keysFile != "":
		var err error
		if keys, err = readKeysFile(opts.keysFile, opts.limits); err != nil {
			return nil, err
		}
	case strings.TrimSpace(opts.f.Getenv("TERP_SERVE_KEY")) != "":
		keys[strings.TrimSpace(opts.f.Getenv("TERP_SERVE_KEY"))] = serve.Principal{Name: "default", Limits: opts.limits}
	case !opts.noAuth:
		return nil, usagef("terp serve needs keys: set TERP_SERVE_KEY, give --keys-file PATH, or --no-auth on a loopback address")
	}
	if opts.noAuth {
		if err := checkListen(opts.listen, false); err != nil {
			return nil, usagef("--no-auth serves anyone who can connect: it is allowed on a loopback address only, not %s; give keys instead", opts.listen)
		}
	}
	return keys, nil
}

// readKeysFile reads "NAME KEY [OPTION=VALUE ...]" lines, each key with
// the limits its options set over defaults; a key shorter than 16
// characters, a name or key given twice, an option it does not know, or a
// malformed line is refused with its line number.
func readKeysFile(path string, defaults serve.Limits) (map[string]serve.Principal, error) {
	fh, err := os.Open(path)
	if err != nil {
		return nil, usagef("cannot read the keys file: %v", err)
	}
	defer fh.Close()
	keys := map[string]serve.Principal{}
	names := map[string]bool{}
	sc := bufio.NewScanner(fh)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		fields := strings.Fields(line)
		limits := defaults
		switch {
		case len(fields) < 2:
			return nil, usagef("%s:%d: want NAME KEY, and options after them such as rpm=60", path, n)
		case len(fields[1]) < 16:
			return nil, usagef("%s:%d: the key of %s is shorter than 16 characters; make a long random one (openssl rand -hex 16)", path, n, fields[0])
		case names[fields[0]]:
			return nil, usagef("%s:%d: %s is named twice", path, n, fields[0])
		case keys[fields[1]].Name != "":
			return nil, usagef("%s:%d: %s has the key of %s", path, n, fields[0], keys[fields[1]].Name)
		}
		if err := parseKeyOptions(fields[2:], &limits); err != nil {
			return nil, usagef("%s:%d: %v", path, n, err)
		}
		names[fields[0]], keys[fields[1]] = true, serve.Principal{Name: fields[0], Limits: limits}
	}
	if err := sc.Err(); err != nil {
		return nil, usagef("cannot read the keys file: %v", err)
	}
	if len(keys) == 0 {
		return nil, usagef("%s holds no keys; add a line NAME KEY", path)
	}
	return keys, nil
}

func runServe(ctx context.Context, opts *serveOptions) error {
	f := opts.f
	if err := checkTimeouts(opts.timeouts); err != nil {
		return err
	}
	keys, err := serveKeys(opts)
	if err != nil {
		return err
	}
	jwt, err := opts.librechat.jwt(keys)
	if err != nil {
		return err
	}
	if !slices.Contains(openaiapi.StepsModes, opts.steps) {
		return usagef("--steps is one of %s, not %q", strings.Join(openaiapi.StepsModes, ", "), opts.steps)
	}
	if strings.TrimSpace(opts.aliasSuffix) == "" {
		return usagef("--alias-suffix is empty: give the suffix that makes a model name an alias, such as %s", openaiapi.DefaultAliasSuffix)
	}
	if !slices.Contains(logFormats, opts.logFormat) {
		return usagef("--log-format is one of %s, not %q", strings.Join(logFormats, ", "), opts.logFormat)
	}
	if err := checkPublicURL(opts.publicURL); err != nil {
		return err
	}
	if opts.warm < 0 || opts.warm > maxWarm {
		return usagef("--warm is %d: give between 0 (none) and %d sandboxes kept ready", opts.warm, maxWarm)
	}
	if opts.linkLifetime < time.Minute {
		return usagef("--link-lifetime is %s: give a minute or more (the default, 720h, is 30 days)", opts.linkLifetime)
	}
	level := slog.LevelInfo
	if opts.logDebug {
		level = slog.LevelDebug
	}
	log := serverLogger(f.IO.ErrOut, opts.logFormat, level)
	cfg, err := f.Config(onlyFlags(opts.flags, serveConfigFlags))
	if err != nil {
		return err
	}
	for _, w := range cfg.Warnings() {
		opts.tell(log, slog.LevelWarn, w)
	}
	if err := pickServer(ctx, f, cfg); err != nil {
		return err
	}
	// One backend serves every container: it is safe for concurrent use,
	// and checks the machine once.
	backend, err := f.NewBackend(cfg)
	if err != nil {
		return err
	}
	stores, err := openServeStores(ctx, opts)
	if err != nil {
		return err
	}
	defer stores.close()
	// The model client's requests are timed into the server's metrics.
	metrics := serve.NewMetrics()
	shared := *f
	shared.NewBackend = func(*config.Config) (sandbox.Backend, error) { return backend, nil }
	shared.NewModel = func(c *config.Config) agent.Completer {
		return newModelVia(c, &http.Client{Transport: metrics.Transport(nil)})
	}
	if stores.shared() {
		shared.store = stores.conversations
	}
	st, err := shared.Store()
	if err != nil {
		return err
	}
	svc := conversation.New(conversation.Deps{Store: st, NewBackend: shared.NewBackend, NewModel: shared.NewModel,
		Warm: opts.warm, Log: log})
	defer svc.Close()
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", opts.listen)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", opts.listen, err)
	}
	defer func() { _ = ln.Close() }()
	var mln net.Listener
	if opts.metricsListen != "" {
		if mln, err = lc.Listen(ctx, "tcp", opts.metricsListen); err != nil {
			return fmt.Errorf("listen on %s for the metrics: %w", opts.metricsListen, err)
		}
	}
	var replica string
	if stores.shared() {
		if replica, err = replicaAddress(opts.advertise, ln); err != nil {
			return err
		}
	}
	dataDir := filepath.Join(f.DataDir(), "serve")
	srv, err := serve.New(serve.Config{
		Conversations: svc, Settings: cfg, Keys: keys, NoAuth: opts.noAuth && len(keys) == 0,
		LocalLimits: opts.limits, Caps: opts.caps,
		State: stores.state, DataDir: dataDir, Replica: replica,
		Log:       log,
		Metrics:   metrics,
		Ready:     []serve.ReadyCheck{serve.SandboxCheck(backend)},
		LogDebug:  opts.logDebug,
		PublicURL: opts.publicURL, LinkLifetime: opts.linkLifetime,
	})
	if err != nil {
		return err
	}
	// OpenAI's clients' containers, with no options, are the ones ready
	// from the start; other kinds are once clients make them.
	if err := srv.KeepWarm(serve.ContainerSpec{}); err != nil {
		return err
	}
	openaiapi.Register(srv, openaiapi.Options{AliasSuffix: opts.aliasSuffix, Steps: opts.steps})
	jupyter.Register(srv, versionString())
	librechat.Register(srv, librechat.Options{JWT: jwt})
	if jwt != nil {
		opts.tell(log, slog.LevelInfo, fmt.Sprintf("LibreChat's code API on http://%s%s takes tokens signed by the %d key(s) of %s (iss %s, aud %s)",
			ln.Addr(), librechat.Prefix, len(jwt.Keys), opts.librechat.keyFile, jwt.Issuer, jwt.Audience))
	}
	if mln != nil {
		opts.tell(log, slog.LevelInfo, fmt.Sprintf("serving metrics on http://%s/metrics, and /healthz and /readyz, without a key", mln.Addr()))
	}
	opts.tell(log, slog.LevelInfo, fmt.Sprintf("serving the OpenAI API on http://%s/v1 (model %s at %s, %s sandboxes, %d kept warm, %s)",
		ln.Addr(), cfg.Model, cfg.BaseURL, cfg.Sandbox, opts.warm, stores.describe(dataDir)))
	stopping := func() {
		opts.tell(log, slog.LevelInfo, fmt.Sprintf("stopping: /readyz answers 503; new requests are served for %s more, then running ones get %s to finish", opts.shutdownDelay, opts.grace))
	}
	err = serveWithMetrics(drained(ctx, srv, opts.shutdownDelay, stopping), mln, srv.MetricsHandler(), func(ctx context.Context) error {
		return serveHTTP(ctx, ln, srv.Handler(), opts.grace, srv, opts.timeouts)
	})
	cctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	srv.Close(cctx)
	if err == nil && ctx.Err() != nil {
		opts.tell(log, slog.LevelInfo, "stopped; the containers are paused, and a restart goes on with them")
	}
	return err
}

// serverLogger is a server's log on w, in format (one of logFormats), of
// what is at level or above.
func serverLogger(w io.Writer, format string, level slog.Level) *slog.Logger {
	o := &slog.HandlerOptions{Level: level}
	if format == "json" {
		return slog.New(slog.NewJSONHandler(w, o))
	}
	return slog.New(slog.NewTextHandler(w, o))
}

// tell says what the server says of itself (where it serves, a setting's
// warning, that it stopped): a line for a person in the text format, a
// record in the JSON one, so that every line of a JSON log parses.
func (opts *serveOptions) tell(log *slog.Logger, level slog.Level, text string) {
	if opts.logFormat == "json" {
		log.Log(context.Background(), level, text)
		return
	}
	prefix := "terp: "
	if level >= slog.LevelWarn {
		prefix = "warning: "
	}
	fmt.Fprintln(opts.f.IO.ErrOut, prefix+text)
}

// drained is ctx ended delay after it: in between, srv serves on and its
// /readyz says it is stopping (serve.Server.Drain; told says so in the
// log), so that a load balancer stops sending before the listener closes.
func drained(ctx context.Context, srv *serve.Server, delay time.Duration, told func()) context.Context {
	out, stop := context.WithCancel(context.WithoutCancel(ctx))
	go func() {
		<-ctx.Done()
		srv.Drain()
		told()
		time.Sleep(delay)
		stop()
	}()
	return out
}

// serveWithMetrics runs serveAPI and, when mln is set, serves metrics on
// mln, until ctx ends or either fails.
func serveWithMetrics(ctx context.Context, mln net.Listener, metrics http.Handler, serveAPI func(context.Context) error) error {
	if mln == nil {
		return serveAPI(ctx)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		done <- serveHTTP(ctx, mln, metrics, 5*time.Second, nil, defaultHTTPTimeouts)
		cancel()
	}()
	err := serveAPI(ctx)
	cancel()
	return errors.Join(err, <-done)
}
