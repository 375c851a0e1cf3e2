package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/terpdev/terp/internal/config"
	"github.com/terpdev/terp/internal/sandbox"
	"github.com/terpdev/terp/internal/sandbox/cpuos"
)

// cpuosImports is what doctor runs in a fresh cpuos sandbox: the libraries
// the seed's python template promises and nearly every analysis needs.
var cpuosImports = []string{"python3", "-c", "import sys, numpy, pandas, matplotlib; print('terp-doctor', sys.version.split()[0])"}

// cpuosChecks stand in for the sandbox check when the sandbox is cpuos. A
// remote API fails in more ways than a local sandbox, and each needs its
// own fix: no URL or nothing answering there, no key or a rejected one, a
// template that cannot create a sandbox or lacks the libraries. Each check
// whose premise failed is skipped, so the first failure is the one to fix.
func cpuosChecks(ctx context.Context, opts *doctorOptions, cfg *config.Config) []check {
	urlCheck, reachable := cpuosURLCheck(ctx, opts, cfg)
	keyEnv := cfg.CpuosAPIKeyEnv
	key := cfg.CpuosAPIKey()
	keyCheck := check{Name: "cpuos key"}
	sbxCheck := check{Name: "sandbox"}
	switch {
	case key == "":
		keyCheck.Status = checkFail
		keyCheck.Detail = fmt.Sprintf("no cpuos API key: %s is not set (cpuos_api_key_env names the variable terp reads)", keyEnv)
		keyCheck.Fix = fmt.Sprintf("export %s=<key>: a cpuos API key, or for terp sandbox serve the token that server was started with (it reads CPUOS_API_KEY unless --token-env names another variable).", keyEnv)
		sbxCheck.Status, sbxCheck.Detail = checkSkip, "needs an API key"
	case !reachable:
		keyCheck.Status, keyCheck.Detail = checkSkip, fmt.Sprintf("found in %s; whether it is accepted needs the cpuos URL to answer", keyEnv)
		sbxCheck.Status, sbxCheck.Detail = checkSkip, "needs the cpuos URL to answer"
	default:
		keyCheck, sbxCheck = cpuosSandboxCheck(ctx, opts, cfg, key)
	}
	return []check{urlCheck, keyCheck, sbxCheck}
}

// cpuosURLCheck reports whether anything answers HTTP at cpuos_url. It sends
// no key: any answer, even 401 or 404, proves the address is right enough
// for the next checks to say more.
func cpuosURLCheck(ctx context.Context, opts *doctorOptions, cfg *config.Config) (check, bool) {
	c := check{Name: "cpuos url"}
	where := fmt.Sprintf("%s (%s)", cfg.CpuosURL, cfg.Source("cpuos_url"))
	if cfg.CpuosURL == "" {
		c.Status, c.Detail = checkFail, "no cpuos URL is configured"
		c.Fix = "Set cpuos_url in the config file, TERP_CPUOS_URL, or --cpuos-url; terp sandbox serve listens on http://" + defaultServeAddr + "."
		return c, false
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimRight(cfg.CpuosURL, "/")+"/", nil)
	if err != nil {
		c.Status, c.Detail = checkFail, fmt.Sprintf("%s is not a usable URL: %v", where, err)
		c.Fix = "Set cpuos_url (or --cpuos-url) to the API root, e.g. http://" + defaultServeAddr + "."
		return c, false
	}
	resp, err := opts.httpClient().Do(req)
	if err != nil {
		c.Status, c.Detail = checkFail, fmt.Sprintf("nothing answers at %s: %v", where, unwrapURLError(err))
		if loopback(cfg.CpuosURL) {
			c.Fix = "Start the server on this machine: export CPUOS_API_KEY=$(openssl rand -hex 16); terp sandbox serve --listen " +
				hostPort(cfg.CpuosURL) + " (or point cpuos_url, TERP_CPUOS_URL or --cpuos-url at your cpuos API)."
		} else {
			c.Fix = "Check the address in cpuos_url (or --cpuos-url) and that this machine can reach it (proxy, firewall, VPN); a terp sandbox serve there must run with --allow-remote."
		}
		return c, false
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	c.Status, c.Detail = checkOK, fmt.Sprintf("%s answers (HTTP %d without a key)", where, resp.StatusCode)
	return c, true
}

// cpuosSandboxCheck creates a small sandbox from the configured template,
// imports the libraries in it and closes it. It returns the key check too,
// as creating is the first request that proves the key is accepted.
func cpuosSandboxCheck(ctx context.Context, opts *doctorOptions, cfg *config.Config, key string) (keyCheck, sbxCheck check) {
	keyCheck = check{Name: "cpuos key", Status: checkOK, Detail: fmt.Sprintf("the key in %s is accepted", cfg.CpuosAPIKeyEnv)}
	sbxCheck = check{Name: "sandbox"}
	template := cfg.CpuosTemplate
	if template == "" {
		template = cpuos.DefaultTemplate
	}
	backend, err := cpuos.New(cpuos.Config{BaseURL: cfg.CpuosURL, APIKey: key, APIKeyEnv: cfg.CpuosAPIKeyEnv,
		Template: template, HTTPClient: opts.http, Retries: 1})
	if err != nil {
		sbxCheck.Status, sbxCheck.Detail = checkFail, err.Error()
		sbxCheck.Fix = "Correct cpuos_url and " + cfg.CpuosAPIKeyEnv + "."
		return keyCheck, sbxCheck
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	began := time.Now()
	network := cfg.NetworkPolicy()
	sbx, err := backend.Create(ctx, sandbox.Options{Timeout: 5 * time.Minute, Limits: sandbox.Limits{
		MemoryBytes: cfg.MemoryLimit, Processes: cfg.ProcessLimit, FileSizeBytes: cfg.FileSizeLimit, WorkBytes: cfg.MaxWorkSize,
	}, Network: network})
	var ae *cpuos.APIError
	switch {
	case errors.As(err, &ae) && (ae.Status == http.StatusUnauthorized || ae.Status == http.StatusForbidden):
		keyCheck.Status = checkFail
		keyCheck.Detail = fmt.Sprintf("the cpuos API at %s rejected the key in %s (HTTP %d: %s)", cfg.CpuosURL, cfg.CpuosAPIKeyEnv, ae.Status, ae.Message)
		keyCheck.Fix = fmt.Sprintf("Set %s to a key this server accepts: a current key of your cpuos account (keys can be revoked or expire), or for terp sandbox serve exactly the token it was started with.", cfg.CpuosAPIKeyEnv)
		sbxCheck.Status, sbxCheck.Detail = checkSkip, "needs an accepted API key"
		return keyCheck, sbxCheck
	case errors.As(err, &ae) && (ae.Status == http.StatusPaymentRequired || ae.Status == http.StatusTooManyRequests):
		sbxCheck.Status, sbxCheck.Detail = checkFail, "cannot create a sandbox: "+err.Error()
		sbxCheck.Fix = "The cpuos account's quota or rate limit is reached: wait for it to reset, close sandboxes left running, or raise the plan's limits."
		return keyCheck, sbxCheck
	case errors.As(err, &ae):
		sbxCheck.Status, sbxCheck.Detail = checkFail, fmt.Sprintf("cannot create a sandbox from template %q: %v", template, err)
		sbxCheck.Fix = fmt.Sprintf("Check that cpuos_url is the API root (terp posts to %s/sandboxes) and that the template %q exists; set another with cpuos_template or --cpuos-template.",
			strings.TrimRight(cfg.CpuosURL, "/"), template)
		if ae.Status >= 500 {
			sbxCheck.Fix = "The cpuos server failed; its log (or terp sandbox serve's output) says why. Try again, or check that its machine can run sandboxes (terp doctor there)."
		}
		return keyCheck, sbxCheck
	case err != nil:
		keyCheck.Status, keyCheck.Detail = checkSkip, fmt.Sprintf("found in %s; the server did not answer a request that needs it", cfg.CpuosAPIKeyEnv)
		sbxCheck.Status, sbxCheck.Detail = checkFail, "cannot create a sandbox: "+err.Error()
		sbxCheck.Fix = "The cpuos server answered the first request but not this one: check its log, and try again."
		return keyCheck, sbxCheck
	}
	out, runErr := sbx.Exec(ctx, cpuosImports, sandbox.ExecOptions{Timeout: time.Minute})
	var proxyErr error
	if runErr == nil && network.Mode == sandbox.NetworkAllowlist {
		proxyErr = proxyAnswers(ctx, sbx)
	}
	closeErr := sbx.Close(context.WithoutCancel(ctx))
	libsFix := fmt.Sprintf("Use a template with python3, numpy, pandas and matplotlib (the seed's %q): set cpuos_template or --cpuos-template. For terp sandbox serve, install them on its machine: sudo apt-get install python3-numpy python3-pandas python3-matplotlib.",
		cpuos.DefaultTemplate)
	switch {
	case runErr != nil:
		sbxCheck.Status, sbxCheck.Detail = checkFail, "created a sandbox but could not run Python in it: "+runErr.Error()
		sbxCheck.Fix = libsFix
	case out.ExitCode != 0 || !strings.HasPrefix(out.Stdout, "terp-doctor "):
		sbxCheck.Status = checkFail
		sbxCheck.Detail = fmt.Sprintf("in a sandbox of template %q, importing numpy, pandas and matplotlib exited %d: %s",
			template, out.ExitCode, clipText(lastLine(out.Stderr+out.Stdout), 200))
		sbxCheck.Fix = libsFix
	case proxyErr != nil:
		sbxCheck.Status, sbxCheck.Detail = checkFail, proxyErr.Error()
		sbxCheck.Fix = "The cpuos server's allowlist proxy does not answer: check its log; use --network none or full meanwhile."
	case closeErr != nil:
		sbxCheck.Status = checkFail
		sbxCheck.Detail = "the test sandbox ran Python but could not be closed: " + closeErr.Error()
		sbxCheck.Fix = "It expires by itself after 5 minutes; if closing keeps failing, the server's log says why."
	default:
		sbxCheck.Status = checkOK
		sbxCheck.Detail = fmt.Sprintf("template %q created a sandbox that imported numpy, pandas and matplotlib with Python %s, and closed it (%.1fs); network %s",
			template, strings.TrimSpace(strings.TrimPrefix(out.Stdout, "terp-doctor ")), time.Since(began).Seconds(), network.String())
	}
	return keyCheck, sbxCheck
}

// unwrapURLError drops net/http's "Get URL:" prefix, which repeats the URL
// the detail already names.
func unwrapURLError(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

// loopback reports whether raw points at this machine.
func loopback(raw string) bool {
	u, err := url.Parse(raw)
	if err != nil {
		return false
	}
	if u.Hostname() == "localhost" {
		return true
	}
	ip := net.ParseIP(u.Hostname())
	return ip != nil && ip.IsLoopback()
}

// hostPort is the host:port raw names, with the scheme's port if none.
func hostPort(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return defaultServeAddr
	}
	if u.Port() != "" {
		return u.Host
	}
	if u.Scheme == "https" {
		return net.JoinHostPort(u.Hostname(), "443")
	}
	return net.JoinHostPort(u.Hostname(), "80")
}

// lastLine is the last non-empty line of s: the exception of a traceback.
func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return strings.TrimSpace(lines[len(lines)-1])
}
