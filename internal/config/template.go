package config

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/terpdev/terp/internal/fsext"
)

const templateHead = `# terp configuration file.
#
# Every setting is listed below, commented out, with its default. Uncomment a line to
# change it. Precedence, lowest first: built-in defaults, this file, TERP_* environment
# variables, command-line flags. "terp config show" prints each value and where it came from.
#
# base_url for common servers (the model must support tool calling):
#   gpuOS      "https://gpuos.si/v1"        key in GPUOS_API_KEY
#   Ollama     "http://localhost:11434/v1"  no key needed
#   vLLM       "http://localhost:8000/v1"   serve with --enable-auto-tool-choice --tool-call-parser NAME
#   llama.cpp  "http://localhost:8080/v1"   run llama-server with --jinja
# or set provider (gpuos, ollama, vllm, llamacpp, lmstudio, sglang, openai) to fill in
# base_url and api_key_env; "terp doctor" checks the whole setup.
#
# Durations are written "90s", "2m", "1h30m". Sizes are written "512MiB", "2GiB" (powers of
# 1024; "1G" means 1GiB) or "500MB" (powers of 1000), or as a plain number of bytes.
`

// Template returns the commented config file that init writes: every key, commented
// out, with its default, so the file documents itself and uncommenting a line is the
// whole edit.
func Template() string {
	c := Default()
	var b strings.Builder
	b.WriteString(templateHead)
	for _, f := range fields {
		b.WriteString("\n# " + f.Description + "\n")
		if f.more != "" {
			b.WriteString("# " + f.more + "\n")
		}
		var also []string
		if f.Env != "" {
			also = append(also, "env "+f.Env)
		}
		if f.Flag != "" {
			also = append(also, "flag --"+f.Flag)
		}
		if len(also) > 0 {
			b.WriteString("# Also: " + strings.Join(also, ", ") + ".\n")
		}
		fmt.Fprintf(&b, "# %s = %s\n", f.Name, f.bind(c).literal())
	}
	b.WriteString(templateProfiles)
	return b.String()
}

const templateProfiles = `
# Model profiles: settings for the models whose name matches a pattern ("*" matches any
# text, case is ignored, "Qwen/Qwen3-32B" is also matched as "Qwen3-32B"). terp has
# profiles for Qwen3, Qwen2.5, GLM-4, gpt-oss, Llama 3.x and Mistral; a table here adds one
# or overrides theirs. Keys: context_window (tokens), tool_dialect (auto, native, text),
# send_reasoning (send the model's reasoning back, as gpt-oss needs) and prompt (the
# wording of the prompt and the tool: default, gpt-oss, qwen3, glm-4). A profile here wins
# over the keys above written in this file; TERP_* variables and flags win over it.
#
#   [models."qwen3*"]
#   context_window = 32768
#   tool_dialect = "native"
`

// InitFile writes Template to path, creating its directory. The directory is 0700 and
// the file 0600 because a user may later put an API key in it. An existing file is kept
// unless force is set: it may hold the user's edits.
func InitFile(path string, force bool) error {
	src := FromFile(path, 0)
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return &Error{Source: src, Problem: "cannot create config directory: " + rootCause(err), Err: err}
	}
	if !force {
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if errors.Is(err, fs.ErrExist) {
			return &Error{Source: src, Problem: "config file already exists; use --force to overwrite it", Err: err}
		}
		if err != nil {
			return &Error{Source: src, Problem: "cannot create config file: " + rootCause(err), Err: err}
		}
		_, err = f.WriteString(Template())
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return &Error{Source: src, Problem: "cannot write config file: " + rootCause(err), Err: err}
		}
		return nil
	}
	// Overwrite through a temporary file and a rename, so an interrupted init never
	// leaves a half-written config behind.
	err := fsext.WriteFile(path, 0o600, func(w io.Writer) error {
		_, err := io.WriteString(w, Template())
		return err
	})
	if err != nil {
		return &Error{Source: src, Problem: "cannot write config file: " + rootCause(err), Err: err}
	}
	return nil
}
