package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/terpdev/terp/internal/config"
	"github.com/terpdev/terp/internal/llm/llmtest"
	"github.com/terpdev/terp/internal/sandbox"
	"github.com/terpdev/terp/internal/sandbox/local"
	"github.com/terpdev/terp/internal/terptest"
)

// doctorJSON runs terp doctor --json against s and decodes its report.
func doctorJSON(t *testing.T, env map[string]string, args ...string) (doctorReport, result) {
	t.Helper()
	r := terp(t, env, "", append([]string{"doctor", "--json", "--exec-mode", "script"}, args...)...)
	var rep doctorReport
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
		t.Fatalf("stdout is not the JSON report: %v\n%s\nstderr: %s", err, r.stdout, r.stderr)
	}
	return rep, r
}

func checkNamed(t *testing.T, rep doctorReport, name string) check {
	t.Helper()
	for _, c := range rep.Checks {
		if c.Name == name {
			return c
		}
	}
	t.Fatalf("no %q check in %+v", name, rep.Checks)
	return check{}
}

func TestDoctorHealthyServer(t *testing.T) {
	s := llmtest.New(t, func(req llmtest.Request) llmtest.Reply {
		if !strings.Contains(req.LastUser(), "1234 * 5678") || len(req.Tools) != 1 {
			t.Errorf("probe = %+v", req)
		}
		return llmtest.RunPython("print(1234 * 5678)")
	})
	r := terp(t, serverEnv(s), "", "doctor", "--exec-mode", "script")
	if r.code != 0 {
		t.Fatalf("exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	for _, want := range []string{"✓ configuration", "✓ endpoint", "serves 1 model", "✓ model", "test-model is served",
		"✓ tool calling", "native tool calls", "✓ sandbox", "ran Python 3.", "limits by ", "seccomp filter on", "network none", "All checks passed."} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("output lacks %q:\n%s", want, r.stdout)
		}
	}
}

// In the allowlist mode doctor proves from inside a sandbox that the bridge
// and the proxy answer (a refused CONNECT), without reaching the internet.
func TestDoctorNetworkAllowlist(t *testing.T) {
	s := llmtest.New(t, func(llmtest.Request) llmtest.Reply { return llmtest.RunPython("print(1234 * 5678)") })
	r := terp(t, serverEnv(s), "", "doctor", "--exec-mode", "script", "--network", "allowlist", "--network-allow", "pypi.org")
	if r.code != 0 || !strings.Contains(r.stdout, "network allowlist (pypi.org)") {
		t.Errorf("exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
}

func TestDoctorServersWithoutTools(t *testing.T) {
	tests := []struct {
		name, body string
		textReply  string // what the model writes when no tools are sent
		fix        []string
	}{
		{"vLLM without --enable-auto-tool-choice",
			`{"object":"error","message":"\"auto\" tool choice requires --enable-auto-tool-choice and --tool-call-parser to be set","type":"BadRequestError","param":null,"code":400}`,
			"```python\nprint(1234 * 5678)\n```",
			[]string{"--enable-auto-tool-choice", `tool_dialect = "text"`}},
		{"Ollama model without tools",
			`{"error":{"message":"registry.ollama.ai/library/gemma3:4b does not support tools","type":"api_error","param":null,"code":null}}`,
			"The answer is 7006652.",
			[]string{"does not support tools", "ollama.com/search?c=tools"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			step := func(req llmtest.Request) llmtest.Reply {
				if len(req.Tools) > 0 {
					return llmtest.Reply{Status: 400, Body: tt.body}
				}
				return llmtest.Answer(tt.textReply)
			}
			s := llmtest.New(t, step, step)
			rep, r := doctorJSON(t, serverEnv(s))
			if r.code != 1 || rep.OK {
				t.Fatalf("exit %d ok=%v, want 1 and false", r.code, rep.OK)
			}
			c := checkNamed(t, rep, "tool calling")
			if c.Status != checkFail || !strings.Contains(c.Detail, "refuses tools") {
				t.Errorf("check = %+v", c)
			}
			for _, want := range tt.fix {
				if !strings.Contains(c.Fix, want) {
					t.Errorf("fix %q does not mention %q", c.Fix, want)
				}
			}
			if sbx := checkNamed(t, rep, "sandbox"); sbx.Status != checkOK {
				t.Errorf("sandbox = %+v", sbx)
			}
		})
	}
}

func TestDoctorTextDialects(t *testing.T) {
	t.Run("calls written as text", func(t *testing.T) {
		s := llmtest.New(t, llmtest.Fixed(llmtest.Answer("<tool_call>\n{\"name\": \"run_python\", \"arguments\": {\"code\": \"print(1234*5678)\"}}\n</tool_call>")))
		rep, r := doctorJSON(t, serverEnv(s))
		c := checkNamed(t, rep, "tool calling")
		if r.code != 0 || c.Status != checkOK || rep.Dialect != "hermes" || !strings.Contains(c.Detail, "hermes format") {
			t.Errorf("exit %d, dialect %q, check %+v", r.code, rep.Dialect, c)
		}
	})
	t.Run("tool_dialect text", func(t *testing.T) {
		s := llmtest.New(t, func(req llmtest.Request) llmtest.Reply {
			if len(req.Tools) != 0 {
				t.Errorf("text mode sent tools")
			}
			return llmtest.Answer("```python\nprint(1234 * 5678)\n```")
		})
		rep, r := doctorJSON(t, serverEnv(s), "--tool-dialect", "text")
		if c := checkNamed(t, rep, "tool calling"); r.code != 0 || c.Status != checkOK || rep.Dialect != "python" {
			t.Errorf("exit %d, dialect %q, check %+v", r.code, rep.Dialect, c)
		}
	})
	t.Run("a model that never calls but would in text mode", func(t *testing.T) {
		step := func(req llmtest.Request) llmtest.Reply {
			if len(req.Tools) > 0 {
				return llmtest.Answer("It is about seven million.")
			}
			return llmtest.Answer("```python\nprint(1234 * 5678)\n```")
		}
		s := llmtest.New(t, step, step)
		rep, _ := doctorJSON(t, serverEnv(s), "--tool-dialect", "native")
		c := checkNamed(t, rep, "tool calling")
		if c.Status != checkFail || !strings.Contains(c.Fix, `tool_dialect = "text"`) {
			t.Errorf("check = %+v", c)
		}
	})
}

func TestDoctorModelAndEndpointProblems(t *testing.T) {
	s := llmtest.New(t)
	s.ServeModels(`{"object":"list","data":[{"id":"qwen3:8b"},{"id":"llama3.2:3b"}]}`)
	env := serverEnv(s)
	env["TERP_MODEL"] = "qwen3-32b"
	rep, r := doctorJSON(t, env)
	m := checkNamed(t, rep, "model")
	if r.code != 1 || m.Status != checkFail || !strings.Contains(m.Fix, "qwen3:8b, llama3.2:3b") {
		t.Errorf("exit %d, model check %+v", r.code, m)
	}
	if c := checkNamed(t, rep, "tool calling"); c.Status != checkSkip {
		t.Errorf("tool check = %+v, want skipped", c)
	}

	rep, _ = doctorJSON(t, map[string]string{"TERP_BASE_URL": "http://127.0.0.1:1/v1"})
	if c := checkNamed(t, rep, "endpoint"); c.Status != checkFail || !strings.Contains(c.Fix, "Cannot reach") {
		t.Errorf("endpoint = %+v", c)
	}

	// The checklist names each failure's fix.
	r = terp(t, env, "", "doctor", "--exec-mode", "script")
	if !strings.Contains(r.stdout, "✗ model") || !strings.Contains(r.stdout, "fix: Pass one it serves") {
		t.Errorf("checklist:\n%s", r.stdout)
	}
}

func TestDoctorBadConfiguration(t *testing.T) {
	r := terp(t, map[string]string{"TERP_PROVIDER": "olama"}, "", "doctor", "--json")
	var rep doctorReport
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
		t.Fatal(err)
	}
	if c := checkNamed(t, rep, "configuration"); r.code != 1 || c.Status != checkFail || !strings.Contains(c.Detail, `did you mean "ollama"`) {
		t.Errorf("exit %d, %+v", r.code, c)
	}
}

// localOnly is an http.Client that reaches 127.0.0.1 only, so doctor's
// check of the default remote endpoint never leaves the machine.
func localOnly() *http.Client {
	return &http.Client{Transport: roundTripper(func(req *http.Request) (*http.Response, error) {
		if req.URL.Hostname() != "127.0.0.1" {
			return nil, &url.Error{Op: "Get", URL: req.URL.String(), Err: errors.New("no network in tests")}
		}
		return http.DefaultTransport.RoundTrip(req)
	})}
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// With nothing configured, doctor finds a server on a usual local port and
// says how to use it.
func TestDoctorFindsLocalServers(t *testing.T) {
	s := llmtest.New(t)
	s.ServeModels(`{"object":"list","data":[{"id":"qwen3:8b"}]}`)
	home := terptest.TempDir(t)
	env := map[string]string{"HOME": home, "XDG_CONFIG_HOME": filepath.Join(home, "config"), "XDG_DATA_HOME": filepath.Join(home, "data")}
	var out bytes.Buffer
	f := NewFactory()
	f.IO = IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &out}
	f.Getenv = func(k string) string { return env[k] }
	opts := &doctorOptions{f: f, json: true, http: localOnly(), probeTimeout: 10e9, local: []localServer{
		{Provider: "ollama", BaseURL: s.BaseURL()},
		{Provider: "vllm", BaseURL: "http://127.0.0.1:1/v1"},
	}}
	err := runDoctor(context.Background(), opts)
	var rep doctorReport
	if jerr := json.Unmarshal(out.Bytes(), &rep); jerr != nil {
		t.Fatalf("%v\n%s", jerr, out.String())
	}
	if err == nil {
		t.Error("doctor passed though the default endpoint cannot be reached")
	}
	if len(rep.LocalServers) != 1 || rep.LocalServers[0].Provider != "ollama" || rep.LocalServers[0].Models[0] != "qwen3:8b" {
		t.Errorf("local servers = %+v", rep.LocalServers)
	}
	c := checkNamed(t, rep, "local servers")
	if !strings.Contains(c.Fix, "--provider ollama --model qwen3:8b") || !strings.Contains(c.Detail, "uses https://gpuos.si/v1") {
		t.Errorf("local check = %+v", c)
	}
}

// TestDoctorSeccompOff runs doctor with a bubblewrap that has no --seccomp
// (the real one behind a script that hides the option, as the earliest
// releases lacked it): the sandbox still passes, and says the filter is off
// and why.
func TestDoctorSeccompOff(t *testing.T) {
	real, err := exec.LookPath("bwrap")
	if err != nil {
		t.Fatal(err)
	}
	dir := terptest.TempDir(t)
	script := filepath.Join(dir, "bwrap")
	wrapper := "#!/bin/sh\nif [ \"$1\" = --help ]; then " + real + " --help | grep -v -e --seccomp; exit 0; fi\nexec " + real + " \"$@\"\n"
	if err := os.WriteFile(script, []byte(wrapper), 0o755); err != nil {
		t.Fatal(err)
	}
	s := llmtest.New(t, func(llmtest.Request) llmtest.Reply { return llmtest.RunPython("print(1234 * 5678)") })
	env := serverEnv(s)
	env["HOME"] = dir
	env["XDG_CONFIG_HOME"] = filepath.Join(dir, "config")
	var out bytes.Buffer
	f := NewFactory()
	f.IO = IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &out}
	f.Getenv = func(k string) string { return env[k] }
	f.NewBackend = func(*config.Config) (sandbox.Backend, error) {
		return local.New(local.Config{Root: filepath.Join(dir, "sandboxes"), BwrapPath: script})
	}
	Run(context.Background(), f, []string{"doctor", "--json", "--exec-mode", "script"})
	var rep doctorReport
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	c := checkNamed(t, rep, "sandbox")
	if c.Status != checkOK || !strings.Contains(c.Detail, "seccomp filter off (this bubblewrap has no --seccomp option") {
		t.Errorf("sandbox check = %+v", c)
	}
}
