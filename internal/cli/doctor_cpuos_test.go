package cli

import (
	"context"
	"encoding/json"
	"net"
	"slices"
	"strings"
	"testing"

	"github.com/terpdev/terp/internal/llm/llmtest"
	"github.com/terpdev/terp/internal/sandbox/local"
	"github.com/terpdev/terp/internal/terptest"
)

// startServe runs what `terp sandbox serve` runs, on a real listener on
// 127.0.0.1 with the local backend behind it, and returns its URL.
func startServe(t *testing.T, token string) string {
	t.Helper()
	backend, err := local.New(local.Config{Root: terptest.TempDir(t)})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- serveSandboxes(ctx, &strings.Builder{}, ln, backend, token) }()
	t.Cleanup(func() {
		cancel()
		if err := <-served; err != nil {
			t.Errorf("serve: %v", err)
		}
	})
	return "http://" + ln.Addr().String()
}

// closedURL is an http URL on 127.0.0.1 where nothing listens.
func closedURL(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return "http://" + addr
}

// cpuosCheckNames are the checks doctor reports for --sandbox cpuos, in
// order, after the model's.
var cpuosCheckNames = []string{"cpuos url", "cpuos key", "sandbox"}

func TestDoctorCpuos(t *testing.T) {
	const token = "doctor-token"
	serveURL := startServe(t, token)
	dead := closedURL(t)
	tests := []struct {
		name    string
		url     string
		key     string // "" leaves CPUOS_API_KEY unset
		ok      bool
		status  []string          // of cpuosCheckNames
		details map[string]string // check name → text its detail holds
		fixes   map[string]string // check name → text its fix holds
	}{
		{
			name: "ok", url: serveURL, key: token, ok: true,
			status: []string{checkOK, checkOK, checkOK},
			details: map[string]string{
				"cpuos url": "answers (HTTP 401 without a key)",
				"cpuos key": "the key in CPUOS_API_KEY is accepted",
				"sandbox":   `template "python" created a sandbox that imported numpy, pandas and matplotlib with Python 3.`,
			},
		},
		{
			name: "missing key", url: serveURL,
			status:  []string{checkOK, checkFail, checkSkip},
			details: map[string]string{"cpuos key": "CPUOS_API_KEY is not set", "sandbox": "needs an API key"},
			fixes:   map[string]string{"cpuos key": "export CPUOS_API_KEY="},
		},
		{
			name: "wrong key", url: serveURL, key: "not-the-token",
			status:  []string{checkOK, checkFail, checkSkip},
			details: map[string]string{"cpuos key": "rejected the key in CPUOS_API_KEY (HTTP 401"},
			fixes:   map[string]string{"cpuos key": "Set CPUOS_API_KEY to a key this server accepts"},
		},
		{
			name: "unreachable URL", url: dead, key: token,
			status:  []string{checkFail, checkSkip, checkSkip},
			details: map[string]string{"cpuos url": "nothing answers at " + dead + " (flag --cpuos-url)", "cpuos key": "found in CPUOS_API_KEY"},
			fixes:   map[string]string{"cpuos url": "terp sandbox serve --listen " + strings.TrimPrefix(dead, "http://")},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := llmtest.New(t, llmtest.Fixed(llmtest.RunPython("print(1234 * 5678)")))
			env := serverEnv(s)
			if tt.key != "" {
				env["CPUOS_API_KEY"] = tt.key
			}
			rep, r := doctorJSON(t, env, "--sandbox", "cpuos", "--cpuos-url", tt.url)
			if wantCode := map[bool]int{true: 0, false: 1}[tt.ok]; r.code != wantCode || rep.OK != tt.ok {
				t.Errorf("exit %d, ok %v; want %d, %v\n%s", r.code, rep.OK, wantCode, tt.ok, r.stdout)
			}
			var names []string
			for _, c := range rep.Checks[len(rep.Checks)-len(cpuosCheckNames):] {
				names = append(names, c.Name)
			}
			if !slices.Equal(names, cpuosCheckNames) {
				t.Fatalf("last checks = %v, want %v", names, cpuosCheckNames)
			}
			for i, name := range cpuosCheckNames {
				c := checkNamed(t, rep, name)
				if c.Status != tt.status[i] {
					t.Errorf("%s: status %s, want %s (%+v)", name, c.Status, tt.status[i], c)
				}
				if c.Status == checkFail && c.Fix == "" {
					t.Errorf("%s failed without a fix: %+v", name, c)
				}
				if want, ok := tt.details[name]; ok && !strings.Contains(c.Detail, want) {
					t.Errorf("%s: detail %q lacks %q", name, c.Detail, want)
				}
				if want, ok := tt.fixes[name]; ok && !strings.Contains(c.Fix, want) {
					t.Errorf("%s: fix %q lacks %q", name, c.Fix, want)
				}
			}
		})
	}

	// In the allowlist mode the served sandbox's proxy is probed too.
	probe := llmtest.Fixed(llmtest.RunPython("print(1234 * 5678)"))
	s := llmtest.New(t, probe, probe) // two doctor runs
	env := serverEnv(s)
	env["CPUOS_API_KEY"] = token
	env["TERP_SANDBOX"] = "cpuos"
	env["TERP_CPUOS_URL"] = serveURL
	r := terp(t, env, "", "doctor", "--exec-mode", "script", "--network", "allowlist", "--network-allow", "pypi.org")
	if r.code != 0 || !strings.Contains(r.stdout, "network allowlist (pypi.org)") {
		t.Errorf("allowlist: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}

	// The checklist a person reads names the failure and its fix.
	env["CPUOS_API_KEY"] = "not-the-token"
	r = terp(t, env, "", "doctor", "--exec-mode", "script")
	for _, want := range []string{"✓ cpuos url", "✗ cpuos key", "rejected the key in CPUOS_API_KEY", "fix: Set CPUOS_API_KEY", "- sandbox", "Some checks failed"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("checklist lacks %q:\n%s", want, r.stdout)
		}
	}
}

// The JSON report is what scripts read: its field names are a contract.
func TestDoctorCpuosJSONShape(t *testing.T) {
	s := llmtest.New(t, llmtest.Fixed(llmtest.RunPython("print(1234 * 5678)")))
	env := serverEnv(s)
	env["TERP_SANDBOX"] = "cpuos"
	env["TERP_CPUOS_URL"] = closedURL(t)
	r := terp(t, env, "", "doctor", "--json", "--exec-mode", "script")
	var raw map[string]json.RawMessage
	if err := json.Unmarshal([]byte(r.stdout), &raw); err != nil {
		t.Fatalf("not one JSON object: %v\n%s", err, r.stdout)
	}
	for _, key := range []string{"ok", "checks"} {
		if _, ok := raw[key]; !ok {
			t.Errorf("no %q in %s", key, r.stdout)
		}
	}
	var checks []map[string]any
	if err := json.Unmarshal(raw["checks"], &checks); err != nil {
		t.Fatal(err)
	}
	seen := map[string]map[string]any{}
	for _, c := range checks {
		for k := range c {
			if !slices.Contains([]string{"name", "status", "detail", "fix"}, k) {
				t.Errorf("check %v has the unknown field %q", c["name"], k)
			}
		}
		seen[c["name"].(string)] = c
	}
	url := seen["cpuos url"]
	if url == nil || url["status"] != checkFail || url["fix"] == nil || !strings.Contains(url["detail"].(string), "(env TERP_CPUOS_URL)") {
		t.Errorf("cpuos url check = %v", url)
	}
	if key := seen["cpuos key"]; key == nil || key["status"] != checkFail || !strings.Contains(key["fix"].(string), "CPUOS_API_KEY") {
		t.Errorf("cpuos key check = %v", key)
	}
	if sbx := seen["sandbox"]; sbx == nil || sbx["status"] != checkSkip {
		t.Errorf("sandbox check = %v", sbx)
	}
	if string(raw["ok"]) != "false" || r.code != 1 {
		t.Errorf("ok = %s, exit %d; want false and 1", raw["ok"], r.code)
	}
}
