package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/terpdev/terp/internal/terptest"
)

// nodeClients is the npm package of the tests that run real Node.js
// clients; it holds the MCP Inspector.
const nodeClients = "../../testdata/node"

// inspectorOutput is what the Inspector's CLI prints with --format json:
// the method's result, or an error. It holds the fields of the two methods
// the test calls.
type inspectorOutput struct {
	Result struct {
		Tools []struct {
			Name string `json:"name"`
		} `json:"tools"`
		Content []struct {
			Type string `json:"type"`
			Text string `json:"text"`
		} `json:"content"`
		IsError bool `json:"isError"`
	} `json:"result"`
	Error json.RawMessage `json:"error"`
}

// inspector is the MCP Inspector's command-line mode, run by our node from
// its bin script, so that nothing is downloaded as npx would.
type inspector struct {
	node, bin, home string
}

func newInspector(t *testing.T) inspector {
	node := terptest.Node(t, nodeClients, "@modelcontextprotocol/inspector")
	dir := filepath.Join(nodeClients, "node_modules", "@modelcontextprotocol", "inspector")
	raw, err := os.ReadFile(filepath.Join(dir, "package.json"))
	if err != nil {
		t.Fatal(err)
	}
	var pkg struct {
		Version string            `json:"version"`
		Bin     map[string]string `json:"bin"`
	}
	if err := json.Unmarshal(raw, &pkg); err != nil {
		t.Fatal(err)
	}
	bin, ok := pkg.Bin["mcp-inspector"]
	if !ok {
		t.Fatalf("the Inspector %s has no mcp-inspector bin: %v", pkg.Version, pkg.Bin)
	}
	bin, err = filepath.Abs(filepath.Join(dir, bin))
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("MCP Inspector %s", pkg.Version)
	// The Inspector keeps its catalog and secrets under ~/.mcp-inspector.
	return inspector{node: node, bin: bin, home: t.TempDir()}
}

// run runs the Inspector's CLI against target (a server command or
// transport flags) with args, and decodes what it printed, failing unless
// it exited 0 with one JSON object and no error in it.
func (in inspector) run(t *testing.T, target []string, args ...string) inspectorOutput {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	argv := append([]string{in.bin, "--cli", "--format", "json"}, target...)
	cmd := exec.CommandContext(ctx, in.node, append(argv, args...)...)
	cmd.Env = []string{"HOME=" + in.home, "PATH=" + os.Getenv("PATH")}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("inspector %s: %v\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), err, stdout.String(), stderr.String())
	}
	var out inspectorOutput
	if err := json.Unmarshal(stdout.Bytes(), &out); err != nil {
		t.Fatalf("inspector %s printed %q, not JSON: %v\nstderr:\n%s", strings.Join(args, " "), stdout.String(), err, stderr.String())
	}
	if out.Error != nil {
		t.Fatalf("inspector %s: error %s\nstderr:\n%s", strings.Join(args, " "), out.Error, stderr.String())
	}
	return out
}

// listAndRun is what a developer checks first with the Inspector: the
// tools are listed, and python runs code. It returns the text of the run.
func (in inspector) listAndRun(t *testing.T, target []string) string {
	list := in.run(t, target, "--method", "tools/list")
	var names []string
	for _, tool := range list.Result.Tools {
		names = append(names, tool.Name)
	}
	for _, want := range []string{"python", "run_python", "upload_file", "list_files", "download_file", "reset"} {
		if !slices.Contains(names, want) {
			t.Errorf("tools/list = %v, want %s among them", names, want)
		}
	}

	res := in.run(t, target, "--method", "tools/call", "--tool-name", "python", "--tool-arg", "code=print(6*7)").Result
	var text strings.Builder
	for _, c := range res.Content {
		if c.Type == "text" {
			text.WriteString(c.Text)
		}
	}
	if res.IsError || !strings.Contains(text.String(), "42") {
		t.Errorf("python print(6*7): isError %v, text %q; want 42", res.IsError, text.String())
	}
	return text.String()
}

// The MCP Inspector's command-line mode, the tool developers reach for to
// try an MCP server, lists terp's tools and runs Python, over stdio and
// over Streamable HTTP.
func TestMCPInspector(t *testing.T) {
	in := newInspector(t)
	t.Run("stdio", func(t *testing.T) {
		// By default (legacy) the Inspector asks for 2025-11-25 with
		// initialize; the modern era speaks 2026-07-28 over stdio too.
		// The Inspector gives the server only a few of its own variables
		// (HOME, PATH and the like): the rest of terp's home goes by -e.
		var target []string
		for k, v := range homeEnv(t, nil) {
			target = append(target, "-e", k+"="+v)
		}
		in.listAndRun(t, append(target, terptest.Binary(t), "mcp"))
		in.listAndRun(t, append(append([]string{"--protocol-era", "modern"}, target...), terptest.Binary(t), "mcp"))
	})
	t.Run("http", func(t *testing.T) {
		p := startProcess(t, homeEnv(t, nil), `serving MCP on (http://\S+/mcp)`, "mcp", "--http", "127.0.0.1:0")
		in.listAndRun(t, []string{"--transport", "http", "--server-url", p.base})
		// The sessionless protocol (2026-07-28), where the first run makes
		// a sandbox and gives its handle.
		got := in.listAndRun(t, []string{"--transport", "http", "--server-url", p.base, "--protocol-era", "modern"})
		if !strings.Contains(got, `[sandbox sbx_`) {
			t.Errorf("over the sessionless protocol the run's text is %q, want the new sandbox's handle", got)
		}
		if t.Failed() {
			t.Logf("terp mcp said:\n%s", p.log)
		}
	})
}
