package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/terpdev/terp/internal/llm/llmtest"
	"github.com/terpdev/terp/internal/terptest"
)

// notebookCell is code as gpt-oss and the models distilled from ChatGPT's
// analysis transcripts write it: /mnt/data, shell escapes, a magic,
// display() and ace_tools, a chart saved under /mnt/data, a progress bar.
const notebookCell = `%matplotlib inline
import pandas as pd, matplotlib.pyplot as plt
df = pd.read_csv('/mnt/data/sales.csv')
!ls /mnt/data
display(df.tail(2))
for i in range(3000):
    print(f"\rprogress {i * 100 // 2999}%", end="")
print()
df['growth'] = df['revenue'].diff()
best = df.loc[df['growth'].idxmax()]
import ace_tools
ace_tools.display_dataframe_to_user("Monthly growth", df)
df.plot(x='month', y='revenue')
plt.savefig('/mnt/data/out.png')
print("\x1b[32mbest\x1b[0m", best['month'], int(best['growth']))
`

// Code written in the habits of a Jupyter notebook runs as a user of one
// would expect, in both modes, called the way gpt-oss calls its tool (named
// python, the source raw): the upload is in /mnt/data, what the model reads
// is what a notebook shows (the table, the last state of the progress line,
// no colour codes), and the chart and the table saved under /mnt/data are
// downloaded once, by their names.
func TestNotebookHabits(t *testing.T) {
	for _, mode := range []string{"kernel", "script"} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			s := llmtest.New(t,
				llmtest.Fixed(llmtest.Reply{Calls: []llmtest.Call{{Name: "python", Arguments: notebookCell}}}),
				func(req llmtest.Request) llmtest.Reply {
					res, err := req.ToolResult()
					if err != nil {
						t.Fatal(err)
					}
					for _, want := range []string{"sales.csv\n", "11  2025-12   214900", "\nprogress 100%\n",
						"Monthly growth", "best 2025-12 26450\n"} {
						if !strings.Contains(res.Stdout, want) {
							t.Errorf("the model read no %q in:\n%s\nstderr:\n%s", want, res.Stdout, res.Stderr)
						}
					}
					if res.ExitCode != 0 || strings.Contains(res.Stdout, "\x1b") || strings.Count(res.Stdout, "progress") != 1 {
						t.Errorf("exit %d, stdout:\n%q", res.ExitCode, res.Stdout)
					}
					if !slices.Contains(res.Files, "out.png") || !slices.Contains(res.Files, "Monthly_growth.csv") {
						t.Errorf("files reported: %q", res.Files)
					}
					return llmtest.Answer("December grew the most.")
				})
			env := serverEnv(s)
			env["TERP_MODEL"] = "gpt-oss-20b"
			out := filepath.Join(terptest.TempDir(t), "out")
			r := terp(t, env, "", "ask", "--json", "--exec-mode", mode, "-o", out, "-f", salesCSV(t), "Which month grew the most?")
			if r.code != 0 {
				t.Fatalf("exit %d, stderr:\n%s", r.code, r.stderr)
			}
			var got askJSON
			if err := json.Unmarshal([]byte(r.stdout), &got); err != nil {
				t.Fatal(err)
			}
			var saved []string
			for _, f := range got.Files {
				saved = append(saved, f.SandboxPath)
				if _, err := os.Stat(f.Path); err != nil {
					t.Errorf("%s was not downloaded: %v", f.SandboxPath, err)
				}
			}
			slices.Sort(saved)
			if !slices.Equal(saved, []string{"/work/Monthly_growth.csv", "/work/out.png"}) {
				t.Errorf("files = %q, want the chart and the table, each once", saved)
			}
			if sys := s.Requests()[0].Messages[0].Content; !strings.Contains(sys, "/mnt/data/sales.csv") {
				t.Errorf("the gpt-oss prompt does not name the upload under /mnt/data:\n%s", sys)
			}
			// The history sent back names the call as the tool it is.
			if call := s.Requests()[1].Messages[2].ToolCalls; len(call) != 1 || call[0].Function.Name != "run_python" {
				t.Errorf("the call went back as %+v", call)
			}
		})
	}
}
