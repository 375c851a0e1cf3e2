package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
)

// env turns a map into a Getenv, so tests never depend on the real environment.
func env(m map[string]string) func(string) string {
	return func(k string) string { return m[k] }
}

func writeConfig(t *testing.T, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "config.toml")
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// flags builds a flag set like the CLI's and parses args into it.
func flags(t *testing.T, args ...string) *pflag.FlagSet {
	t.Helper()
	fs := pflag.NewFlagSet("terp", pflag.ContinueOnError)
	fs.String("model", "", "")
	fs.Int("max-steps", 8, "")
	fs.Duration("timeout", 2*time.Minute, "")
	fs.String("memory-limit", "", "")
	fs.Bool("stream", true, "")
	fs.StringP("out", "o", "", "")
	fs.String("config", "", "")
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	return fs
}

func TestPrecedence(t *testing.T) {
	const file = `# a comment
model = "file-model"
max_steps = 3

timeout = "45s"
memory_limit = "512MiB"
stream = false
`
	tests := []struct {
		name  string
		env   map[string]string
		args  []string
		key   string
		want  string
		wantS string // Source.String, with PATH for the file
	}{
		{"default", nil, nil, "sandbox", "local", "default"},
		{"file over default", nil, nil, "model", "file-model", "file PATH:2"},
		{"file int", nil, nil, "max_steps", "3", "file PATH:3"},
		{"file duration", nil, nil, "timeout", "45s", "file PATH:5"},
		{"file size", nil, nil, "memory_limit", "512MiB", "file PATH:6"},
		{"file bool", nil, nil, "stream", "false", "file PATH:7"},
		{"env over file", map[string]string{"TERP_MODEL": "env-model"}, nil, "model", "env-model", "env TERP_MODEL"},
		{"env int over file", map[string]string{"TERP_MAX_STEPS": "5"}, nil, "max_steps", "5", "env TERP_MAX_STEPS"},
		{"env over default", map[string]string{"TERP_SANDBOX": "docker"}, nil, "sandbox", "docker", "env TERP_SANDBOX"},
		{"env bool", map[string]string{"TERP_STREAM": "yes"}, nil, "stream", "true", "env TERP_STREAM"},
		{"empty env is unset", map[string]string{"TERP_MODEL": ""}, nil, "model", "file-model", "file PATH:2"},
		{"flag over env", map[string]string{"TERP_MODEL": "env-model"}, []string{"--model", "flag-model"}, "model", "flag-model", "flag --model"},
		{"flag int over env", map[string]string{"TERP_MAX_STEPS": "5"}, []string{"--max-steps=12"}, "max_steps", "12", "flag --max-steps"},
		{"flag duration", nil, []string{"--timeout", "90s"}, "timeout", "1m30s", "flag --timeout"},
		{"flag size", map[string]string{"TERP_MEMORY_LIMIT": "1G"}, []string{"--memory-limit", "4GiB"}, "memory_limit", "4GiB", "flag --memory-limit"},
		{"flag out sets out_dir", nil, []string{"-o", "x"}, "out_dir", "x", "flag --out"},
		{"unchanged flag does not hide file", nil, nil, "timeout", "45s", "file PATH:5"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := writeConfig(t, file)
			fs := flags(t, tt.args...)
			c, err := Load(LoadOptions{Path: path, Getenv: env(tt.env), Flags: fs})
			if err != nil {
				t.Fatal(err)
			}
			got := valueOf(t, c, tt.key)
			if got != tt.want {
				t.Errorf("%s = %q, want %q", tt.key, got, tt.want)
			}
			wantS := strings.ReplaceAll(tt.wantS, "PATH", path)
			if s := c.Source(tt.key).String(); s != wantS {
				t.Errorf("Source(%s) = %q, want %q", tt.key, s, wantS)
			}
		})
	}
}

func valueOf(t *testing.T, c *Config, key string) string {
	t.Helper()
	for _, row := range c.Report().Keys {
		if row.Key == key {
			return row.Value
		}
	}
	t.Fatalf("no key %q", key)
	return ""
}

func TestTypedFields(t *testing.T) {
	path := writeConfig(t, `timeout = "90s"
sandbox_timeout = "1h"
memory_limit = "1G"
file_size_limit = 1048576
max_download_size = "1.5MB"
out_dir = "~/terp-out"
`)
	c, err := Load(LoadOptions{Path: path, Getenv: env(map[string]string{"HOME": "/home/u"})})
	if err != nil {
		t.Fatal(err)
	}
	if c.Timeout != 90*time.Second || c.SandboxTimeout != time.Hour {
		t.Errorf("durations = %v, %v", c.Timeout, c.SandboxTimeout)
	}
	if c.MemoryLimit != 1<<30 || c.FileSizeLimit != 1<<20 || c.MaxDownloadSize != 1_500_000 {
		t.Errorf("sizes = %d, %d, %d", c.MemoryLimit, c.FileSizeLimit, c.MaxDownloadSize)
	}
	if c.OutDir != "/home/u/terp-out" {
		t.Errorf("out_dir = %q, want ~ expanded", c.OutDir)
	}
	if c.MaxSteps != 8 || c.BaseURL != "https://gpuos.si/v1" || !c.Stream || c.MaxStdout != 4000 ||
		c.MaxStderr != 2000 || c.ProcessLimit != 256 {
		t.Errorf("defaults not kept: %+v", c)
	}
}

// TestFileErrors checks what a user sees for each kind of mistake in the file: where it
// is (file:line), which key, and what would be accepted.
func TestFileErrors(t *testing.T) {
	tests := []struct {
		name    string
		content string
		want    []string // each must appear, in order, in the message
		key     string
		line    int
	}{
		{"unknown key with suggestion", "model = \"m\"\n\nmax_step = 10\n",
			[]string{`PATH:3: unknown key "max_step" (did you mean "max_steps"?)`}, "max_step", 3},
		{"unknown key, dashes", "max-steps = 10\n",
			[]string{`PATH:1: unknown key "max-steps" (did you mean "max_steps"?)`}, "max-steps", 1},
		{"unknown key, alias", "\nendpoint = \"http://x\"\n",
			[]string{`PATH:2: unknown key "endpoint" (did you mean "base_url"?)`}, "endpoint", 2},
		{"unknown key, no suggestion", "colour = \"red\"\n",
			[]string{`PATH:1: unknown key "colour"; "terp config show" lists every key`}, "colour", 1},
		{"unknown table", "model = \"m\"\n[sandboxes]\nx = 1\n",
			[]string{`PATH:2: unknown table "sandboxes" (did you mean "sandbox"?)`}, "sandboxes", 2},
		{"unknown dotted key", "model = \"m\"\nfoo.bar = 1\n",
			[]string{`PATH:2: unknown table "foo"; terp's settings are plain top-level keys`}, "foo", 2},
		{"unknown table header", "[terp]\nmodel = \"m\"\n",
			[]string{`PATH:1: unknown table "terp"; terp's settings are plain top-level keys`}, "terp", 1},
		{"wrong type", "model = \"m\"\n\n\n\nmax_steps = \"ten\"\n",
			[]string{`PATH:5: max_steps must be an integer, got string "ten"`}, "max_steps", 5},
		{"quoted integer", "max_steps = \"10\"\n",
			[]string{`PATH:1: max_steps must be an integer, got string "10" (write it without quotes)`}, "max_steps", 1},
		{"float for integer", "max_stdout = 1.5\n",
			[]string{`PATH:1: max_stdout must be an integer, got float 1.5`}, "max_stdout", 1},
		{"negative steps", "max_steps = -1\n",
			[]string{`PATH:1: max_steps must be at least 1, got -1`}, "max_steps", 1},
		{"zero steps", "max_steps = 0\n",
			[]string{`PATH:1: max_steps must be at least 1, got 0`}, "max_steps", 1},
		{"bad duration", "timeout = \"2 minutes\"\n",
			[]string{`PATH:1: timeout must be a duration such as "90s", "2m" or "1h30m", got "2 minutes"`}, "timeout", 1},
		{"duration as number", "timeout = 120\n",
			[]string{`PATH:1: timeout must be a duration such as "90s", "2m" or "1h30m" in quotes, got integer 120 (write "120s" for seconds)`}, "timeout", 1},
		{"negative duration", "sandbox_timeout = \"-5m\"\n",
			[]string{`PATH:1: sandbox_timeout must be a positive duration, got "-5m"`}, "sandbox_timeout", 1},
		{"bad size", "memory_limit = \"2 gigs\"\n",
			[]string{`PATH:1: memory_limit must be a size such as "512MiB", "2GiB" or a number of bytes, got "2 gigs"`}, "memory_limit", 1},
		{"zero size", "file_size_limit = 0\n",
			[]string{`PATH:1: file_size_limit must be at least 1 byte, got integer 0`}, "file_size_limit", 1},
		{"unknown sandbox", "sandbox = \"dockr\"\n",
			[]string{`PATH:1: sandbox must be one of local, docker, cpuos, kubernetes, got "dockr" (did you mean "docker"?)`}, "sandbox", 1},
		{"bool as string", "stream = \"false\"\n",
			[]string{`PATH:1: stream must be true or false, got string "false" (write it without quotes)`}, "stream", 1},
		{"url without scheme", "base_url = \"localhost:8000/v1\"\n",
			[]string{`PATH:1: base_url must be an http:// or https:// URL such as "http://localhost:8000/v1", got "localhost:8000/v1"`}, "base_url", 1},
		{"empty model", "model = \"\"\n",
			[]string{`PATH:1: model must be a non-empty string`}, "model", 1},
		{"string as table", "[model]\nname = \"x\"\n",
			[]string{`PATH:1: model must be a string, got a table`}, "model", 1},
		{"syntax error", "model = \"m\"\nmax_steps = 8 9\n",
			[]string{`PATH:2:14: invalid TOML: `}, "", 2},
		{"unterminated string", "model = \"m\n",
			[]string{`PATH:1:`, `invalid TOML: `}, "", 1},
		{"duplicate key", "model = \"a\"\nmodel = \"b\"\n",
			[]string{`PATH:2:`, `invalid TOML: `, `model`}, "", 2},
		{"several problems are all reported", "max_step = 1\nsandbox = \"x\"\n",
			[]string{`PATH:1: unknown key "max_step"`, "\n", `PATH:2: sandbox must be one of`}, "max_step", 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := writeConfig(t, tt.content)
			c, err := Load(LoadOptions{Path: path, Getenv: env(nil)})
			if err == nil {
				t.Fatalf("no error; config %+v", c)
			}
			msg := err.Error()
			rest := msg
			for _, w := range tt.want {
				w = strings.ReplaceAll(w, "PATH", path)
				i := strings.Index(rest, w)
				if i < 0 {
					t.Fatalf("error\n  %s\ndoes not contain (in order)\n  %s", msg, w)
				}
				rest = rest[i+len(w):]
			}
			var ce *Error
			if !errors.As(err, &ce) {
				t.Fatalf("error %T is not a *config.Error", err)
			}
			if ce.Key != tt.key || ce.Source.Line != tt.line || ce.Source.Kind != KindFile {
				t.Errorf("Error{Key: %q, Line: %d, Kind: %v}, want key %q line %d in the file",
					ce.Key, ce.Source.Line, ce.Source.Kind, tt.key, tt.line)
			}
		})
	}
}

func TestAPIKeyEnvNeverEchoesAKey(t *testing.T) {
	const secret = "sk-proj-0123456789abcdef"
	path := writeConfig(t, "api_key_env = \""+secret+"\"\n")
	_, err := Load(LoadOptions{Path: path, Getenv: env(nil)})
	if err == nil {
		t.Fatal("no error for a key pasted into api_key_env")
	}
	if strings.Contains(err.Error(), secret) || strings.Contains(err.Error(), "0123") {
		t.Errorf("error shows the secret: %v", err)
	}
	if !strings.Contains(err.Error(), "TERP_API_KEY") {
		t.Errorf("error does not say where the key belongs: %v", err)
	}
}

func TestEnvErrors(t *testing.T) {
	tests := []struct {
		env  map[string]string
		want string
	}{
		{map[string]string{"TERP_MAX_STEPS": "ten"}, `env TERP_MAX_STEPS: max_steps must be an integer, got "ten"`},
		{map[string]string{"TERP_TIMEOUT": "120"}, `env TERP_TIMEOUT: timeout must be a duration such as "90s", "2m" or "1h30m", got "120" (add a unit: s, m or h)`},
		{map[string]string{"TERP_SANDBOX": "vm"}, `env TERP_SANDBOX: sandbox must be one of local, docker, cpuos, kubernetes, got "vm"`},
		{map[string]string{"TERP_STREAM": "maybe"}, `env TERP_STREAM: stream must be true or false, got "maybe"`},
		{map[string]string{"TERP_MEMORY_LIMIT": "lots"}, `env TERP_MEMORY_LIMIT: memory_limit must be a size`},
		{map[string]string{"TERP_BASE_URL": "gpuos.si"}, `env TERP_BASE_URL: base_url must be an http:// or https:// URL`},
	}
	for _, tt := range tests {
		t.Run(tt.want, func(t *testing.T) {
			dir := t.TempDir()
			tt.env["XDG_CONFIG_HOME"] = dir // no file there
			_, err := Load(LoadOptions{Getenv: env(tt.env)})
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error = %v, want it to contain %q", err, tt.want)
			}
			var ce *Error
			if !errors.As(err, &ce) || ce.Source.Kind != KindEnv {
				t.Errorf("want a *config.Error from the environment, got %#v", err)
			}
		})
	}
}

func TestSet(t *testing.T) {
	c := Default()
	if err := c.Set("max_steps", "12", FromFlag("max-steps")); err != nil {
		t.Fatal(err)
	}
	if c.MaxSteps != 12 || c.Source("max_steps").String() != "flag --max-steps" {
		t.Errorf("MaxSteps = %d from %v", c.MaxSteps, c.Source("max_steps"))
	}
	err := c.Set("max_steps", "0", FromFlag("--max-steps"))
	if err == nil || err.Error() != "flag --max-steps: max_steps must be at least 1, got 0" {
		t.Errorf("err = %v", err)
	}
	if c.MaxSteps != 12 {
		t.Errorf("a rejected value changed MaxSteps to %d", c.MaxSteps)
	}
	err = c.Set("max_stepz", "3", FromFlag("x"))
	if err == nil || !strings.Contains(err.Error(), `did you mean "max_steps"?`) {
		t.Errorf("err = %v", err)
	}
}

func TestApplyFlagsReportsBadValue(t *testing.T) {
	fs := flags(t, "--memory-limit", "huge")
	_, err := Load(LoadOptions{Path: writeConfig(t, ""), Getenv: env(nil), Flags: fs})
	if err == nil || !strings.Contains(err.Error(), "flag --memory-limit: memory_limit must be a size") {
		t.Fatalf("err = %v", err)
	}
}

func TestMissingFile(t *testing.T) {
	dir := t.TempDir()
	t.Run("explicit path is an error", func(t *testing.T) {
		path := filepath.Join(dir, "nope.toml")
		_, err := Load(LoadOptions{Path: path, Getenv: env(nil)})
		var ce *Error
		if !errors.As(err, &ce) || !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("err = %#v, want a *config.Error wrapping fs.ErrNotExist", err)
		}
		if !strings.Contains(err.Error(), path+": config file not found") {
			t.Errorf("err = %v", err)
		}
	})
	t.Run("default path uses defaults", func(t *testing.T) {
		c, err := Load(LoadOptions{Getenv: env(map[string]string{"XDG_CONFIG_HOME": dir})})
		if err != nil {
			t.Fatal(err)
		}
		if c.Path() != filepath.Join(dir, "terp", "config.toml") || c.FileExists() {
			t.Errorf("Path = %q, exists %v", c.Path(), c.FileExists())
		}
		if c.Model != "qwen3-32b" || c.Source("model").Kind != KindDefault {
			t.Errorf("model = %q from %v", c.Model, c.Source("model"))
		}
	})
	t.Run("default path is read", func(t *testing.T) {
		home := t.TempDir()
		path := filepath.Join(home, ".config", "terp", "config.toml")
		if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(`model = "m"`), 0o600); err != nil {
			t.Fatal(err)
		}
		c, err := Load(LoadOptions{Getenv: env(map[string]string{"HOME": home})})
		if err != nil {
			t.Fatal(err)
		}
		if c.Model != "m" || !c.FileExists() || c.Source("model") != FromFile(path, 1) {
			t.Errorf("model = %q from %v", c.Model, c.Source("model"))
		}
	})
}

func TestAPIKey(t *testing.T) {
	tests := []struct {
		name     string
		file     string
		env      map[string]string
		wantKey  string
		wantFrom string
		hint     string
	}{
		{"none", "", nil, "", "", "TERP_API_KEY or GPUOS_API_KEY"},
		{"default variable", "", map[string]string{"GPUOS_API_KEY": "g"}, "g", "GPUOS_API_KEY", "TERP_API_KEY or GPUOS_API_KEY"},
		{"TERP_API_KEY wins", "", map[string]string{"GPUOS_API_KEY": "g", "TERP_API_KEY": "t"}, "t", "TERP_API_KEY", "TERP_API_KEY or GPUOS_API_KEY"},
		{"renamed variable", "api_key_env = \"OPENROUTER_API_KEY\"\n",
			map[string]string{"GPUOS_API_KEY": "g", "OPENROUTER_API_KEY": "o"}, "o", "OPENROUTER_API_KEY", "TERP_API_KEY or OPENROUTER_API_KEY"},
		{"no variable", "api_key_env = \"\"\n", map[string]string{"GPUOS_API_KEY": "g"}, "", "", "TERP_API_KEY"},
		{"file key over variable", "api_key = \"f\"\n", map[string]string{"GPUOS_API_KEY": "g"}, "f", "file PATH:1", "TERP_API_KEY or GPUOS_API_KEY"},
		{"env over file key", "api_key = \"f\"\n", map[string]string{"TERP_API_KEY": "t"}, "t", "TERP_API_KEY", "TERP_API_KEY or GPUOS_API_KEY"},
		{"whitespace trimmed", "", map[string]string{"GPUOS_API_KEY": " g\n"}, "g", "GPUOS_API_KEY", "TERP_API_KEY or GPUOS_API_KEY"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := writeConfig(t, tt.file)
			c, err := Load(LoadOptions{Path: path, Getenv: env(tt.env)})
			if err != nil {
				t.Fatal(err)
			}
			key, from := c.APIKey()
			if key != tt.wantKey || from != strings.ReplaceAll(tt.wantFrom, "PATH", path) {
				t.Errorf("APIKey() = %q, %q; want %q, %q", key, from, tt.wantKey, tt.wantFrom)
			}
			if h := c.APIKeyHint(); h != tt.hint {
				t.Errorf("APIKeyHint() = %q, want %q", h, tt.hint)
			}
		})
	}
}

func TestMask(t *testing.T) {
	tests := []struct{ key, want string }{
		{"", "(not set)"},
		{"sk-abcdefghijklmnopf3c9", "sk-a…f3c9"},
		{"abcdefghijkl", "abcd…ijkl"}, // 12: long enough for both ends
		{"abcdefghijk", "…jk"},        // 11: only the tail
		{"token", "…en"},
		{"abcd", "…"},
		{"x", "…"},
	}
	for _, tt := range tests {
		if got := Mask(tt.key); got != tt.want {
			t.Errorf("Mask(%q) = %q, want %q", tt.key, got, tt.want)
		}
	}
}

func TestShow(t *testing.T) {
	const secret = "sk-live-abcdefghijklmnop1234"
	path := writeConfig(t, "model = \"m\"\napi_key = \""+secret+"\"\n")
	if err := os.Chmod(path, 0o644); err != nil {
		t.Fatal(err)
	}
	c, err := Load(LoadOptions{Path: path, Getenv: env(map[string]string{"TERP_MAX_STEPS": "4"})})
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := c.Show(&out); err != nil {
		t.Fatal(err)
	}
	text := out.String()
	if strings.Contains(text, secret) {
		t.Fatalf("show prints the key in full:\n%s", text)
	}
	for _, want := range []string{
		"config file: " + path + " (found)",
		"model ", "m ", "file " + path + ":1",
		"max_steps ", "4 ", "env TERP_MAX_STEPS",
		"api_key ", "sk-l…1234", "file " + path + ":2",
		"timeout ", "2m ", "default",
		"warning: api_key is set in " + path + ":2: keeping keys in files is discouraged",
		"chmod 600",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("show output lacks %q:\n%s", want, text)
		}
	}
	// Every key appears, in the table's order.
	var keys []string
	for _, k := range Keys() {
		keys = append(keys, regexp.QuoteMeta(k.Name))
	}
	if !regexp.MustCompile(`(?s)` + strings.Join(keys, `\s.*\n`)).MatchString(text) {
		t.Errorf("show does not list every key in order:\n%s", text)
	}

	b, err := json.Marshal(c.Report())
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(b), secret) {
		t.Fatalf("report JSON contains the key: %s", b)
	}
	if !strings.Contains(string(b), `{"key":"max_steps","value":"4","source":"env TERP_MAX_STEPS","env":"TERP_MAX_STEPS"}`) {
		t.Errorf("report JSON: %s", b)
	}
}

func TestShowKeyFromNamedVariable(t *testing.T) {
	dir := t.TempDir()
	c, err := Load(LoadOptions{Getenv: env(map[string]string{"XDG_CONFIG_HOME": dir, "GPUOS_API_KEY": "short"})})
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := c.Show(&out); err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`api_key +…rt +env GPUOS_API_KEY`).MatchString(out.String()) {
		t.Errorf("show:\n%s", out.String())
	}
	if !strings.Contains(out.String(), "(not found, using defaults)") {
		t.Errorf("show does not say the file is missing:\n%s", out.String())
	}

	c, err = Load(LoadOptions{Getenv: env(map[string]string{"XDG_CONFIG_HOME": dir})})
	if err != nil {
		t.Fatal(err)
	}
	out.Reset()
	if err := c.Show(&out); err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`api_key +\(not set\) +none`).MatchString(out.String()) ||
		!strings.Contains(out.String(), "No API key: set TERP_API_KEY or GPUOS_API_KEY") {
		t.Errorf("show:\n%s", out.String())
	}
}

func TestInitFile(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "terp")
	path := filepath.Join(dir, "config.toml")
	if err := InitFile(path, false); err != nil {
		t.Fatal(err)
	}
	for p, want := range map[string]fs.FileMode{dir: 0o700, path: 0o600} {
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != want {
			t.Errorf("%s mode %v, want %v", p, fi.Mode().Perm(), want)
		}
	}

	t.Run("template loads as written", func(t *testing.T) {
		c, err := Load(LoadOptions{Path: path, Getenv: env(nil)})
		if err != nil {
			t.Fatal(err)
		}
		for _, k := range Keys() {
			if s := c.Source(k.Name); s.Kind != KindDefault {
				t.Errorf("%s comes from %v, want default", k.Name, s)
			}
		}
	})

	t.Run("every line uncommented gives the defaults", func(t *testing.T) {
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		setting := regexp.MustCompile(`(?m)^# ([a-z_]+ = .*)$`)
		uncommented := setting.ReplaceAllString(string(data), "$1")
		c, err := Load(LoadOptions{Path: writeConfig(t, uncommented), Getenv: env(nil)})
		if err != nil {
			t.Fatal(err)
		}
		def := Default()
		for _, k := range Keys() {
			if c.Source(k.Name).Kind != KindFile {
				t.Errorf("template has no setting line for %s", k.Name)
			}
			if got, want := valueOf(t, c, k.Name), valueOf(t, def, k.Name); got != want {
				t.Errorf("%s = %q, default %q", k.Name, got, want)
			}
		}
		for _, want := range []string{"localhost:11434/v1", "localhost:8000/v1", "localhost:8080/v1", "gpuos.si/v1"} {
			if !strings.Contains(string(data), want) {
				t.Errorf("template lacks example %s", want)
			}
		}
	})

	t.Run("refuses to overwrite", func(t *testing.T) {
		if err := os.WriteFile(path, []byte("model = \"mine\"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		err := InitFile(path, false)
		var ce *Error
		if !errors.As(err, &ce) || !errors.Is(err, fs.ErrExist) || !strings.Contains(err.Error(), "use --force") {
			t.Fatalf("err = %v", err)
		}
		if data, _ := os.ReadFile(path); string(data) != "model = \"mine\"\n" {
			t.Errorf("file changed to %q", data)
		}
	})

	t.Run("force overwrites", func(t *testing.T) {
		if err := os.Chmod(path, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := InitFile(path, true); err != nil {
			t.Fatal(err)
		}
		data, _ := os.ReadFile(path)
		if string(data) != Template() {
			t.Errorf("file not replaced by the template")
		}
		fi, _ := os.Stat(path)
		if fi.Mode().Perm() != 0o600 {
			t.Errorf("mode %v after --force, want 0600", fi.Mode().Perm())
		}
		entries, _ := os.ReadDir(dir)
		if len(entries) != 1 {
			t.Errorf("left temporary files: %v", entries)
		}
	})
}

func TestPaths(t *testing.T) {
	tests := []struct {
		env        map[string]string
		cfg, data  string
		wantConfig string
	}{
		{map[string]string{"HOME": "/home/u"}, "/home/u/.config/terp/config.toml", "/home/u/.local/share/terp", ""},
		{map[string]string{"HOME": "/home/u", "XDG_CONFIG_HOME": "/cfg", "XDG_DATA_HOME": "/data"},
			"/cfg/terp/config.toml", "/data/terp", ""},
		{map[string]string{"HOME": "/home/u", "XDG_CONFIG_HOME": "rel", "XDG_DATA_HOME": "rel"},
			"/home/u/.config/terp/config.toml", "/home/u/.local/share/terp", ""},
	}
	for _, tt := range tests {
		if got := DefaultPath(env(tt.env)); got != tt.cfg {
			t.Errorf("DefaultPath(%v) = %q, want %q", tt.env, got, tt.cfg)
		}
		if got := DataDir(env(tt.env)); got != tt.data {
			t.Errorf("DataDir(%v) = %q, want %q", tt.env, got, tt.data)
		}
	}
}

func TestExplicitPathTilde(t *testing.T) {
	home := t.TempDir()
	if err := os.WriteFile(filepath.Join(home, "t.toml"), []byte(`max_steps = 2`), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := Load(LoadOptions{Path: "~/t.toml", Getenv: env(map[string]string{"HOME": home})})
	if err != nil {
		t.Fatal(err)
	}
	if c.MaxSteps != 2 {
		t.Errorf("MaxSteps = %d", c.MaxSteps)
	}
}

func TestParseSize(t *testing.T) {
	tests := []struct {
		in   string
		want int64
		ok   bool
	}{
		{"1024", 1024, true},
		{"2GiB", 2 << 30, true},
		{"512MiB", 512 << 20, true},
		{"1G", 1 << 30, true},
		{"1g", 1 << 30, true},
		{"100MB", 100_000_000, true},
		{"1.5GiB", 3 << 29, true},
		{"2 GiB", 2 << 30, true},
		{"64k", 64 << 10, true},
		{"", 0, false},
		{"GiB", 0, false},
		{"2 gigs", 0, false},
		{"-1", 0, false},
		{"99999999999999999999", 0, false},
		{"9000000TiB", 0, false},
	}
	for _, tt := range tests {
		got, err := parseSize(tt.in)
		if (err == nil) != tt.ok || got != tt.want {
			t.Errorf("parseSize(%q) = %d, %v; want %d, ok %v", tt.in, got, err, tt.want, tt.ok)
		}
	}
	for n, want := range map[int64]string{2 << 30: "2GiB", 100 << 20: "100MiB", 1536: "1536", 1 << 40: "1TiB", 1000: "1000"} {
		if got := formatSize(n); got != want {
			t.Errorf("formatSize(%d) = %q, want %q", n, got, want)
		}
	}
}

func TestFormatDuration(t *testing.T) {
	for d, want := range map[time.Duration]string{
		2 * time.Minute: "2m", 30 * time.Minute: "30m", 90 * time.Second: "1m30s",
		time.Hour: "1h", 90 * time.Minute: "1h30m", 1500 * time.Millisecond: "1.5s",
	} {
		if got := formatDuration(d); got != want {
			t.Errorf("formatDuration(%v) = %q, want %q", d, got, want)
		}
	}
}

// TestEveryFieldHasOneKey keeps Config and the key table from drifting apart: each
// exported field is bound by exactly one key, and each key binds a distinct field.
func TestEveryFieldHasOneKey(t *testing.T) {
	c := Default()
	bound := map[uintptr]string{}
	for _, f := range fields {
		p := reflect.ValueOf(f.bind(c)).Field(0).Pointer()
		if other, dup := bound[p]; dup {
			t.Errorf("%s and %s bind the same field", f.Name, other)
		}
		bound[p] = f.Name
		if _, err := json.Marshal(f.Key); err != nil || f.Description == "" || !strings.HasSuffix(f.Description, ".") {
			t.Errorf("%s: description must be a sentence", f.Name)
		}
	}
	rv := reflect.ValueOf(c).Elem()
	for i := 0; i < rv.NumField(); i++ {
		sf := rv.Type().Field(i)
		if !sf.IsExported() {
			continue
		}
		if _, ok := bound[rv.Field(i).Addr().Pointer()]; !ok {
			t.Errorf("Config.%s has no entry in the key table", sf.Name)
		}
	}
}

func TestPrewarmModules(t *testing.T) {
	tests := []struct {
		name    string
		file    string
		env     map[string]string
		want    []string
		wantErr string
	}{
		{name: "default", want: []string{"numpy", "pandas", "matplotlib"}},
		{name: "file array", file: "prewarm = [\"polars\", \"matplotlib.pyplot\"]\n", want: []string{"polars", "matplotlib.pyplot"}},
		{name: "file empty array turns it off", file: "prewarm = []\n", want: nil},
		{name: "env list", env: map[string]string{"TERP_PREWARM": " numpy , scipy.stats "}, want: []string{"numpy", "scipy.stats"}},
		{name: "file string", file: "prewarm = \"numpy\"\n", wantErr: "prewarm must be an array of module names"},
		{name: "file number element", file: "prewarm = [\"numpy\", 3]\n", wantErr: "an element integer 3"},
		{name: "bad name", env: map[string]string{"TERP_PREWARM": "numpy; import os"}, wantErr: "TERP_PREWARM"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			opts := LoadOptions{Getenv: env(tt.env)}
			if tt.file != "" {
				opts.Path = writeConfig(t, tt.file)
			} else {
				opts.Path = filepath.Join(t.TempDir(), "none.toml")
				if err := os.WriteFile(opts.Path, nil, 0o600); err != nil {
					t.Fatal(err)
				}
			}
			c, err := Load(opts)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want it to say %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(c.Prewarm, tt.want) && (len(c.Prewarm) != 0 || len(tt.want) != 0) {
				t.Errorf("Prewarm = %q, want %q", c.Prewarm, tt.want)
			}
		})
	}
}
