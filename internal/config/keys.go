package config

import (
	"strings"

	"github.com/terpdev/terp/internal/egress"
	"github.com/terpdev/terp/internal/sandbox"
)

// Key describes one setting for help text and documentation: the CLI can build its flag
// help from it, and init and show are driven by the same table, so they cannot disagree.
type Key struct {
	Name        string // TOML key, e.g. "max_steps".
	Env         string // Environment variable, e.g. "TERP_MAX_STEPS"; empty if none.
	Flag        string // Flag name without dashes, e.g. "max-steps"; empty if none.
	Default     string // Default in the textual form env vars and flags take.
	Description string // One line, for init's template and help text.
}

// field binds a Key to the Config field that holds it. Adding a setting means adding a
// Config field and one entry here; loading, env vars, flags, show and init follow.
type field struct {
	Key
	secret bool                  // masked by show, never echoed
	more   string                // extra comment lines for the template
	bind   func(c *Config) value // the Config field as a value
}

// fields is every setting in the order show and init list them.
var fields = []field{
	{Key: Key{"provider", "TERP_PROVIDER", "provider", "",
		"Kind of server, which fills in base_url and api_key_env: gpuos, ollama, vllm, llamacpp, lmstudio, sglang or openai."},
		more: "A preset acts at the layer it is set in (file, environment, flag): base_url or api_key_env set in the same layer or a higher one win.",
		bind: func(c *Config) value { return providerValue{&c.Provider} }},
	{Key: Key{"base_url", "TERP_BASE_URL", "base-url", "https://gpuos.si/v1",
		"OpenAI-compatible endpoint that serves the model (it must support tool calling)."},
		bind: func(c *Config) value { return urlValue{&c.BaseURL} }},
	{Key: Key{"model", "TERP_MODEL", "model", "qwen3-32b",
		"Model name as the endpoint knows it."},
		bind: func(c *Config) value { return stringValue{&c.Model, true} }},
	{Key: Key{"api_key_env", "", "", "GPUOS_API_KEY",
		"Environment variable that holds the API key; TERP_API_KEY, when set, wins over it."},
		bind: func(c *Config) value { return envNameValue{&c.APIKeyEnv} }},
	{Key: Key{"api_key", "TERP_API_KEY", "", "",
		"API key. Discouraged here: anything that can read this file can read the key."},
		secret: true,
		more:   "Prefer TERP_API_KEY or api_key_env. Local servers usually need no key.",
		bind:   func(c *Config) value { return stringValue{p: &c.apiKey} }},
	{Key: Key{"sandbox", "TERP_SANDBOX", "sandbox", "local",
		"Where the model's code runs: local (bubblewrap), docker, cpuos or kubernetes (agent-sandbox)."},
		bind: func(c *Config) value { return choiceValue{&c.Sandbox, sandboxes} }},
	{Key: Key{"cpuos_url", "TERP_CPUOS_URL", "cpuos-url", "http://127.0.0.1:8377", "cpuos API root for --sandbox cpuos (the default is where terp sandbox serve listens)."}, bind: func(c *Config) value { return urlValue{&c.CpuosURL} }},
	{Key: Key{"cpuos_template", "TERP_CPUOS_TEMPLATE", "cpuos-template", "python", "cpuos sandbox template (the seed's python: CPython, numpy, pandas, matplotlib)."}, bind: func(c *Config) value { return stringValue{&c.CpuosTemplate, true} }},
	{Key: Key{"cpuos_api_key_env", "", "", "CPUOS_API_KEY", "Environment variable that holds the cpuos API key."}, bind: func(c *Config) value { return envNameValue{&c.CpuosAPIKeyEnv} }},
	{Key: Key{"kubernetes_namespace", "TERP_KUBERNETES_NAMESPACE", "kubernetes-namespace", "default",
		"Namespace of the SandboxWarmPool and of the SandboxClaims --sandbox kubernetes makes."},
		bind: func(c *Config) value { return stringValue{&c.KubernetesNamespace, true} }},
	{Key: Key{"kubernetes_warm_pool", "TERP_KUBERNETES_WARM_POOL", "kubernetes-warm-pool", "terp-python",
		"agent-sandbox SandboxWarmPool each conversation's sandbox is claimed from (examples/kubernetes makes terp-python)."},
		more: "The pods' sandbox servers take the token in cpuos_api_key_env (CPUOS_API_KEY); see docs/kubernetes.md.",
		bind: func(c *Config) value { return stringValue{&c.KubernetesWarmPool, true} }},
	{Key: Key{"kubernetes_router_url", "TERP_KUBERNETES_ROUTER_URL", "kubernetes-router-url", "",
		"agent-sandbox's sandbox-router, for a terp outside the cluster; empty: reach the pods directly, from inside it."},
		bind: func(c *Config) value { return stringValue{&c.KubernetesRouterURL, false} }},
	{Key: Key{"kubernetes_kubeconfig", "TERP_KUBERNETES_KUBECONFIG", "kubernetes-kubeconfig", "",
		"kubeconfig file for --sandbox kubernetes; empty: the pod's service account in a cluster, else $KUBECONFIG or ~/.kube/config."},
		bind: func(c *Config) value { return stringValue{&c.KubernetesKubeconfig, false} }},
	{Key: Key{"docker_image", "TERP_DOCKER_IMAGE", "docker-image", "python:3.12-slim",
		"Image for --sandbox docker; it needs python3 with numpy, pandas and matplotlib (see the README)."},
		more: "DOCKER_HOST picks the daemon, as for the docker command; make docker-test-image builds terp-python:debian12 without a registry.",
		bind: func(c *Config) value { return stringValue{&c.DockerImage, true} }},
	{Key: Key{"sandbox_uids", "TERP_SANDBOX_UIDS", "", sandbox.DefaultUIDs.String(),
		"Host uids local sandboxes run as when terp runs as root, one per sandbox (FIRST-LAST); the code is never host root."},
		more: "Pick a block no user, service or container on this machine uses; as another user, the code runs as that user.",
		bind: func(c *Config) value { return uidRangeValue{&c.SandboxUIDs} }},
	{Key: Key{"network", "TERP_NETWORK", "network", "none",
		"What the code may reach: none, allowlist (HTTP(S) to network_allow's hosts, through terp's proxy) or full (the host's network)."},
		bind: func(c *Config) value { return choiceValue{&c.Network, networkModes} }},
	{Key: Key{"network_allow", "TERP_NETWORK_ALLOW", "network-allow", strings.Join(egress.DefaultAllow, ","),
		"Hosts the allowlist mode lets through (comma-separated; *.example.com for its subdomains)."},
		more: "The default lets `pip install` reach the Python package index. Addresses are never allowed: the proxy resolves names and refuses private ones.",
		bind: func(c *Config) value { return hostsValue(&c.NetworkAllow) }},
	{Key: Key{"network_trusted_ranges", "TERP_NETWORK_TRUSTED_RANGES", "network-trusted-ranges", "",
		"Address ranges (CIDR, comma-separated) the allowlist proxy may reach although they are private or reserved: a package mirror on your network."},
		more: "Only names in network_allow are looked up and dialled; an address written as a number is still refused.",
		bind: func(c *Config) value { return prefixesValue(&c.NetworkTrustedRanges) }},
	{Key: Key{"exec_mode", "TERP_EXEC_MODE", "exec-mode", "kernel",
		"How code runs: kernel (one persistent Python per conversation; variables survive) or script (a new Python per step)."},
		bind: func(c *Config) value { return choiceValue{&c.ExecMode, execModes} }},
	{Key: Key{"prewarm", "TERP_PREWARM", "prewarm", "numpy,pandas,matplotlib",
		"Modules the Python worker imports while the model thinks about the first step, in both exec modes (comma-separated; empty for none)."},
		bind: func(c *Config) value { return modulesValue(&c.Prewarm) }},
	{Key: Key{"max_steps", "TERP_MAX_STEPS", "max-steps", "8",
		"Most model turns per question before terp stops without an answer."},
		bind: func(c *Config) value { return intValue{&c.MaxSteps, 1} }},
	{Key: Key{"max_tokens", "TERP_MAX_TOKENS", "max-tokens", "0",
		"Most tokens (prompt and completion, as the server counts them) one question may use; 0 means no cap."},
		bind: func(c *Config) value { return intValue{&c.MaxTokens, 0} }},
	{Key: Key{"max_time", "TERP_MAX_TIME", "max-time", "0s",
		"Longest one question may take, model and code together, e.g. \"10m\"; 0 means no cap."},
		bind: func(c *Config) value { return optionalDuration{&c.MaxTime} }},
	{Key: Key{"tool_dialect", "TERP_TOOL_DIALECT", "tool-dialect", "auto",
		"How tool calls travel: auto (the server's calls, else calls the model writes as text), native, or text (no tools sent)."},
		more: "Model profiles can set it per model: [models.\"qwen3*\"] tool_dialect = \"native\".",
		bind: func(c *Config) value { return choiceValue{&c.ToolDialect, dialects} }},
	{Key: Key{"prompt", "TERP_PROMPT", "prompt", "auto",
		"How the system prompt and the tool are worded: auto (the model's profile), default, gpt-oss, qwen3 or glm-4."},
		more: "Each family's wording is the one it was trained on (gpt-oss: a stateful Jupyter notebook, files in /mnt/data); the tool is the same. `terp config show` prints the prompt.",
		bind: func(c *Config) value { return choiceValue{&c.Prompt, append([]string{"auto"}, prompts...)} }},
	{Key: Key{"context_window", "TERP_CONTEXT_WINDOW", "context-window", "0",
		"The model's context in tokens; 0 means detect it (from the server, else a model profile)."},
		more: "When a conversation nears it, older outputs are shortened first.",
		bind: func(c *Config) value { return intValue{&c.ContextWindow, 0} }},
	{Key: Key{"timeout", "TERP_TIMEOUT", "timeout", "2m",
		"Longest one run of code may take before it is killed."},
		bind: func(c *Config) value { return durationValue{&c.Timeout} }},
	{Key: Key{"interrupt_grace", "TERP_INTERRUPT_GRACE", "interrupt-grace", "2s",
		"How long code gets to stop after an interrupt or its timeout before Python is restarted (its variables lost, /work kept)."},
		more: "The interrupt raises KeyboardInterrupt, and again halfway through the grace if the code still runs; code busy in C, or cleaning up, may need longer.",
		bind: func(c *Config) value { return durationValue{&c.InterruptGrace} }},
	{Key: Key{"sandbox_timeout", "TERP_SANDBOX_TIMEOUT", "sandbox-timeout", "30m",
		"Longest a sandbox may live, across all the runs of one conversation."},
		bind: func(c *Config) value { return durationValue{&c.SandboxTimeout} }},
	{Key: Key{"idle_pause", "TERP_IDLE_PAUSE", "idle-pause", "10m",
		"Pause a chat's sandbox after this long without a question; the next one resumes it (the kernel restarts)."},
		bind: func(c *Config) value { return durationValue{&c.IdlePause} }},
	{Key: Key{"stream", "TERP_STREAM", "stream", "true",
		"Show the model's text as it arrives; false waits for whole replies."},
		bind: func(c *Config) value { return boolValue{&c.Stream} }},
	{Key: Key{"max_stdout", "TERP_MAX_STDOUT", "max-stdout", "4000",
		"Characters of a run's standard output the model sees; longer output keeps its head and tail."},
		bind: func(c *Config) value { return intValue{&c.MaxStdout, 1} }},
	{Key: Key{"max_stderr", "TERP_MAX_STDERR", "max-stderr", "2000",
		"Characters of a run's standard error the model sees; longer output keeps its head and tail."},
		bind: func(c *Config) value { return intValue{&c.MaxStderr, 1} }},
	{Key: Key{"memory_limit", "TERP_MEMORY_LIMIT", "memory-limit", "2GiB",
		"Memory the sandbox may use, e.g. \"512MiB\", \"2GiB\"."},
		bind: func(c *Config) value { return sizeValue{&c.MemoryLimit} }},
	{Key: Key{"process_limit", "TERP_PROCESS_LIMIT", "process-limit", "256",
		"Processes and threads the sandbox may run at once."},
		bind: func(c *Config) value { return intValue{&c.ProcessLimit, 1} }},
	{Key: Key{"file_size_limit", "TERP_FILE_SIZE_LIMIT", "file-size-limit", "1GiB",
		"Largest file code in the sandbox may write."},
		bind: func(c *Config) value { return sizeValue{&c.FileSizeLimit} }},
	{Key: Key{"max_work_size", "TERP_MAX_WORK_SIZE", "max-work-size", "4GiB",
		"Disk the sandbox's /work may take, uploads included; code that grows it past this is stopped."},
		more: "It keeps code from filling the disk that holds terp's own store (local and cpuos sandboxes).",
		bind: func(c *Config) value { return sizeValue{&c.MaxWorkSize} }},
	{Key: Key{"max_download_size", "TERP_MAX_DOWNLOAD_SIZE", "max-download-size", "100MiB",
		"Largest file terp downloads from the sandbox; bigger ones are skipped."},
		bind: func(c *Config) value { return sizeValue{&c.MaxDownloadSize} }},
	{Key: Key{"max_download_total", "TERP_MAX_DOWNLOAD_TOTAL", "max-download-total", "1GiB",
		"Most disk the files of one turn may take when downloaded; files past it are skipped and named."},
		more: "Counted in the bytes the files take on disk, so sparse files count for their data, not their length.",
		bind: func(c *Config) value { return sizeValue{&c.MaxDownloadTotal} }},
	{Key: Key{"out_dir", "TERP_OUT_DIR", "out", "",
		"Where saved files are downloaded; empty means a new directory per conversation in the current one. A file already there is kept: the new one becomes chart-1.png."},
		bind: func(c *Config) value { return dirValue{&c.OutDir, c.home} }},
	{Key: Key{"image_protocol", "TERP_IMAGE_PROTOCOL", "image-protocol", "auto",
		"How terp chat draws images: auto (from the terminal), kitty, iterm2, sixel, halfblock or none."},
		bind: func(c *Config) value { return choiceValue{&c.ImageProtocol, imageProtocols} }},
}

// sandboxes lists the sandbox names the config accepts.
var sandboxes = []string{"local", "docker", "cpuos", "kubernetes"}

// networkModes are the egress modes of package sandbox.
var networkModes = []string{"none", "allowlist", "full"}

// execModes are the ways code can run; package kernel implements both.
var execModes = []string{"kernel", "script"}

// imageProtocols are the ways the chat UI can draw a chart; auto picks one
// from the terminal's environment.
var imageProtocols = []string{"auto", "kitty", "iterm2", "sixel", "halfblock", "none"}

// Keys returns every setting, in the order show and init list them.
func Keys() []Key {
	keys := make([]Key, len(fields))
	for i, f := range fields {
		keys[i] = f.Key
	}
	return keys
}

// Choices returns the values the setting accepts when they are a fixed set
// (a sandbox backend, a network mode, true or false), and nil when they
// are not. It asks the same value that parses the setting, so the shell
// completion built from it offers exactly what loading would accept.
func (k Key) Choices() []string {
	f, ok := lookup(k.Name)
	if !ok {
		return nil
	}
	if c, ok := f.bind(&Config{}).(chooser); ok {
		return c.choices()
	}
	return nil
}

// chooser is a value that accepts one of a fixed set of names.
type chooser interface{ choices() []string }

func lookup(name string) (field, bool) {
	for _, f := range fields {
		if f.Name == name {
			return f, true
		}
	}
	return field{}, false
}

func names() []string {
	ns := make([]string, len(fields))
	for i, f := range fields {
		ns[i] = f.Name
	}
	return ns
}
