package config

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/BurntSushi/toml"
)

// Profile is what terp knows of a family of models, matched by name: how
// large its context is, how it calls tools, and whether it wants its
// reasoning back. Built-in profiles cover the common families; a config file
// adds or overrides them with tables such as
//
//	[models."qwen3*"]
//	context_window = 32768
//	tool_dialect = "native"
type Profile struct {
	// Pattern is matched against the model name, and against its last part
	// after a "/" (Hugging Face names), ignoring case. "*" matches any run
	// of characters, "?" any one.
	Pattern string `json:"pattern"`
	// ContextWindow is the context in tokens; 0 when the profile does not
	// say.
	ContextWindow int `json:"context_window,omitempty"`
	// ToolDialect is auto, native or text; "" when the profile does not say.
	ToolDialect string `json:"tool_dialect,omitempty"`
	// SendReasoning, when set, says whether the model's reasoning goes back
	// with its messages.
	SendReasoning *bool `json:"send_reasoning,omitempty"`
	// Prompt names the wording of the system prompt and the tool the family
	// was trained on (one of prompts); "" when the profile does not say.
	Prompt string `json:"prompt,omitempty"`
	// Images, when set, says whether the model takes images in its
	// messages (a vision model); a model no profile says so of is sent
	// them.
	Images *bool `json:"images,omitempty"`
	// Source is where the profile was written, or the zero Source for a
	// built-in one.
	Source Source `json:"-"`
}

// settings writes what the profile sets, as a config file would.
func (p Profile) settings() string {
	var parts []string
	if p.ContextWindow > 0 {
		parts = append(parts, fmt.Sprintf("context_window = %d", p.ContextWindow))
	}
	if p.ToolDialect != "" {
		parts = append(parts, fmt.Sprintf("tool_dialect = %q", p.ToolDialect))
	}
	if p.SendReasoning != nil {
		parts = append(parts, fmt.Sprintf("send_reasoning = %v", *p.SendReasoning))
	}
	if p.Prompt != "" {
		parts = append(parts, fmt.Sprintf("prompt = %q", p.Prompt))
	}
	if p.Images != nil {
		parts = append(parts, fmt.Sprintf("images = %v", *p.Images))
	}
	return strings.Join(parts, ", ")
}

func (p Profile) source() string {
	if p.BuiltIn() {
		return "built in"
	}
	return p.Source.String()
}

// BuiltIn reports whether the profile is one of terp's own.
func (p Profile) BuiltIn() bool { return p.Source.Kind == KindDefault }

func yes() *bool { b := true; return &b }
func no() *bool  { return new(bool) }

// builtinProfiles are the windows the model families ship with (what
// servers allow by default; a server may be started with less, which the
// server's own report or a context error then corrects). gpt-oss needs its
// reasoning between tool calls. The prompt is the wording each family's
// code tool was trained with: gpt-oss's python tool (a stateful Jupyter
// notebook, /mnt/data), Qwen-Agent's code interpreter (a Jupyter kernel),
// GLM-4's All Tools python (a notebook, /mnt/data).
var builtinProfiles = []Profile{
	{Pattern: "qwen3-coder*", ContextWindow: 262144, Prompt: "qwen3", Images: no()},
	{Pattern: "qwen3-vl*", ContextWindow: 262144, Prompt: "qwen3", Images: yes()},
	{Pattern: "qwen3*", ContextWindow: 32768, Prompt: "qwen3", Images: no()},
	{Pattern: "qwen2.5-vl*", ContextWindow: 32768, Prompt: "qwen3", Images: yes()},
	{Pattern: "qwen2.5*", ContextWindow: 32768, Prompt: "qwen3", Images: no()},
	{Pattern: "qwq*", ContextWindow: 32768, Prompt: "qwen3", Images: no()},
	{Pattern: "glm-4.5v*", ContextWindow: 65536, Prompt: "glm-4", Images: yes()},
	{Pattern: "glm-4.5*", ContextWindow: 131072, Prompt: "glm-4", Images: no()},
	{Pattern: "glm-4.6*", ContextWindow: 131072, Prompt: "glm-4", Images: no()},
	{Pattern: "glm-4*", ContextWindow: 32768, Prompt: "glm-4", Images: no()},
	{Pattern: "glm4*", ContextWindow: 32768, Prompt: "glm-4", Images: no()},
	{Pattern: "gpt-oss*", ContextWindow: 131072, SendReasoning: yes(), Prompt: "gpt-oss", Images: no()},
	{Pattern: "llama3.1*", ContextWindow: 131072, Images: no()},
	{Pattern: "llama3.2-vision*", ContextWindow: 131072, Images: yes()},
	{Pattern: "llama3.2*", ContextWindow: 131072, Images: no()},
	{Pattern: "llama3.3*", ContextWindow: 131072, Images: no()},
	{Pattern: "llama-3.1*", ContextWindow: 131072, Images: no()},
	{Pattern: "llama-3.2-*vision*", ContextWindow: 131072, Images: yes()},
	{Pattern: "llama-3.2*", ContextWindow: 131072, Images: no()},
	{Pattern: "llama-3.3*", ContextWindow: 131072, Images: no()},
	{Pattern: "meta-llama-3.1*", ContextWindow: 131072, Images: no()},
	{Pattern: "llama3*", ContextWindow: 8192, Images: no()},
	{Pattern: "llama-3*", ContextWindow: 8192, Images: no()},
	{Pattern: "meta-llama-3*", ContextWindow: 8192, Images: no()},
	{Pattern: "gemma3*", Images: yes()},
	{Pattern: "gemma-3*", Images: yes()},
	{Pattern: "mistral-small-3.1*", ContextWindow: 131072, Images: yes()},
	{Pattern: "mistral-nemo*", ContextWindow: 131072, Images: no()},
	{Pattern: "mistral*", ContextWindow: 32768, Images: no()},
}

// BuiltinProfiles returns terp's own model profiles.
func BuiltinProfiles() []Profile { return append([]Profile(nil), builtinProfiles...) }

// Profiles returns the profiles from the config file, in the order written.
func (c *Config) Profiles() []Profile { return append([]Profile(nil), c.profiles...) }

// Matches reports whether the profile applies to model.
func (p Profile) Matches(model string) bool {
	name := strings.ToLower(strings.TrimSpace(model))
	pat := strings.ToLower(p.Pattern)
	if glob(pat, name) {
		return true
	}
	i := strings.LastIndex(name, "/")
	return i >= 0 && glob(pat, name[i+1:])
}

// glob matches s against a pattern of literal text, "*" and "?".
func glob(pattern, s string) bool {
	if pattern == "" {
		return s == ""
	}
	switch pattern[0] {
	case '*':
		for i := 0; i <= len(s); i++ {
			if glob(pattern[1:], s[i:]) {
				return true
			}
		}
		return false
	case '?':
		return s != "" && glob(pattern[1:], s[1:])
	default:
		return s != "" && s[0] == pattern[0] && glob(pattern[1:], s[1:])
	}
}

// specificity ranks patterns: the more literal characters, the more
// specific ("qwen3-coder*" before "qwen3*").
func specificity(pattern string) int {
	return len(pattern) - strings.Count(pattern, "*") - strings.Count(pattern, "?")
}

// matching returns the profiles that apply to model, most authoritative
// first: the config file's before the built-in ones, the more specific
// pattern first within each.
func (c *Config) matching(model string) []Profile {
	var user, builtin []Profile
	for _, p := range c.profiles {
		if p.Matches(model) {
			user = append(user, p)
		}
	}
	for _, p := range builtinProfiles {
		if p.Matches(model) {
			builtin = append(builtin, p)
		}
	}
	for _, ps := range [][]Profile{user, builtin} {
		sort.SliceStable(ps, func(i, j int) bool { return specificity(ps[i].Pattern) > specificity(ps[j].Pattern) })
	}
	return append(user, builtin...)
}

// ModelSettings are the settings that depend on the model, resolved.
type ModelSettings struct {
	// ToolDialect is auto, native or text.
	ToolDialect string
	// ContextWindow is the context the user gave, in tokens (the
	// context_window key, or a profile in the config file); 0 when the
	// user gave none.
	ContextWindow int
	// ProfileWindow is a built-in profile's window, to use when neither
	// the user nor the server says; 0 when no profile knows.
	ProfileWindow int
	// SendReasoning says whether the model's reasoning goes back to it.
	SendReasoning bool
	// Prompt is the wording of the system prompt and the tool: one of
	// prompts, "default" when neither the user nor a profile says.
	Prompt string
	// Images says whether the model is sent the images users attach: yes
	// unless a profile says it takes none.
	Images bool
	// Profiles are the profiles that matched, most authoritative first.
	Profiles []Profile
}

// ForModel resolves the settings that depend on the model. For tool_dialect,
// prompt and context_window the order is, highest first: the key set in the
// environment or on the command line; a profile in the config file that
// matches the model; the key in the config file; a built-in profile; the
// default. (For context_window, what the server reports comes between the
// config file and the built-in profiles; the agent asks it.)
func (c *Config) ForModel(model string) ModelSettings {
	s := ModelSettings{Profiles: c.matching(model)}
	explicit := func(key string) bool { return c.sources[key].Kind >= KindEnv }
	inFile := func(key string) bool { return c.sources[key].Kind == KindFile }
	first := func(builtin bool, has func(Profile) bool) (Profile, bool) {
		for _, p := range s.Profiles {
			if p.BuiltIn() == builtin && has(p) {
				return p, true
			}
		}
		return Profile{}, false
	}
	hasDialect := func(p Profile) bool { return p.ToolDialect != "" }
	hasWindow := func(p Profile) bool { return p.ContextWindow > 0 }

	s.ToolDialect = c.ToolDialect
	if !explicit("tool_dialect") {
		if p, ok := first(false, hasDialect); ok {
			s.ToolDialect = p.ToolDialect
		} else if p, ok := first(true, hasDialect); ok && !inFile("tool_dialect") {
			s.ToolDialect = p.ToolDialect
		}
	}

	switch {
	case explicit("context_window") && c.ContextWindow > 0:
		s.ContextWindow = c.ContextWindow
	default:
		if p, ok := first(false, hasWindow); ok {
			s.ContextWindow = p.ContextWindow
		} else if inFile("context_window") {
			s.ContextWindow = c.ContextWindow
		}
	}
	if p, ok := first(true, hasWindow); ok {
		s.ProfileWindow = p.ContextWindow
	}

	for _, p := range s.Profiles {
		if p.SendReasoning != nil {
			s.SendReasoning = *p.SendReasoning
			break
		}
	}
	s.Images = true
	for _, p := range s.Profiles {
		if p.Images != nil {
			s.Images = *p.Images
			break
		}
	}

	// The prompt, in tool_dialect's order; "auto" is the key saying
	// nothing, and "default" the wording when nothing does.
	hasPrompt := func(p Profile) bool { return p.Prompt != "" }
	set := c.Prompt != "" && c.Prompt != "auto"
	s.Prompt = "default"
	switch p, ok := first(false, hasPrompt); {
	case set && explicit("prompt"):
		s.Prompt = c.Prompt
	case ok:
		s.Prompt = p.Prompt
	case set:
		s.Prompt = c.Prompt
	default:
		if p, ok := first(true, hasPrompt); ok {
			s.Prompt = p.Prompt
		}
	}
	return s
}

// profileKey is one setting a profile may hold.
type profileKey struct {
	name string
	bind func(p *Profile) value
}

var profileKeys = []profileKey{
	{"context_window", func(p *Profile) value { return intValue{&p.ContextWindow, 1} }},
	{"tool_dialect", func(p *Profile) value { return choiceValue{&p.ToolDialect, dialects} }},
	{"prompt", func(p *Profile) value { return choiceValue{&p.Prompt, prompts} }},
	{"send_reasoning", func(p *Profile) value {
		if p.SendReasoning == nil {
			p.SendReasoning = new(bool)
		}
		return boolValue{p.SendReasoning}
	}},
	{"images", func(p *Profile) value {
		if p.Images == nil {
			p.Images = new(bool)
		}
		return boolValue{p.Images}
	}},
}

func profileKeyNames() []string {
	names := make([]string, len(profileKeys))
	for i, k := range profileKeys {
		names[i] = k.name
	}
	return names
}

// profilesTable is the config file's table of model profiles.
const profilesTable = "models"

// loadProfiles reads the [models."PATTERN"] tables of the config file. Each
// problem is reported with its line, like any other key's.
func (c *Config) loadProfiles(md *toml.MetaData, raw toml.Primitive, data []byte, tableSrc Source) []error {
	var table map[string]toml.Primitive
	if v, _ := locate(md, raw); !isTable(v) || md.PrimitiveDecode(raw, &table) != nil {
		return []error{&Error{Source: tableSrc, Key: profilesTable,
			Problem: `models must be a table of model-name patterns, such as [models."qwen3*"] with context_window = 32768`}}
	}
	var errs []error
	for _, pattern := range subKeys(md.Keys(), profilesTable) {
		key := profilesTable + "." + strconv.Quote(pattern)
		prim := table[pattern]
		v, line := locate(md, prim)
		if line == 0 {
			line = scanLine(data, profilesTable)
		}
		src := FromFile(c.path, line)
		if !isTable(v) {
			errs = append(errs, &Error{Source: src, Key: key,
				Problem: fmt.Sprintf("%s must be a table of settings for the models it matches (%s), got %s",
					key, strings.Join(profileKeyNames(), ", "), describeTOML(v))})
			continue
		}
		if strings.TrimSpace(pattern) == "" {
			errs = append(errs, &Error{Source: src, Key: key, Problem: `a model pattern must not be empty; write one such as "qwen3*"`})
			continue
		}
		p := Profile{Pattern: pattern, Source: src}
		var settings map[string]toml.Primitive
		_ = md.PrimitiveDecode(prim, &settings)
		for _, name := range subKeys(md.Keys(), profilesTable, pattern) {
			sv, sline := locate(md, settings[name])
			ssrc := src
			if sline > 0 {
				ssrc = FromFile(c.path, sline)
			}
			var pk *profileKey
			for i := range profileKeys {
				if profileKeys[i].name == name {
					pk = &profileKeys[i]
				}
			}
			if pk == nil {
				msg := fmt.Sprintf("unknown key %q in %s", name, key)
				if m := closest(strings.ToLower(strings.ReplaceAll(name, "-", "_")), profileKeyNames()); m != "" {
					msg += fmt.Sprintf(" (did you mean %q?)", m)
				} else {
					msg += "; a model profile takes " + strings.Join(profileKeyNames(), ", ")
				}
				errs = append(errs, &Error{Source: ssrc, Key: key + "." + name, Problem: msg})
				continue
			}
			if err := pk.bind(&p).decode(sv); err != nil {
				errs = append(errs, valueError(ssrc, key+"."+name, err))
			}
		}
		c.profiles = append(c.profiles, p)
	}
	return errs
}

func isTable(v any) bool {
	_, ok := v.(map[string]any)
	return ok
}

// subKeys returns the distinct keys directly under the table at path, in
// the order the file has them.
func subKeys(keys []toml.Key, path ...string) []string {
	var out []string
	seen := map[string]bool{}
	for _, k := range keys {
		if len(k) <= len(path) {
			continue
		}
		match := true
		for i, p := range path {
			if k[i] != p {
				match = false
				break
			}
		}
		if name := k[len(path)]; match && !seen[name] {
			seen[name] = true
			out = append(out, name)
		}
	}
	return out
}

// dialects are the ways tool calls can travel; see package llm.
var dialects = []string{"auto", "native", "text"}

// prompts are the wordings of the system prompt and the tool; package
// agent holds their text (agent.Prompts lists the same names).
var prompts = []string{"default", "gpt-oss", "qwen3", "glm-4"}

// Prompts returns the names the prompt key and profiles accept, besides
// "auto".
func Prompts() []string { return append([]string(nil), prompts...) }

// optionalDuration holds a duration where 0 means "none" (max_time).
type optionalDuration struct{ p *time.Duration }

func (v optionalDuration) set(s string) error {
	s = strings.TrimSpace(s)
	if s == "" || s == "0" {
		*v.p = 0
		return nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		e := &invalid{want: durationForm + `, or 0 for no limit`, got: strconv.Quote(s)}
		if _, nerr := strconv.ParseFloat(s, 64); nerr == nil {
			e.hint = "add a unit: s, m or h"
		}
		return e
	}
	if d < 0 {
		return &invalid{want: "a positive duration, or 0 for no limit", got: strconv.Quote(s)}
	}
	*v.p = d
	return nil
}

func (v optionalDuration) decode(x any) error {
	switch x := x.(type) {
	case string:
		return v.set(x)
	case int64:
		if x == 0 {
			*v.p = 0
			return nil
		}
		return &invalid{want: durationForm + " in quotes", got: describeTOML(x),
			hint: fmt.Sprintf("write \"%ds\" for seconds", x)}
	default:
		return &invalid{want: durationForm, got: describeTOML(x)}
	}
}

func (v optionalDuration) String() string  { return formatDuration(*v.p) }
func (v optionalDuration) literal() string { return strconv.Quote(formatDuration(*v.p)) }
