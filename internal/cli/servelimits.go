package cli

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/spf13/pflag"

	"github.com/terpdev/terp/internal/config"
	"github.com/terpdev/terp/internal/serve"
)

// unlimited is how a limit is lifted, in a flag or the keys file.
const unlimited = "unlimited"

// defaultKeyContainers is how many live containers a key may hold unless
// told otherwise: each holds a sandbox, so a client that never deletes
// them nor lets them expire must not exhaust the machine.
const defaultKeyContainers = 64

// keyOptions are the options a line of the keys file may carry after NAME
// KEY, each overriding its flag for that key.
var keyOptions = []struct {
	name string
	bits int // of the largest value
	set  func(*serve.Limits, int64)
}{
	{"containers", 32, func(l *serve.Limits, n int64) { l.Containers = int(n) }},
	{"rpm", 32, func(l *serve.Limits, n int64) { l.RPM = int(n) }},
	{"tokens_per_day", 64, func(l *serve.Limits, n int64) { l.TokensPerDay = n }},
}

// keyOptionsHelp says how to write the options, for the errors.
const keyOptionsHelp = "containers=N, rpm=N and tokens_per_day=N, N a whole number above 0 or unlimited"

// parseCount reads a limit of at most bits bits: a whole number above 0,
// or unlimited (0).
func parseCount(s string, bits int) (int64, error) {
	if s == unlimited {
		return 0, nil
	}
	n, err := strconv.ParseInt(s, 10, bits)
	switch {
	case err == nil && n == 0:
		return 0, fmt.Errorf("0 would refuse everything; write %s for no limit", unlimited)
	case err != nil || n < 0:
		return 0, fmt.Errorf("want a whole number above 0, or %s", unlimited)
	}
	return n, nil
}

// parseKeyOptions applies a keys file line's OPTION=VALUE words to
// limits, or says what is wrong with one.
func parseKeyOptions(words []string, limits *serve.Limits) error {
	seen := map[string]bool{}
	for _, w := range words {
		name, value, ok := strings.Cut(w, "=")
		if !ok {
			return fmt.Errorf("%q is not an option: after NAME KEY come OPTION=VALUE words, %s", w, keyOptionsHelp)
		}
		i := -1
		for j, o := range keyOptions {
			if o.name == name {
				i = j
			}
		}
		switch {
		case i < 0:
			return fmt.Errorf("%s is not an option; a key's options are %s", name, keyOptionsHelp)
		case seen[name]:
			return fmt.Errorf("%s is given twice", name)
		}
		seen[name] = true
		n, err := parseCount(value, keyOptions[i].bits)
		if err != nil {
			return fmt.Errorf("%s=%s: %v", name, value, err)
		}
		keyOptions[i].set(limits, n)
	}
	return nil
}

// countValue is a flag holding a limit, N or unlimited (held as 0).
type countValue[T int | int64] struct{ p *T }

func (v countValue[T]) Set(s string) error {
	bits := 32
	if _, big := any(*v.p).(int64); big {
		bits = 64
	}
	n, err := parseCount(s, bits)
	if err != nil {
		return err
	}
	*v.p = T(n)
	return nil
}

func (v countValue[T]) String() string {
	if *v.p == 0 {
		return unlimited
	}
	return strconv.FormatInt(int64(*v.p), 10)
}

func (v countValue[T]) Type() string { return "N" }

// sizeValue is a flag holding a size, written as the config file writes
// one ("512MiB").
type sizeValue struct{ p *int64 }

func (v sizeValue) Set(s string) error {
	n, err := config.ParseSize(s)
	if err != nil {
		return err
	}
	*v.p = n
	return nil
}

func (v sizeValue) String() string { return config.FormatSize(*v.p) }
func (v sizeValue) Type() string   { return "SIZE" }

// addLimitFlags adds the flags of the limits, the caps and the slow-client
// timeouts to fl, with their defaults in opts.
func addLimitFlags(fl *pflag.FlagSet, opts *serveOptions) {
	opts.limits = serve.Limits{Containers: defaultKeyContainers}
	opts.caps = serve.Caps{Upload: serve.DefaultMaxUpload, Request: serve.DefaultMaxRequest}
	opts.timeouts = defaultHTTPTimeouts
	fl.Var(countValue[int]{&opts.limits.Containers}, "key-containers", "live containers one key may hold (`N` or unlimited); a keys file line's containers=N overrides it")
	fl.Var(countValue[int]{&opts.limits.RPM}, "key-rpm", "requests per minute one key may send, to any endpoint (`N` or unlimited); rpm=N overrides it")
	fl.Var(countValue[int64]{&opts.limits.TokensPerDay}, "key-tokens-per-day", "prompt and completion tokens one key may use in a UTC day (`N` or unlimited); tokens_per_day=N overrides it")
	fl.Var(countValue[int]{&opts.caps.Containers}, "max-containers", "live containers of all keys together (`N` or unlimited)")
	fl.Var(countValue[int]{&opts.caps.Runs}, "max-runs", "code-interpreter turns running at once, across keys (`N` or unlimited); one more is refused with a 429")
	fl.Var(sizeValue{&opts.caps.Upload}, "max-upload", "largest file a client may upload (`SIZE`, such as 512MiB)")
	fl.Var(sizeValue{&opts.caps.Request}, "max-request-size", "largest JSON request body (`SIZE`, such as 8MiB)")
	fl.DurationVar(&opts.timeouts.header, "header-timeout", defaultHTTPTimeouts.header, "how long a client may take to send a request's headers")
	fl.DurationVar(&opts.timeouts.body, "body-timeout", defaultHTTPTimeouts.body, fmt.Sprintf("how long a client may take to send a request body, plus a second for each %s of it", config.FormatSize(minBodyRate)))
	fl.DurationVar(&opts.timeouts.idle, "idle-timeout", defaultHTTPTimeouts.idle, "how long a kept-alive connection may wait for its next request")
}

// checkTimeouts refuses a timeout that would leave slow clients unbounded.
func checkTimeouts(t httpTimeouts) error {
	for _, d := range []struct {
		flag  string
		value any
		ok    bool
	}{
		{"--header-timeout", t.header, t.header > 0},
		{"--body-timeout", t.body, t.body > 0},
		{"--idle-timeout", t.idle, t.idle > 0},
	} {
		if !d.ok {
			return usagef("%s is %v: give a duration above 0, such as 30s; a slow client would hold a connection for ever", d.flag, d.value)
		}
	}
	return nil
}
