package cli

import (
	"context"
	"io"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/terpdev/terp/internal/serve"
	"github.com/terpdev/terp/internal/terptest"
)

// The keys file takes the old "NAME KEY" lines as they were, and lines
// with options that set that key's limits over the flags' defaults; an
// option it does not know, or cannot read, is refused with its line and
// what to write.
func TestServeKeysFile(t *testing.T) {
	const (
		aliceKey = "sk-alice-0123456789abcdef"
		bobKey   = "sk-bob-0123456789abcdef01"
	)
	defaults := serve.Limits{Containers: 64, RPM: 600}
	for _, tt := range []struct {
		name, file string
		want       map[string]serve.Principal
		err        string
	}{
		{name: "names and keys", file: "# keys\nalice " + aliceKey + "\n\nbob " + bobKey + "\n",
			want: map[string]serve.Principal{aliceKey: {Name: "alice", Limits: defaults}, bobKey: {Name: "bob", Limits: defaults}}},
		{name: "every option", file: "alice " + aliceKey + " containers=8 rpm=60 tokens_per_day=2000000\n",
			want: map[string]serve.Principal{aliceKey: {Name: "alice", Limits: serve.Limits{Containers: 8, RPM: 60, TokensPerDay: 2_000_000}}}},
		{name: "some options, the rest the defaults", file: "alice " + aliceKey + " tokens_per_day=5000000000\nbob " + bobKey + " rpm=unlimited\n",
			want: map[string]serve.Principal{
				aliceKey: {Name: "alice", Limits: serve.Limits{Containers: 64, RPM: 600, TokensPerDay: 5_000_000_000}},
				bobKey:   {Name: "bob", Limits: serve.Limits{Containers: 64}},
			}},
		{name: "unknown option", file: "alice " + aliceKey + "\nbob " + bobKey + " tpm=100\n",
			err: ":2: tpm is not an option; a key's options are containers=N, rpm=N and tokens_per_day=N"},
		{name: "option without a value", file: "alice " + aliceKey + " rpm\n",
			err: `:1: "rpm" is not an option: after NAME KEY come OPTION=VALUE words`},
		{name: "not a number", file: "alice " + aliceKey + " rpm=lots\n", err: ":1: rpm=lots: want a whole number above 0, or unlimited"},
		{name: "negative", file: "alice " + aliceKey + " containers=-1\n", err: ":1: containers=-1: want a whole number above 0"},
		{name: "zero", file: "alice " + aliceKey + " containers=0\n", err: ":1: containers=0: 0 would refuse everything; write unlimited for no limit"},
		{name: "too many containers", file: "alice " + aliceKey + " containers=99999999999\n", err: ":1: containers=99999999999: want a whole number"},
		{name: "an option twice", file: "alice " + aliceKey + " rpm=1 rpm=2\n", err: ":1: rpm is given twice"},
		{name: "no key", file: "alice\n", err: ":1: want NAME KEY, and options after them"},
		{name: "an option for a key", file: "alice rpm=60\n", err: ":1: the key of alice is shorter than 16 characters"},
		{name: "a key twice", file: "alice " + aliceKey + " rpm=1\nbob " + aliceKey + "\n", err: ":2: bob has the key of alice"},
		{name: "no keys", file: "# none yet\n", err: " holds no keys"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(terptest.TempDir(t), "keys")
			if err := os.WriteFile(path, []byte(tt.file), 0o600); err != nil {
				t.Fatal(err)
			}
			got, err := readKeysFile(path, defaults)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), path+tt.err) {
					t.Fatalf("err = %v, want one saying %q", err, tt.err)
				}
				if code := exitCode(err, io.Discard); code != exitUsage {
					t.Errorf("exit %d for %v; want a usage error", code, err)
				}
				return
			}
			if err != nil || !maps.Equal(got, tt.want) {
				t.Errorf("got %+v, %v\nwant %+v", got, err, tt.want)
			}
		})
	}
}

// The limit flags take N or unlimited, sizes with units and durations,
// and refuse what would leave a limit meaningless, saying what to write.
func TestServeLimitFlags(t *testing.T) {
	parse := func(args ...string) (*serveOptions, error) {
		var got *serveOptions
		cmd := newCmdServe(NewFactory(), func(_ context.Context, o *serveOptions) error { got = o; return checkTimeouts(o.timeouts) })
		cmd.SetArgs(args)
		cmd.SetOut(io.Discard)
		cmd.SetErr(io.Discard)
		cmd.SilenceUsage, cmd.SilenceErrors = true, true
		return got, cmd.ExecuteContext(context.Background())
	}
	o, err := parse()
	if err != nil {
		t.Fatal(err)
	}
	if want := (serve.Limits{Containers: defaultKeyContainers}); o.limits != want {
		t.Errorf("default limits %+v, want %+v", o.limits, want)
	}
	if want := (serve.Caps{Upload: 512 << 20, Request: 8 << 20}); o.caps != want {
		t.Errorf("default caps %+v, want %+v", o.caps, want)
	}
	o, err = parse("--key-containers", "unlimited", "--key-rpm", "60", "--key-tokens-per-day", "5000000000",
		"--max-containers", "100", "--max-runs", "8", "--max-upload", "2GiB", "--max-request-size", "512KiB",
		"--header-timeout", "5s", "--body-timeout", "1m", "--idle-timeout", "30s")
	if err != nil {
		t.Fatal(err)
	}
	if want := (serve.Limits{RPM: 60, TokensPerDay: 5_000_000_000}); o.limits != want {
		t.Errorf("limits %+v, want %+v", o.limits, want)
	}
	if want := (serve.Caps{Containers: 100, Runs: 8, Upload: 2 << 30, Request: 512 << 10}); o.caps != want {
		t.Errorf("caps %+v, want %+v", o.caps, want)
	}
	if o.timeouts.header.Seconds() != 5 || o.timeouts.body.Seconds() != 60 || o.timeouts.idle.Seconds() != 30 {
		t.Errorf("timeouts %+v", o.timeouts)
	}
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"--key-rpm", "0"}, "0 would refuse everything; write unlimited"},
		{[]string{"--max-runs", "some"}, "want a whole number above 0, or unlimited"},
		{[]string{"--max-upload", "2 gigs"}, `must be a size such as "512MiB"`},
		{[]string{"--header-timeout", "0s"}, "--header-timeout is 0s: give a duration above 0"},
	} {
		if _, err := parse(tt.args...); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%q: %v; want an error saying %q", tt.args, err, tt.want)
		}
	}
}
