package cli

import (
	"slices"
	"strings"
	"testing"

	"github.com/terpdev/terp/internal/config"
	"github.com/terpdev/terp/internal/store"
)

// completions asks the command tree what a shell would offer after args,
// through cobra's hidden __complete command as the shell scripts do, and
// returns the offers without the trailing directive line.
func completions(t *testing.T, env map[string]string, args ...string) []string {
	t.Helper()
	r := terp(t, env, "", append([]string{"__complete"}, args...)...)
	if r.code != 0 {
		t.Fatalf("terp __complete %s: exit %d\n%s", strings.Join(args, " "), r.code, r.stderr)
	}
	lines := strings.Split(strings.TrimRight(r.stdout, "\n"), "\n")
	if len(lines) == 0 || !strings.HasPrefix(lines[len(lines)-1], ":") {
		t.Fatalf("terp __complete %s: no directive in\n%s", strings.Join(args, " "), r.stdout)
	}
	return lines[:len(lines)-1]
}

func TestCompletionOffersEveryFixedChoice(t *testing.T) {
	tests := []struct {
		args []string
		want []string
	}{
		{[]string{"ask", "--network", ""}, []string{"none", "allowlist", "full"}},
		{[]string{"ask", "--exec-mode", ""}, []string{"kernel", "script"}},
		{[]string{"ask", "--sandbox", ""}, []string{"local", "docker", "cpuos", "kubernetes"}},
		{[]string{"ask", "--tool-dialect", ""}, []string{"auto", "native", "text"}},
		{[]string{"chat", "--image-protocol", ""}, []string{"auto", "kitty", "iterm2", "sixel", "halfblock", "none"}},
		{[]string{"chat", "--image-protocol", "h"}, []string{"halfblock"}},
		{[]string{"batch", "--sandbox", "d"}, []string{"docker"}},
		{[]string{"doctor", "--provider", "ll"}, []string{"llamacpp"}},
		{[]string{"ask", "--stream="}, []string{"true", "false"}},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			if got := completions(t, nil, tt.args...); !slices.Equal(got, tt.want) {
				t.Errorf("offers %q, want %q", got, tt.want)
			}
		})
	}
}

// TestEveryChoiceKeyCompletes keeps the table and the completions
// together: each flag of a setting with a fixed set of values offers
// exactly that set, on every command that has the flag.
func TestEveryChoiceKeyCompletes(t *testing.T) {
	seen := 0
	for _, k := range config.Keys() {
		choices := k.Choices()
		if k.Flag == "" || choices == nil {
			continue
		}
		for _, cmd := range []string{"ask", "chat", "batch", "doctor"} {
			root := newCmdRoot(NewFactory(), nil)
			sub, _, err := root.Find([]string{cmd})
			if err != nil || sub.Flags().Lookup(k.Flag) == nil {
				continue
			}
			seen++
			var got []string
			if k.Flag == "stream" {
				got = completions(t, nil, cmd, "--"+k.Flag+"=")
			} else {
				got = completions(t, nil, cmd, "--"+k.Flag, "")
			}
			if !slices.Equal(got, choices) {
				t.Errorf("terp %s --%s offers %q, want %q", cmd, k.Flag, got, choices)
			}
		}
	}
	if seen < 10 {
		t.Errorf("only %d flags with fixed choices found; the table lost its choices", seen)
	}
}

func TestCompletionOffersConversationIDs(t *testing.T) {
	env, dataDir := sharedEnv(t, nil)
	st, err := store.Open(dataDir)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []*store.Conversation{
		store.New("3f9c00000001", "ask", "Plot revenue\tper month", store.Settings{Model: "m"}, "local"),
		store.New("3f9c00000002", "chat", "", store.Settings{Model: "m"}, "local"),
		store.New("a1b2c3d4e5f6", "ask", "Which month grew the most?", store.Settings{Model: "m"}, "local"),
	} {
		if err := st.Save(c); err != nil {
			t.Fatal(err)
		}
	}
	all := []string{"3f9c00000001\tPlot revenue per month", "3f9c00000002\t(no question yet)", "a1b2c3d4e5f6\tWhich month grew the most?"}
	tests := []struct {
		args []string
		want []string
	}{
		{[]string{"ask", "--resume", ""}, all},
		{[]string{"chat", "--resume", "3F9C"}, all[:2]},
		{[]string{"sessions", "show", "a"}, all[2:]},
		{[]string{"sessions", "show", "a1b2c3d4e5f6", ""}, nil},
		{[]string{"sessions", "rm", "3f9c00000001", ""}, all[1:]},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			got := completions(t, env, tt.args...)
			slices.Sort(got)
			if !slices.Equal(got, tt.want) {
				t.Errorf("offers %q, want %q", got, tt.want)
			}
		})
	}
}

func TestVersionFlag(t *testing.T) {
	flag := terp(t, nil, "", "--version")
	cmd := terp(t, nil, "", "version")
	if flag.code != 0 || flag.stdout != cmd.stdout || !strings.HasPrefix(flag.stdout, "terp ") {
		t.Errorf("terp --version: exit %d, %q; terp version: %q", flag.code, flag.stdout, cmd.stdout)
	}
}
