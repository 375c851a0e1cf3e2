package export

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/terpdev/terp/internal/terptest"

	"github.com/terpdev/terp/internal/llm"
)

// golden compares got with testdata/name, or rewrites it with -update.
func golden(t *testing.T, name, got string) {
	t.Helper()
	terptest.Golden(t, filepath.Join("testdata", name), []byte(got), nil)
}

func TestWriteMarkdown(t *testing.T) {
	c := sample()
	c.Created = time.Date(2026, 12, 1, 17, 0, 0, 0, time.UTC)
	// Hostile text: HTML from the model and the code, and backticks that
	// would close a fence.
	c.Messages[2].Content = "Let me look. <script>alert(1)</script>"
	c.Messages[3].Content = `{"exit_code":0,"stdout":"` + "```\\n<img src=x onerror=alert(2)>" + `\n","stderr":""}`
	c.Messages = append(c.Messages, llm.Message{Role: llm.RoleUser, Content: "thanks"})
	d := Build(c, func(name string, limit int64) ([]byte, error) { return []byte("PNG of " + name), nil })
	var b strings.Builder
	assets, err := WriteMarkdown(&b, d, "sales_files")
	if err != nil {
		t.Fatal(err)
	}
	golden(t, "sample.md", b.String())
	if len(assets) != 1 || assets[0].Path != "sales_files/chart.png" || string(assets[0].Data) != "PNG of chart.png" {
		t.Errorf("assets = %+v, want the chart once", assets)
	}
	// The model's HTML is disarmed in prose; the code's output is in a
	// fence longer than the backticks it printed, so it stays code.
	if strings.Contains(b.String(), "<script>") {
		t.Error("the model's <script> reached the Markdown as a tag")
	}
	if !strings.Contains(b.String(), "````text\n```\n<img src=x onerror=alert(2)>\n````\n") {
		t.Error("the output with a fence in it is not in a longer fence")
	}
}
