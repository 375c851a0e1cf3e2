package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/terpdev/terp/internal/llm/llmtest"
	"github.com/terpdev/terp/internal/terptest"
)

// With nothing configured (no base URL, no provider, no key), ask looks for
// a server on this machine as doctor does: it uses one that serves the
// model, saying so, and otherwise fails at once, before any sandbox or
// record, naming what to set.
func TestAskWithNoServerConfigured(t *testing.T) {
	t.Run("a local server serves the model", func(t *testing.T) {
		s := llmtest.New(t, llmtest.Fixed(llmtest.Answer("forty-two")))
		s.ServeModels(`{"object":"list","data":[{"id":"qwen3-32b","object":"model"}]}`)
		r := terpWith(t, func(f *Factory) { f.LocalServers = []localServer{{Provider: "ollama", BaseURL: s.BaseURL()}} },
			nil, "", "ask", "What is 6*7?")
		if r.code != 0 || !strings.Contains(r.stdout, "forty-two") {
			t.Fatalf("exit %d, stdout %q, stderr:\n%s", r.code, r.stdout, r.stderr)
		}
		if !strings.Contains(r.stderr, "no model server is configured; using ollama at "+s.BaseURL()+", which serves qwen3-32b") {
			t.Errorf("ask did not say which server it used:\n%s", r.stderr)
		}
	})
	t.Run("a local server serves other models", func(t *testing.T) {
		s := llmtest.New(t)
		s.ServeModels(`{"object":"list","data":[{"id":"qwen3:8b","object":"model"}]}`)
		r := terpWith(t, func(f *Factory) { f.LocalServers = []localServer{{Provider: "ollama", BaseURL: s.BaseURL()}} },
			nil, "", "ask", "What is 6*7?")
		if r.code != exitUsage {
			t.Fatalf("exit %d, want %d; stderr:\n%s", r.code, exitUsage, r.stderr)
		}
		for _, want := range []string{"no model server is configured", "GPUOS_API_KEY", "--provider ollama --model qwen3:8b", "TERP_BASE_URL", "terp doctor"} {
			if !strings.Contains(r.stderr, want) {
				t.Errorf("stderr lacks %q:\n%s", want, r.stderr)
			}
		}
		if n := len(s.Requests()); n != 0 {
			t.Errorf("%d chat requests were made", n)
		}
	})
	t.Run("nothing on this machine", func(t *testing.T) {
		r := terpWith(t, func(f *Factory) {
			f.LocalServers = []localServer{{Provider: "ollama", BaseURL: "http://127.0.0.1:9/v1"}}
		},
			nil, "", "ask", "What is 6*7?")
		if r.code != exitUsage || !strings.Contains(r.stderr, "no model server is configured") || strings.Contains(r.stderr, "try") {
			t.Fatalf("exit %d, stderr:\n%s", r.code, r.stderr)
		}
	})
}

// Doctor does not call a configuration fine that points at gpuOS without a
// key.
func TestDoctorFailsAKeylessDefault(t *testing.T) {
	r := terpWith(t, func(f *Factory) {
		f.LocalServers = []localServer{{Provider: "ollama", BaseURL: "http://127.0.0.1:9/v1"}}
	},
		map[string]string{"TERP_SANDBOX": "local"}, "", "doctor", "--json")
	if r.code == 0 {
		t.Fatalf("doctor passed a keyless default:\n%s", r.stdout)
	}
	if !strings.Contains(r.stdout, `"name": "configuration"`) || !strings.Contains(r.stdout, "No model server is configured") {
		t.Errorf("the configuration check does not say so:\n%s", r.stdout)
	}
}

// An -o that cannot take the downloads is a usage error before any model
// call.
func TestAskChecksTheOutputDirectory(t *testing.T) {
	s := llmtest.New(t)
	file := filepath.Join(terptest.TempDir(t), "a-file")
	if err := os.WriteFile(file, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, out := range []string{file, filepath.Join(file, "sub")} {
		r := terp(t, serverEnv(s), "", "ask", "-o", out, "What is 6*7?")
		if r.code != exitUsage || !strings.Contains(r.stderr, "is not a directory") {
			t.Errorf("-o %s: exit %d, stderr:\n%s", out, r.code, r.stderr)
		}
	}
	if n := len(s.Requests()); n != 0 {
		t.Errorf("%d chat requests were made", n)
	}
}
