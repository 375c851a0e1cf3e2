package cli

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/responses"

	"github.com/terpdev/terp/internal/llm/llmtest"
)

// aliveSince is the code a warm sandbox test runs: it prints when its
// interpreter started, in seconds since the machine booted (the kernel's
// clock, which the test reads too), and what /mnt/data holds, then leaves
// a file there.
const aliveSince = `import os
fields = open('/proc/self/stat').read().rsplit(')', 1)[1].split()
print('started', int(fields[19]) / os.sysconf('SC_CLK_TCK'))
print('files', sorted(f for f in os.listdir('/mnt/data') if not f.startswith('.')))
open('/mnt/data/mine.txt', 'w').write('mine')
`

// uptime is seconds since the machine booted, as /proc/uptime says.
func uptime(t *testing.T) float64 {
	t.Helper()
	b, err := os.ReadFile("/proc/uptime")
	if err != nil {
		t.Fatal(err)
	}
	var s float64
	if _, err := fmt.Sscan(string(b), &s); err != nil {
		t.Fatal(err)
	}
	return s
}

// warmGauge reads terp_warm_sandboxes from the metrics at base.
func warmGauge(t testing.TB, base string) int {
	t.Helper()
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	m := regexp.MustCompile(`(?m)^terp_warm_sandboxes (\d+)$`).FindSubmatch(b)
	if m == nil {
		t.Fatalf("no terp_warm_sandboxes in the metrics:\n%s", b)
	}
	n, _ := strconv.Atoi(string(m[1]))
	return n
}

// With --warm (1 by default), a Responses API container starts on a
// sandbox and an interpreter made before the request, and the next
// container on another one, made after: it never sees the first's files.
// With --warm 0 the interpreter is made after the request.
func TestServeWarmSandboxes(t *testing.T) {
	s := llmtest.Each(t, func(req llmtest.Request) llmtest.Reply {
		if res, err := req.ToolResult(); err == nil {
			return llmtest.Answer(strings.TrimSpace(res.Stdout))
		}
		return llmtest.RunPython(aliveSince)
	})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	for _, warm := range []bool{true, false} {
		t.Run(fmt.Sprintf("warm=%v", warm), func(t *testing.T) {
			args := []string{"--no-auth", "--metrics-listen", "127.0.0.1:0"}
			if !warm {
				args = append(args, "--warm", "0")
			}
			p := startGatewayProcess(t, homeEnv(t, serverEnv(s)), args...)
			m := regexp.MustCompile(`serving metrics on (http://\S+)/metrics`).FindStringSubmatch(p.log.String())
			if m == nil {
				t.Fatalf("terp serve did not say where its metrics are:\n%s", p.log)
			}
			metrics := m[1]
			c := p.client()
			var files []string
			for i := range 2 {
				if warm {
					waitFor(t, func() bool { return warmGauge(t, metrics) == 1 }, "a warm sandbox")
				} else if n := warmGauge(t, metrics); n != 0 {
					t.Fatalf("--warm 0 keeps %d warm sandboxes", n)
				}
				asked := uptime(t)
				resp, err := c.Responses.New(ctx, responses.ResponseNewParams{
					Model: "test-model", Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("When did you start?")},
					Tools: []responses.ToolUnionParam{codeTool()},
				})
				if err != nil || resp.Status != "completed" {
					t.Fatalf("response %d: %v %+v\n%s", i, err, resp, p.log)
				}
				var started float64
				var listed string
				if _, err := fmt.Sscanf(resp.OutputText(), "started %g\nfiles %s", &started, &listed); err != nil {
					t.Fatalf("response %d: %q: %v", i, resp.OutputText(), err)
				}
				// The start time counts in clock ticks (10 ms), rounded
				// down; a warm interpreter started well before its
				// ready frame, a cold one well after the request.
				if made := started < asked-0.01; made != warm {
					t.Errorf("container %d: its interpreter started at %.2f s, the request was sent at %.2f s; want it made before: %v",
						i, started, asked, warm)
				}
				files = append(files, listed)
			}
			for i, f := range files {
				if f != "[]" {
					t.Errorf("container %d found files in /mnt/data: %s", i, f)
				}
			}
		})
	}
}

// terp mcp keeps a sandbox made ahead too (--warm, 1 by default): the first
// python call of a client that starts it runs on an interpreter made
// before the call, once the client has taken a few seconds to call, as
// one whose model writes the code does. With --warm 0 it is made by the
// call.
func TestMCPWarmSandbox(t *testing.T) {
	for _, warm := range []bool{true, false} {
		t.Run(fmt.Sprintf("warm=%v", warm), func(t *testing.T) {
			var args []string
			if !warm {
				args = []string{"--warm", "0"}
			}
			c := mcpStdio(t, nil, args...)
			time.Sleep(3 * time.Second) // the model writing its first call
			asked := uptime(t)
			out := textOf(runCode(t, c, aliveSince))
			var started float64
			if _, err := fmt.Sscanf(out, "started %g", &started); err != nil {
				t.Fatalf("%q: %v", out, err)
			}
			if made := started < asked-0.01; made != warm {
				t.Errorf("its interpreter started at %.2f s, the call was sent at %.2f s; want it made before: %v", started, asked, warm)
			}
		})
	}
}
