package cli

import (
	"context"
	"net"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/terpdev/terp/internal/egress"
	"github.com/terpdev/terp/internal/llm/llmtest"
	"github.com/terpdev/terp/internal/terptest"
)

var pypiSkip sync.Once

// pypiRanges returns what network_trusted_ranges must say for the package
// index to be reachable through terp's proxy from this machine: nothing
// where pypi.org and files.pythonhosted.org resolve to public addresses,
// their own addresses where the network answers for them with one of its
// own (this workplace's resolver answers with an address in a documentation
// range, which the proxy refuses like any non-public one). Without the index
// the test is skipped, loudly.
func pypiRanges(t *testing.T) string {
	t.Helper()
	var ranges []string
	for _, host := range []string{"pypi.org", "files.pythonhosted.org"} {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		addrs, err := net.DefaultResolver.LookupNetIP(ctx, "ip4", host)
		cancel()
		if err == nil && len(addrs) > 0 {
			var c net.Conn
			c, err = (&net.Dialer{Timeout: 10 * time.Second}).Dial("tcp", net.JoinHostPort(addrs[0].String(), "443"))
			if c != nil {
				c.Close()
			}
		}
		if err != nil {
			terptest.SkipLoudly(t, &pypiSkip, "PYPI TESTS SKIPPED: the Python package index is not reachable from this machine ("+err.Error()+")")
		}
		for _, a := range addrs {
			if !egress.Public(a) {
				ranges = append(ranges, netip.PrefixFrom(a, 32).String())
			}
		}
	}
	return strings.Join(ranges, ",")
}

// %pip install and !pip install reach the real package index through
// terp's allowlist proxy, put the package in the conversation's package
// directory, and the next cell imports it, as does a follow-up turn (its
// sandbox paused and resumed, its kernel new), in both modes.
func TestPipInstallThroughTheAllowlist(t *testing.T) {
	ranges := pypiRanges(t)
	for _, tc := range []struct{ mode, install, pkg, module string }{
		{"kernel", "%pip install cowsay==6.1", "cowsay-6.1", "cowsay"},
		{"script", "!pip install tomli-w==1.2.0", "tomli-w-1.2.0", "tomli_w"},
	} {
		t.Run(tc.mode, func(t *testing.T) {
			t.Parallel()
			imported := "import " + tc.module + "\nprint(" + tc.module + ".__file__)"
			s := llmtest.New(t,
				llmtest.Fixed(llmtest.RunPython(tc.install+"\nprint('after the install')")),
				func(req llmtest.Request) llmtest.Reply {
					res, err := req.ToolResult()
					if err != nil || res.ExitCode != 0 || !strings.Contains(res.Stdout, "Successfully installed "+tc.pkg) ||
						!strings.Contains(res.Stdout, "after the install") {
						t.Errorf("the install: %+v %v", res, err)
					}
					return llmtest.RunPython(imported)
				},
				answerFromTool(t),
				llmtest.Fixed(llmtest.RunPython(imported)),
				answerFromTool(t))
			env := serverEnv(s)
			env["XDG_DATA_HOME"] = terptest.TempDir(t)
			args := []string{"ask", "--exec-mode", tc.mode, "--network", "allowlist"}
			if ranges != "" {
				args = append(args, "--network-trusted-ranges", ranges)
			}
			want := "/work/.terp/python/lib/python3"
			first := terp(t, env, "", append(args, "install it")...)
			if first.code != 0 || !strings.Contains(first.stdout, want) || !strings.Contains(first.stdout, tc.module) {
				t.Fatalf("first turn: exit %d\nstdout:\n%s\nstderr:\n%s", first.code, first.stdout, first.stderr)
			}
			next := terp(t, env, "", "ask", "--continue", "import it again")
			if next.code != 0 || !strings.Contains(next.stdout, want) {
				t.Errorf("follow-up: exit %d\nstdout:\n%s\nstderr:\n%s", next.code, next.stdout, next.stderr)
			}
		})
	}
}

// With the default policy (no network), %pip install says in one line that
// the sandbox has no network and how to allow the index, and the cell goes
// on.
func TestPipInstallWithoutNetwork(t *testing.T) {
	s := llmtest.New(t, llmtest.Fixed(llmtest.RunPython("%pip install cowsay\nprint('went on')")), answerFromTool(t))
	r := terp(t, serverEnv(s), "", "ask", "install it")
	if r.code != 0 {
		t.Fatalf("exit %d\n%s", r.code, r.stderr)
	}
	res, err := s.Requests()[1].ToolResult()
	if err != nil || res.ExitCode != 0 || res.Stdout != "went on\n" || strings.Count(res.Stderr, "\n") != 1 ||
		!strings.Contains(res.Stderr, "no network") || !strings.Contains(res.Stderr, "--network allowlist") {
		t.Errorf("the model read %+v (%v)", res, err)
	}
}
