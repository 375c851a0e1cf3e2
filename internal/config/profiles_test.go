package config

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

func TestProvidersPrecedence(t *testing.T) {
	tests := []struct {
		name            string
		file            string
		env             map[string]string
		args            []string
		wantURL, urlSrc string
		wantKeyEnv      string
	}{
		{name: "no provider", wantURL: "https://gpuos.si/v1", urlSrc: "default", wantKeyEnv: "GPUOS_API_KEY"},
		{name: "provider in the file", file: "provider = \"ollama\"\n",
			wantURL: "http://localhost:11434/v1", urlSrc: "file PATH:1 (provider ollama)", wantKeyEnv: ""},
		{name: "the file's own base_url wins over its provider", file: "base_url = \"http://gpu-box:11434/v1\"\nprovider = \"ollama\"\n",
			wantURL: "http://gpu-box:11434/v1", urlSrc: "file PATH:1", wantKeyEnv: ""},
		{name: "env base_url wins over the file's provider", file: "provider = \"vllm\"\n", env: map[string]string{"TERP_BASE_URL": "http://other:9000/v1"},
			wantURL: "http://other:9000/v1", urlSrc: "env TERP_BASE_URL", wantKeyEnv: ""},
		{name: "env provider wins over the file's base_url", file: "base_url = \"http://gpu-box:8000/v1\"\n", env: map[string]string{"TERP_PROVIDER": "llamacpp"},
			wantURL: "http://localhost:8080/v1", urlSrc: "env TERP_PROVIDER (provider llamacpp)", wantKeyEnv: ""},
		{name: "env base_url wins over the env provider", env: map[string]string{"TERP_PROVIDER": "openai", "TERP_BASE_URL": "https://proxy/v1"},
			wantURL: "https://proxy/v1", urlSrc: "env TERP_BASE_URL", wantKeyEnv: "OPENAI_API_KEY"},
		{name: "flag provider wins over env base_url", env: map[string]string{"TERP_BASE_URL": "http://other:9000/v1"}, args: []string{"--provider", "lmstudio"},
			wantURL: "http://localhost:1234/v1", urlSrc: "flag --provider (provider lmstudio)", wantKeyEnv: ""},
		{name: "flag base_url wins over flag provider", args: []string{"--provider", "ollama", "--base-url", "http://x:1/v1"},
			wantURL: "http://x:1/v1", urlSrc: "flag --base-url", wantKeyEnv: ""},
		{name: "openai key variable", args: []string{"--provider", "openai"},
			wantURL: "https://api.openai.com/v1", urlSrc: "flag --provider (provider openai)", wantKeyEnv: "OPENAI_API_KEY"},
		{name: "the file's api_key_env wins over its provider", file: "provider = \"openai\"\napi_key_env = \"MY_KEY\"\n",
			wantURL: "https://api.openai.com/v1", urlSrc: "file PATH:1 (provider openai)", wantKeyEnv: "MY_KEY"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := writeConfig(t, tt.file)
			fs := flags(t)
			fs.String("provider", "", "")
			fs.String("base-url", "", "")
			if err := fs.Parse(tt.args); err != nil {
				t.Fatal(err)
			}
			c, err := Load(LoadOptions{Path: path, Getenv: env(tt.env), Flags: fs})
			if err != nil {
				t.Fatal(err)
			}
			if c.BaseURL != tt.wantURL || c.APIKeyEnv != tt.wantKeyEnv {
				t.Errorf("base_url %q api_key_env %q, want %q %q", c.BaseURL, c.APIKeyEnv, tt.wantURL, tt.wantKeyEnv)
			}
			if got, want := c.Source("base_url").String(), strings.ReplaceAll(tt.urlSrc, "PATH", path); got != want {
				t.Errorf("Source(base_url) = %q, want %q", got, want)
			}
		})
	}
}

func TestProviderErrors(t *testing.T) {
	_, err := Load(LoadOptions{Path: writeConfig(t, "provider = \"olama\"\n"), Getenv: env(nil)})
	if err == nil || !strings.Contains(err.Error(), `:1: provider must be one of gpuos, ollama`) || !strings.Contains(err.Error(), `did you mean "ollama"?`) {
		t.Errorf("error = %v", err)
	}
	c, err := Load(LoadOptions{Getenv: env(map[string]string{"TERP_PROVIDER": "llama.cpp", "HOME": t.TempDir()})})
	if err != nil || c.BaseURL != "http://localhost:8080/v1" {
		t.Errorf("llama.cpp spelled with a dot: %v %+v", err, c)
	}
}

func TestProfileMatching(t *testing.T) {
	const file = `model = "m"

[models."qwen3*"]
context_window = 65536
tool_dialect = "native"

[models."*-awq"]
send_reasoning = true
`
	c, err := Load(LoadOptions{Path: writeConfig(t, file), Getenv: env(nil)})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		model         string
		dialect       string
		window, guess int
		reasoning     bool
	}{
		{"qwen3-32b", "native", 65536, 32768, false},
		{"Qwen/Qwen3-32B-AWQ", "native", 65536, 32768, true},
		{"qwen3-coder:30b", "native", 65536, 262144, false},
		{"gpt-oss:20b", "auto", 0, 131072, true},
		{"openai/gpt-oss-120b", "auto", 0, 131072, true},
		{"llama3.1:8b", "auto", 0, 131072, false},
		{"meta-llama/Llama-3.3-70B-Instruct", "auto", 0, 131072, false},
		{"llama3:8b", "auto", 0, 8192, false},
		{"mistral-small:24b", "auto", 0, 32768, false},
		{"qwen2.5-coder:7b", "auto", 0, 32768, false},
		{"glm-4-32b-0414", "auto", 0, 32768, false},
		{"unknown-model", "auto", 0, 0, false},
	}
	for _, tt := range tests {
		s := c.ForModel(tt.model)
		if s.ToolDialect != tt.dialect || s.ContextWindow != tt.window || s.ProfileWindow != tt.guess || s.SendReasoning != tt.reasoning {
			t.Errorf("ForModel(%q) = dialect %q window %d guess %d reasoning %v, want %q %d %d %v",
				tt.model, s.ToolDialect, s.ContextWindow, s.ProfileWindow, s.SendReasoning, tt.dialect, tt.window, tt.guess, tt.reasoning)
		}
	}
	ps := c.Profiles()
	if len(ps) != 2 || ps[0].Pattern != "qwen3*" || ps[0].Source.Line != 3 || ps[1].Source.Line != 7 {
		t.Errorf("profiles = %+v", ps)
	}
}

// Explicit keys in the environment or on the command line beat a profile;
// a profile in the file beats the file's own top-level key.
func TestProfileOverride(t *testing.T) {
	path := writeConfig(t, "tool_dialect = \"text\"\ncontext_window = 1000\n[models.\"qwen3*\"]\ntool_dialect = \"native\"\n")
	c, err := Load(LoadOptions{Path: path, Getenv: env(nil)})
	if err != nil {
		t.Fatal(err)
	}
	if s := c.ForModel("qwen3:8b"); s.ToolDialect != "native" || s.ContextWindow != 1000 {
		t.Errorf("qwen3 = %+v, want the profile's dialect and the file's window", s)
	}
	if s := c.ForModel("llama3.1:8b"); s.ToolDialect != "text" || s.ContextWindow != 1000 || s.ProfileWindow != 131072 {
		t.Errorf("llama = %+v, want the file's keys", s)
	}
	c, err = Load(LoadOptions{Path: path, Getenv: env(map[string]string{"TERP_TOOL_DIALECT": "auto", "TERP_CONTEXT_WINDOW": "4096"})})
	if err != nil {
		t.Fatal(err)
	}
	if s := c.ForModel("qwen3:8b"); s.ToolDialect != "auto" || s.ContextWindow != 4096 {
		t.Errorf("qwen3 with env = %+v, want the environment's", s)
	}
}

func TestProfileErrors(t *testing.T) {
	tests := []struct {
		name, file, want string
	}{
		{"unknown key", "[models.\"qwen3*\"]\ncontext_window = 1\ncontext_windw = 2\n", `PATH:3: unknown key "context_windw" in models."qwen3*" (did you mean "context_window"?)`},
		{"wrong type", "model = \"m\"\n[models.\"qwen3*\"]\ncontext_window = \"big\"\n", `PATH:3: models."qwen3*".context_window must be an integer, got string "big"`},
		{"bad dialect", "[models.\"x\"]\ntool_dialect = \"hermes\"\n", `PATH:2: models."x".tool_dialect must be one of auto, native, text, got "hermes"`},
		{"not a table", "[models]\n\"qwen3*\" = 5\n", `PATH:2: models."qwen3*" must be a table of settings`},
		{"models not a table", "models = 3\n", `PATH:1: models must be a table of model-name patterns`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := writeConfig(t, tt.file)
			_, err := Load(LoadOptions{Path: path, Getenv: env(nil)})
			want := strings.ReplaceAll(tt.want, "PATH", path)
			if err == nil || !strings.Contains(err.Error(), want) {
				t.Fatalf("error = %v\nwant %s", err, want)
			}
			var ce *Error
			if !errors.As(err, &ce) || ce.Source.Kind != KindFile {
				t.Errorf("error %T is not a *config.Error from the file", err)
			}
		})
	}
}

func TestBudgetKeys(t *testing.T) {
	c, err := Load(LoadOptions{Path: writeConfig(t, "max_tokens = 5000\nmax_time = \"90s\"\n"), Getenv: env(nil)})
	if err != nil || c.MaxTokens != 5000 || c.MaxTime.Seconds() != 90 {
		t.Fatalf("%v %+v", err, c)
	}
	c, err = Load(LoadOptions{Getenv: env(map[string]string{"TERP_MAX_TIME": "0", "HOME": t.TempDir()})})
	if err != nil || c.MaxTime != 0 {
		t.Fatalf("max_time 0: %v", err)
	}
	if _, err := Load(LoadOptions{Path: writeConfig(t, "max_time = 30\n"), Getenv: env(nil)}); err == nil || !strings.Contains(err.Error(), `write "30s" for seconds`) {
		t.Errorf("max_time as a number: %v", err)
	}
}

func TestShowListsTheModelsProfiles(t *testing.T) {
	path := writeConfig(t, "model = \"qwen3-32b\"\n\n[models.\"qwen3*\"]\ncontext_window = 65536\n")
	c, err := Load(LoadOptions{Path: path, Getenv: env(nil)})
	if err != nil {
		t.Fatal(err)
	}
	rows := c.Report().Profiles
	if len(rows) != 2 || rows[0].Source != "file "+path+":3" || rows[0].Settings != "context_window = 65536" || rows[1].Source != "built in" {
		t.Errorf("profiles = %+v", rows)
	}
	var b strings.Builder
	if err := c.Show(&b); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "model profiles for qwen3-32b:") {
		t.Errorf("show:\n%s", b.String())
	}
}

// The prompt's wording follows the model's family, and the prompt key
// names another family for a model whose name says nothing: from the
// environment over every profile, from the file under a profile of the
// file's own, "auto" saying nothing.
func TestPromptForModel(t *testing.T) {
	tests := []struct {
		file string
		env  map[string]string
		want map[string]string // model -> prompt
	}{
		{"", nil, map[string]string{
			"gpt-oss:20b": "gpt-oss", "openai/gpt-oss-120b": "gpt-oss", "Qwen/Qwen3-32B": "qwen3",
			"qwen3-coder:30b": "qwen3", "qwen2.5:7b": "qwen3", "glm-4-32b-0414": "glm-4", "THUDM/glm-4-9b-chat": "glm-4",
			"llama3.1:8b": "default", "my-finetune": "default",
		}},
		{"prompt = \"gpt-oss\"\n", nil, map[string]string{"my-finetune": "gpt-oss", "qwen3:8b": "gpt-oss"}},
		{"prompt = \"auto\"\n", nil, map[string]string{"my-finetune": "default", "qwen3:8b": "qwen3"}},
		{"prompt = \"glm-4\"\n[models.\"my-*\"]\nprompt = \"qwen3\"\n", nil, map[string]string{"my-finetune": "qwen3", "other": "glm-4"}},
		{"[models.\"my-*\"]\nprompt = \"qwen3\"\n", map[string]string{"TERP_PROMPT": "default"}, map[string]string{"my-finetune": "default", "gpt-oss:20b": "default"}},
	}
	for _, tt := range tests {
		c, err := Load(LoadOptions{Path: writeConfig(t, tt.file), Getenv: env(tt.env)})
		if err != nil {
			t.Fatal(err)
		}
		for model, want := range tt.want {
			if got := c.ForModel(model).Prompt; got != want {
				t.Errorf("file %q env %v: ForModel(%q).Prompt = %q, want %q", tt.file, tt.env, model, got, want)
			}
		}
	}
	if _, err := Load(LoadOptions{Path: writeConfig(t, "[models.\"x\"]\nprompt = \"chatgpt\"\n"), Getenv: env(nil)}); err == nil ||
		!strings.Contains(err.Error(), "gpt-oss") {
		t.Errorf("an unknown prompt in a profile: %v, want an error naming the choices", err)
	}
}

func TestTrustedRanges(t *testing.T) {
	c, err := Load(LoadOptions{Path: writeConfig(t, "network_trusted_ranges = [\"10.20.1.0/16\", \"fd00::/8\"]\n"), Getenv: env(nil)})
	if err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(c.TrustedRanges()); got != "[10.20.0.0/16 fd00::/8]" {
		t.Errorf("TrustedRanges = %s", got)
	}
	_, err = Load(LoadOptions{Path: writeConfig(t, ""), Getenv: env(map[string]string{"TERP_NETWORK_TRUSTED_RANGES": "10.0.0.1"})})
	if err == nil || !strings.Contains(err.Error(), "10.20.0.0/16") {
		t.Errorf("an address without a prefix length: %v, want an error with an example", err)
	}
}
