package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/charmbracelet/lipgloss"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/terpdev/terp/internal/agent"
	"github.com/terpdev/terp/internal/config"
	"github.com/terpdev/terp/internal/conversation"
	"github.com/terpdev/terp/internal/llm"
	"github.com/terpdev/terp/internal/sandbox"
	"github.com/terpdev/terp/internal/sanitize"
)

// doctorOptions holds what `terp doctor` needs.
type doctorOptions struct {
	f     *Factory
	flags *pflag.FlagSet
	json  bool
	// local are the servers probed on this machine when none is
	// configured; tests replace them.
	local []localServer
	// probeTimeout bounds the tool-calling probe: a thinking model may
	// take a while to answer.
	probeTimeout time.Duration
	// http, when set, makes every request; tests keep doctor off the
	// network with it.
	http *http.Client
}

// localServer is where a kind of server listens on this machine by default.
type localServer struct {
	Provider string
	BaseURL  string
}

// doctorFlags are the settings doctor checks.
var doctorFlags = []string{"provider", "base-url", "model", "sandbox", "exec-mode", "tool-dialect", "stream", "docker-image", "cpuos-url", "cpuos-template", "kubernetes-namespace", "kubernetes-warm-pool", "kubernetes-router-url", "kubernetes-kubeconfig", "network", "network-allow", "network-trusted-ranges"}

func newCmdDoctor(f *Factory) *cobra.Command {
	opts := &doctorOptions{f: f, probeTimeout: 3 * time.Minute, local: f.localServers()}
	cmd := &cobra.Command{
		Use:   "doctor",
		Short: "Check the configuration, the model server, tool calling and the sandbox",
		Long: `Doctor checks, in turn: that the configuration loads; that the endpoint
answers; that it serves the model; that the model really calls a tool (it is
asked to compute 1234 * 5678 with run_python, and doctor says whether the call
came as a native tool call or as text terp recovers, and in which format); and
that the sandbox runs Python. Each failed check says how to fix it.

With no server configured, doctor also looks for one on this machine's usual
ports (Ollama 11434, vLLM 8000, llama.cpp 8080, LM Studio 1234, SGLang 30000)
and says how to use what it finds.

Exit codes: 0 when every check passes, 1 otherwise.`,
		Example: `  terp doctor
  terp doctor --provider ollama --model qwen3:8b
  terp doctor --json | jq '.checks[] | select(.status == "fail")'`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			opts.flags = cmd.Flags()
			return runDoctor(cmd.Context(), opts)
		},
	}
	cmd.Flags().BoolVar(&opts.json, "json", false, "print the checks as one JSON object")
	addConfigFlags(cmd, doctorFlags...)
	return cmd
}

// Statuses of a check.
const (
	checkOK   = "ok"
	checkFail = "fail"
	checkSkip = "skip"
	checkInfo = "info"
)

// check is one line of doctor's checklist.
type check struct {
	Name   string `json:"name"`
	Status string `json:"status"`
	Detail string `json:"detail"`
	Fix    string `json:"fix,omitempty"`
}

// doctorReport is what doctor prints, as text or JSON.
type doctorReport struct {
	OK     bool    `json:"ok"`
	Checks []check `json:"checks"`
	// Dialect is how the model's tool calls came: "native", or the text
	// format terp recovered them from.
	Dialect string `json:"dialect,omitempty"`
	// LocalServers are the servers found on this machine when none was
	// configured.
	LocalServers []foundServer `json:"local_servers,omitempty"`
}

type foundServer struct {
	Provider string   `json:"provider"`
	BaseURL  string   `json:"base_url"`
	Models   []string `json:"models"`
}

func (r *doctorReport) add(c check) { r.Checks = append(r.Checks, c) }

func runDoctor(ctx context.Context, opts *doctorOptions) error {
	r := diagnose(ctx, opts)
	r.OK = true
	for _, c := range r.Checks {
		if c.Status == checkFail {
			r.OK = false
		}
	}
	if opts.json {
		enc := json.NewEncoder(opts.f.IO.Out)
		enc.SetIndent("", "  ")
		if err := enc.Encode(r); err != nil {
			return err
		}
	} else {
		printChecklist(opts.f.IO.Out, r)
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if !r.OK {
		return silentError{code: exitError}
	}
	return nil
}

// diagnose runs the checks in order; a check whose premise failed is
// skipped.
func diagnose(ctx context.Context, opts *doctorOptions) doctorReport {
	var r doctorReport
	f := opts.f
	cfg, err := f.Config(opts.flags)
	if err != nil {
		r.add(check{Name: "configuration", Status: checkFail, Detail: err.Error(),
			Fix: "Correct the setting named above; \"terp config show\" lists every key and where it came from."})
		for _, name := range []string{"endpoint", "model", "tool calling", "sandbox"} {
			r.add(check{Name: name, Status: checkSkip, Detail: "the configuration does not load"})
		}
		return r
	}
	r.add(configCheck(cfg))

	unset := cfg.Source("base_url").Kind == config.KindDefault && cfg.Source("provider").Kind == config.KindDefault
	if unset {
		r.LocalServers = findLocalServers(ctx, opts.httpClient(), opts.local)
		r.add(localCheck(r.LocalServers, opts.local, cfg))
	}

	key, from := cfg.APIKey()
	client := llm.New(llm.Config{BaseURL: cfg.BaseURL, APIKey: key, APIKeySource: from, APIKeyEnv: cfg.APIKeyEnv, Stream: cfg.Stream,
		MaxRetries: 1, MaxBackoff: 2 * time.Second, HTTPClient: opts.http})
	modelsOK := endpointAndModel(ctx, &r, client, cfg)
	for i := range r.Checks {
		if c := &r.Checks[i]; unset && c.Name == "endpoint" && c.Status == checkFail {
			c.Fix += " No server is configured: choose one with --provider (ollama, vllm, llamacpp, lmstudio, sglang, openai) or --base-url."
		}
	}
	if modelsOK {
		r.add(toolCheck(ctx, &r, opts, client, cfg))
	} else {
		r.add(check{Name: "tool calling", Status: checkSkip, Detail: "needs the endpoint and the model"})
	}
	if cfg.Sandbox == "cpuos" {
		r.Checks = append(r.Checks, cpuosChecks(ctx, opts, cfg)...)
		return r
	}
	if cfg.Sandbox == "kubernetes" {
		r.Checks = append(r.Checks, kubernetesChecks(ctx, f, cfg)...)
		return r
	}
	if dockerChecks(ctx, &r, f, cfg) {
		r.add(sandboxCheck(ctx, f, cfg))
	}
	return r
}

func configCheck(cfg *config.Config) check {
	c := check{Name: "configuration", Status: checkOK}
	file := "no config file"
	if cfg.FileExists() {
		file = cfg.Path()
	}
	keyText := "no API key"
	if _, from := cfg.APIKey(); from != "" {
		keyText = "API key from " + from
	}
	if noServerConfigured(cfg) {
		// gpuOS, the default, answers 401 without a key: not a setup
		// that works.
		c.Status = checkFail
		c.Fix = "No model server is configured: terp's default, gpuOS, needs an API key in " + cfg.APIKeyEnv +
			" or TERP_API_KEY. Or choose a server with --provider (ollama, vllm, llamacpp, lmstudio, sglang, openai) or TERP_BASE_URL."
	}
	parts := []string{file}
	if cfg.Provider != "" {
		parts = append(parts, fmt.Sprintf("provider %s (%s)", cfg.Provider, cfg.Source("provider")))
	}
	parts = append(parts,
		fmt.Sprintf("base_url %s (%s)", cfg.BaseURL, cfg.Source("base_url")),
		fmt.Sprintf("model %s (%s)", cfg.Model, cfg.Source("model")),
		keyText)
	c.Detail = strings.Join(parts, "; ")
	if w := cfg.Warnings(); len(w) > 0 {
		c.Fix = strings.TrimPrefix(c.Fix+" "+strings.Join(w, "; "), " ")
	}
	return c
}

func (opts *doctorOptions) httpClient() *http.Client {
	if opts.http != nil {
		return opts.http
	}
	return http.DefaultClient
}

// findLocalServers asks each usual local port for its models, at once.
func findLocalServers(ctx context.Context, hc *http.Client, servers []localServer) []foundServer {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	found := make([]*foundServer, len(servers))
	var wg sync.WaitGroup
	for i, s := range servers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if models, ok := listModels(ctx, hc, s.BaseURL); ok {
				found[i] = &foundServer{Provider: s.Provider, BaseURL: s.BaseURL, Models: models}
			}
		}()
	}
	wg.Wait()
	var out []foundServer
	for _, s := range found {
		if s != nil {
			out = append(out, *s)
		}
	}
	return out
}

// listModels asks one local address for GET /models, without retries: a
// closed port is the usual answer.
func listModels(ctx context.Context, hc *http.Client, baseURL string) ([]string, bool) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, baseURL+"/models", nil)
	if err != nil {
		return nil, false
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, false
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, false
	}
	var list struct {
		Data []struct {
			ID string `json:"id"`
		} `json:"data"`
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&list); err != nil {
		return nil, false
	}
	models := []string{}
	for _, m := range list.Data {
		models = append(models, m.ID)
	}
	return models, true
}

func localCheck(found []foundServer, probed []localServer, cfg *config.Config) check {
	c := check{Name: "local servers", Status: checkInfo}
	if len(found) == 0 {
		var addrs []string
		for _, s := range probed {
			addrs = append(addrs, strings.TrimSuffix(strings.TrimPrefix(s.BaseURL, "http://"), "/v1"))
		}
		c.Detail = fmt.Sprintf("no base_url or provider is configured, so terp uses %s; no server answers on %s",
			cfg.BaseURL, strings.Join(addrs, ", "))
		return c
	}
	var seen []string
	for _, s := range found {
		models := "no models"
		if len(s.Models) > 0 {
			models = strings.Join(s.Models, ", ")
		}
		seen = append(seen, fmt.Sprintf("%s at %s (%s)", s.Provider, s.BaseURL, models))
	}
	c.Detail = "no base_url or provider is configured, so terp uses " + cfg.BaseURL + "; found " + strings.Join(seen, "; ")
	first := found[0]
	model := "MODEL"
	if len(first.Models) > 0 {
		model = first.Models[0]
	}
	c.Fix = fmt.Sprintf("To use the %s server: terp ask --provider %s --model %s \"...\", or put provider = %q and model = %q in %s (terp config init writes one).",
		first.Provider, first.Provider, model, first.Provider, model, cfg.Path())
	return c
}

// endpointAndModel checks that the endpoint answers and serves the model,
// and reports whether both did.
func endpointAndModel(ctx context.Context, r *doctorReport, client *llm.Client, cfg *config.Config) bool {
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	models, err := client.Models(ctx)
	if err != nil {
		r.add(failure("endpoint", err))
		r.add(check{Name: "model", Status: checkSkip, Detail: "needs the endpoint"})
		return false
	}
	r.add(check{Name: "endpoint", Status: checkOK, Detail: fmt.Sprintf("%s answers; it serves %d model%s", cfg.BaseURL, len(models), plural(len(models)))})

	m, ok := llm.FindModel(models, cfg.Model)
	if !ok {
		c := check{Name: "model", Status: checkFail, Detail: fmt.Sprintf("the server does not serve %q", cfg.Model)}
		if len(models) == 0 {
			c.Fix = "The server lists no models: load one on the server first (Ollama: ollama pull qwen3:8b)."
		} else {
			ids := make([]string, len(models))
			for i, m := range models {
				ids[i] = m.ID
			}
			c.Fix = fmt.Sprintf("Pass one it serves with --model (or TERP_MODEL, or model in the config file): %s.", strings.Join(ids, ", "))
		}
		r.add(c)
		return false
	}
	detail := fmt.Sprintf("%s is served", m.ID)
	settings := cfg.ForModel(cfg.Model)
	switch {
	case settings.ContextWindow > 0:
		detail += fmt.Sprintf("; context window %d tokens (configured)", settings.ContextWindow)
	case m.ContextWindow > 0:
		detail += fmt.Sprintf("; context window %d tokens (reported by the server)", m.ContextWindow)
	case settings.ProfileWindow > 0:
		detail += fmt.Sprintf("; context window %d tokens (model profile %s)", settings.ProfileWindow, settings.Profiles[0].Pattern)
	}
	r.add(check{Name: "model", Status: checkOK, Detail: detail})
	return true
}

// toolCheck asks the model to compute with the tool and says how the call
// came, or why none did.
func toolCheck(ctx context.Context, r *doctorReport, opts *doctorOptions, client *llm.Client, cfg *config.Config) check {
	ctx, cancel := context.WithTimeout(ctx, opts.probeTimeout)
	defer cancel()
	settings := cfg.ForModel(cfg.Model)
	res, err := agent.Probe(ctx, client, conversation.AgentConfig(cfg))
	if err != nil {
		return failure("tool calling", err)
	}
	c := check{Name: "tool calling"}
	if res.Format != "" {
		r.Dialect = res.Format
	}
	switch {
	case res.Refused != nil && res.Format != "":
		c.Status = checkFail
		c.Detail = fmt.Sprintf("the server refuses tools (%v); without them the model %s, so terp still works, falling back to text on its own",
			res.Refused.Err, dialectText(res.Format))
		c.Fix = res.Refused.Msg + ` Or set tool_dialect = "text" to skip the refused request.`
	case res.Refused != nil:
		c.Status = checkFail
		c.Detail = fmt.Sprintf("the server refuses tools (%v)", res.Refused.Err)
		c.Fix = res.Refused.Msg
		if res.Dialect != llm.DialectText && settings.ToolDialect == string(llm.DialectNative) {
			c.Fix += ` Or set tool_dialect = "auto" to let terp fall back to code written as text.`
		}
	case res.Format != "":
		c.Status = checkOK
		c.Detail = fmt.Sprintf("%s %s", cfg.Model, dialectText(res.Format))
		if res.Format != "native" && settings.ToolDialect == string(llm.DialectAuto) && res.Format != llm.FormatPython {
			c.Detail += "; the server passes them through as text (it has no parser for this format), terp recovers them"
		}
	default:
		c.Status = checkFail
		c.Detail = fmt.Sprintf("%s answered without calling the tool: %q", cfg.Model, clipText(res.Answer, 120))
		c.Fix = "Use a model trained for tool calling (Qwen3, GLM-4, gpt-oss, Llama 3.1 or newer)."
		if res.TextFormat != "" {
			c.Fix = fmt.Sprintf(`Told how in text mode, the model does write its code (%s): set tool_dialect = "text", or [models.%q] tool_dialect = "text" in the config file.`,
				res.TextFormat, cfg.Model)
		}
	}
	return c
}

// dialectText says how the probe's call came.
func dialectText(format string) string {
	switch format {
	case "native":
		return "calls run_python with native tool calls"
	case llm.FormatPython:
		return "writes its code in a ```python block (text mode)"
	default:
		return fmt.Sprintf("writes its calls as text in the %s format", format)
	}
}

// sandboxCheck creates a sandbox, runs Python in it and removes it.
func sandboxCheck(ctx context.Context, f *Factory, cfg *config.Config) check {
	c := check{Name: "sandbox"}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	fix := "Install bubblewrap and Python with its libraries: sudo apt-get install bubblewrap python3-numpy python3-pandas python3-matplotlib (make deps does it)."
	backend, err := f.NewBackend(cfg)
	if err != nil {
		c.Status, c.Detail, c.Fix = checkFail, err.Error(), "Use --sandbox local (the default)."
		return c
	}
	network := cfg.NetworkPolicy()
	sbx, err := backend.Create(ctx, sandbox.Options{Timeout: 5 * time.Minute, Limits: sandbox.Limits{
		MemoryBytes: cfg.MemoryLimit, Processes: cfg.ProcessLimit, FileSizeBytes: cfg.FileSizeLimit, WorkBytes: cfg.MaxWorkSize,
	}, Network: network})
	if err != nil {
		c.Status, c.Detail, c.Fix = checkFail, "cannot create a "+cfg.Sandbox+" sandbox: "+err.Error(), fix
		return c
	}
	defer func() { _ = sbx.Close(context.WithoutCancel(ctx)) }()
	out, err := sbx.Exec(ctx, []string{"python3", "-c", "import sys; print('terp-doctor', sys.version.split()[0])"},
		sandbox.ExecOptions{Timeout: time.Minute})
	switch {
	case err != nil:
		c.Status, c.Detail, c.Fix = checkFail, "cannot run Python in the sandbox: "+err.Error(), fix
	case out.ExitCode != 0 || !strings.HasPrefix(out.Stdout, "terp-doctor "):
		c.Status, c.Detail, c.Fix = checkFail,
			fmt.Sprintf("Python in the sandbox exited %d: %s", out.ExitCode, clipText(strings.TrimSpace(out.Stderr+out.Stdout), 200)), fix
	default:
		c.Status = checkOK
		c.Detail = fmt.Sprintf("%s sandbox ran Python %s", cfg.Sandbox, strings.TrimSpace(strings.TrimPrefix(out.Stdout, "terp-doctor ")))
		if l, ok := backend.(limitsReporter); ok {
			c.Detail += fmt.Sprintf("; memory (%s) and process (%d) limits by %s, file size by rlimit",
				config.SizeText(cfg.MemoryLimit), cfg.ProcessLimit, l.LimitsMechanism())
		}
		if s, ok := backend.(seccompReporter); ok {
			c.Detail += "; " + seccompText(s.Seccomp())
		}
		c.Detail += "; code runs as " + hostUsers(backend)
		c.Detail += "; network " + network.String()
		if network.Mode == sandbox.NetworkAllowlist {
			if err := proxyAnswers(ctx, sbx); err != nil {
				c.Status, c.Fix = checkFail, "This is a bug in terp's allowlist mode; use --network none or full meanwhile, and report it."
				c.Detail += ": " + err.Error()
			}
		}
	}
	return c
}

// hostUsersReporter is a backend that knows which host uid the code runs as.
type hostUsersReporter interface{ HostUsers() string }

// hostUsers says which host uid the code runs as, as far as this terp can
// know: a remote sandbox server decides for itself.
func hostUsers(backend sandbox.Backend) string {
	if h, ok := backend.(hostUsersReporter); ok {
		return h.HostUsers()
	}
	return "whatever uid the sandbox server gives it on its own host"
}

// proxyProbe asks the egress proxy, from inside the sandbox, for a tunnel to
// a name that is never on an allowlist: the refusal proves the bridge, the
// socket and the proxy all answer, without reaching the internet.
const proxyProbe = `import os, socket
host, port = os.environ["HTTPS_PROXY"].rsplit("/", 1)[-1].split(":")
s = socket.create_connection((host, int(port)), timeout=10)
s.sendall(b"CONNECT terp-doctor.invalid:443 HTTP/1.1\r\nHost: terp-doctor.invalid:443\r\n\r\n")
print(s.recv(200).decode(errors="replace").splitlines()[0])
`

// proxyAnswers runs proxyProbe in sbx.
func proxyAnswers(ctx context.Context, sbx sandbox.Sandbox) error {
	out, err := sbx.Exec(ctx, []string{"python3", "-c", proxyProbe}, sandbox.ExecOptions{Timeout: 30 * time.Second})
	if err != nil {
		return fmt.Errorf("the allowlist proxy could not be probed: %w", err)
	}
	if !strings.Contains(out.Stdout, " 403 ") {
		return fmt.Errorf("the allowlist proxy did not answer as expected: %s", clipText(strings.TrimSpace(out.Stdout+out.Stderr), 200))
	}
	return nil
}

// seccompReporter is a backend that can say whether its commands run under
// a seccomp filter (the local one, unless its bubblewrap lacks --seccomp).
type seccompReporter interface {
	Seccomp() (on bool, why string)
}

// seccompText is the sandbox check's words for the filter. Off is not a
// failure: the sandbox still holds by namespaces and limits, but the user
// should know the second wall is missing and how to get it back.
func seccompText(on bool, why string) string {
	if on {
		return "seccomp filter on"
	}
	return "seccomp filter off (" + why + "; install a newer bubblewrap to get it)"
}

// limitsReporter is a backend that can say how it enforces the sandbox's
// resource limits (the local one: cgroup v2, cgroup v1 or rlimits).
type limitsReporter interface {
	LimitsMechanism() string
}

// failure is the check for an error: what happened, and what to do.
func failure(name string, err error) check {
	c := check{Name: name, Status: checkFail, Detail: err.Error()}
	var e *llm.Error
	if errors.As(err, &e) {
		c.Fix = e.Msg
		if e.Err != nil {
			c.Detail = e.Err.Error()
		}
	}
	return c
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

func clipText(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n]) + "…"
}

// printChecklist writes the report as a checklist, a fix under each
// failure.
func printChecklist(w io.Writer, r doctorReport) {
	st := newStyles(lipgloss.NewRenderer(w))
	width := 0
	for _, c := range r.Checks {
		width = max(width, len(c.Name))
	}
	for _, c := range r.Checks {
		mark := map[string]string{checkOK: st.ok.Render("✓"), checkFail: st.err.Render("✗"), checkSkip: st.dim.Render("-"), checkInfo: st.dim.Render("i")}[c.Status]
		fmt.Fprintf(w, "%s %-*s  %s\n", mark, width, c.Name, sanitize.Terminal(c.Detail))
		if c.Fix != "" {
			fmt.Fprintf(w, "  %-*s  %s\n", width, "", st.code.Render("fix: "+sanitize.Terminal(c.Fix)))
		}
	}
	if r.OK {
		fmt.Fprintln(w, "All checks passed.")
	} else {
		fmt.Fprintln(w, "Some checks failed; each says how to fix it.")
	}
}
