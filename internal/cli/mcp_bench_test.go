package cli

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/terpdev/terp/internal/conversation"
	"github.com/terpdev/terp/internal/terptest"
)

// chartCode saves a small line chart, as a data question's answer does.
const chartCode = `import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt
fig, ax = plt.subplots(figsize=(4, 3))
ax.plot(range(10), [x * x for x in range(10)])
fig.savefig("/work/chart.png")
plt.close(fig)
`

// BenchmarkMCPStdio is one python call through `terp mcp` over stdio, as an
// MCP client makes it (the Go SDK's client, the real binary, the local
// sandbox's persistent kernel), beside the same code run in the same kernel
// kind without MCP (Conversation.Run in this process): what MCP, stdio and
// the result's content items add to a call. docs/benchmarks.md has the
// numbers.
func BenchmarkMCPStdio(b *testing.B) {
	home := terptest.TempDir(b)
	env := map[string]string{
		"HOME": home, "XDG_CONFIG_HOME": filepath.Join(home, "config"), "XDG_DATA_HOME": filepath.Join(home, "data"),
		"TERP_PREWARM": "matplotlib",
	}
	ctx := context.Background()
	cmd := exec.Command(terptest.Binary(b), "mcp")
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	cmd.Env = append(cmd.Env, "PATH="+os.Getenv("PATH"))
	cs, err := mcpClient().Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer cs.Close()
	viaMCP := func(b *testing.B, code string, images int) {
		for b.Loop() {
			res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "python", Arguments: map[string]any{"code": code}})
			if err != nil || res.IsError {
				b.Fatalf("python: %v %+v", err, res)
			}
			n := 0
			for _, c := range res.Content {
				if _, ok := c.(*mcp.ImageContent); ok {
					n++
				}
			}
			if n != images {
				b.Fatalf("%d images, want %d", n, images)
			}
		}
	}

	f := NewFactory()
	f.Getenv = func(k string) string { return env[k] }
	cfg, err := f.Config(nil)
	if err != nil {
		b.Fatal(err)
	}
	svc, err := f.Conversations()
	if err != nil {
		b.Fatal(err)
	}
	conv, err := svc.Open(ctx, cfg, conversation.Options{Origin: "mcp", KeepFiles: true})
	if err != nil {
		b.Fatal(err)
	}
	defer conv.Close(ctx)
	direct := func(b *testing.B, code string, files int) {
		for b.Loop() {
			res, err := conv.Run(ctx, code)
			if err != nil || res.ExitCode != 0 {
				b.Fatalf("run: %v %+v", err, res)
			}
			if len(res.Files) != files {
				b.Fatalf("%d files saved, want %d", len(res.Files), files)
			}
		}
	}
	// The first chart imports matplotlib in each kernel; the benchmark is
	// of the charts after it, as in a conversation.
	if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "python", Arguments: map[string]any{"code": chartCode}}); err != nil {
		b.Fatal(err)
	}
	if _, err := conv.Run(ctx, chartCode); err != nil {
		b.Fatal(err)
	}
	b.Run("print1/mcp", func(b *testing.B) { viaMCP(b, "print(1)", 0) })
	b.Run("print1/direct", func(b *testing.B) { direct(b, "print(1)", 0) })
	b.Run("chart/mcp", func(b *testing.B) { viaMCP(b, chartCode, 1) })
	b.Run("chart/direct", func(b *testing.B) { direct(b, chartCode, 1) })
}
