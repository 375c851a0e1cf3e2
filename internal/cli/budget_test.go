package cli

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/terpdev/terp/internal/llm/llmtest"
)

// A budget that runs out ends ask like the step cap: exit 3, a stop reason
// of its own.
func TestAskBudgets(t *testing.T) {
	tests := []struct {
		name   string
		code   string
		flags  []string
		reason string
		says   string
	}{
		{"tokens", "print(1)", []string{"--max-tokens", "150"}, "token_budget", "max_tokens 150"},
		{"time", "import time\ntime.sleep(60)", []string{"--max-time", "1s"}, "time_budget", "max_time 1s"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := llmtest.New(t, llmtest.Fixed(llmtest.RunPython(tt.code)), llmtest.Fixed(llmtest.RunPython(tt.code)))
			args := append([]string{"ask", "--json", "--exec-mode", "script"}, tt.flags...)
			r := terp(t, serverEnv(s), "", append(args, "loop")...)
			if r.code != 3 {
				t.Fatalf("exit %d, want 3\n%s%s", r.code, r.stdout, r.stderr)
			}
			var got askJSON
			if err := json.Unmarshal([]byte(r.stdout), &got); err != nil {
				t.Fatal(err)
			}
			if got.StopReason != tt.reason || !strings.Contains(got.Answer, tt.says) {
				t.Errorf("stop_reason %q answer %q, want %s saying %q", got.StopReason, got.Answer, tt.reason, tt.says)
			}
		})
	}
}

// Notices reach --json as warnings, and plain output as notes on stderr.
func TestAskReportsTextFallback(t *testing.T) {
	refuse := func(req llmtest.Request) llmtest.Reply {
		if len(req.Tools) > 0 {
			return llmtest.Reply{Status: 500, Body: `{"error":{"code":500,"message":"tools param requires --jinja flag","type":"server_error"}}`}
		}
		if strings.HasPrefix(req.LastUser(), "Output of run_python:") {
			return llmtest.Answer("It is 7006652.")
		}
		return llmtest.Answer("```python\nprint(1234 * 5678)\n```")
	}
	s := llmtest.New(t, refuse, refuse, refuse)
	r := terp(t, serverEnv(s), "", "ask", "--json", "--exec-mode", "script", "1234*5678?")
	var got askJSON
	if err := json.Unmarshal([]byte(r.stdout), &got); err != nil || r.code != 0 {
		t.Fatalf("exit %d: %v\n%s%s", r.code, err, r.stdout, r.stderr)
	}
	if got.Answer != "It is 7006652." || len(got.Warnings) != 1 || !strings.Contains(got.Warnings[0], "--jinja") {
		t.Errorf("got %+v", got)
	}

	s = llmtest.New(t, refuse, refuse, refuse)
	r = terp(t, serverEnv(s), "", "ask", "--exec-mode", "script", "1234*5678?")
	if r.code != 0 || r.stdout != "It is 7006652.\n" || !strings.Contains(r.stderr, "warning: ") {
		t.Errorf("exit %d\nstdout %q\nstderr %q", r.code, r.stdout, r.stderr)
	}
}

// --provider fills in the base URL; an explicit --base-url still wins.
func TestProviderFlag(t *testing.T) {
	s := llmtest.New(t, llmtest.Fixed(llmtest.Answer("hi")))
	env := map[string]string{"TERP_MODEL": "test-model", "TERP_PROVIDER": "ollama"}
	r := terp(t, env, "", "ask", "--exec-mode", "script", "--base-url", s.BaseURL(), "hello")
	if r.code != 0 || r.stdout != "hi\n" {
		t.Fatalf("exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	r = terp(t, map[string]string{"TERP_BASE_URL": s.BaseURL()}, "", "config", "show", "--json")
	if !strings.Contains(r.stdout, s.BaseURL()) {
		t.Errorf("config show: %s", r.stdout)
	}
	// At the same layer, the explicit key wins over the preset.
	r = terp(t, map[string]string{"TERP_BASE_URL": s.BaseURL(), "TERP_PROVIDER": "openai"}, "", "config", "show", "--json")
	var rep struct {
		Keys []struct{ Key, Value, Source string }
	}
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
		t.Fatal(err)
	}
	for _, k := range rep.Keys {
		switch k.Key {
		case "base_url":
			if k.Value != s.BaseURL() || k.Source != "env TERP_BASE_URL" {
				t.Errorf("base_url = %+v", k)
			}
		case "api_key_env":
			if k.Value != "OPENAI_API_KEY" || k.Source != "env TERP_PROVIDER (provider openai)" {
				t.Errorf("api_key_env = %+v", k)
			}
		}
	}
}
