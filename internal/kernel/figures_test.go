package kernel

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/terpdev/terp/internal/sandbox"
)

// TestFiguresSavedOnce checks that a figure the code saved itself is not
// saved again, with plt.savefig or Figure.savefig, also when the code
// switched matplotlib away from terp's backend (matplotlib.use('Agg') is
// common in scripts written for servers), and that figures left open are
// still saved.
func TestFiguresSavedOnce(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name    string
		prewarm []string
		setup   string
		backend string
	}{
		{"terp's backend", nil, "import matplotlib.pyplot as plt\n", "module://_terp_mpl_backend"},
		{"use before pyplot", nil, "import matplotlib\nmatplotlib.use('Agg')\nimport matplotlib.pyplot as plt\n", "agg"},
		// pyplot is imported with terp's backend first; use() switches it.
		{"use after pyplot", []string{"matplotlib"}, "import matplotlib\nmatplotlib.use('Agg')\nimport matplotlib.pyplot as plt\n", "agg"},
		{"switch_backend", []string{"matplotlib"}, "import matplotlib.pyplot as plt\nplt.switch_backend('agg')\n", "agg"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			sbx := newSandbox(t)
			k := startKernel(t, sbx, Options{Prewarm: tt.prewarm})

			wantOK(t, run(t, k, tt.setup+"print(plt.get_backend())"), tt.backend+"\n")
			// Saved by the code and left open.
			wantOK(t, run(t, k, "plt.plot([1, 2])\nplt.savefig('/work/chart.png')"), "")
			wantFiguresSaved(t, k, sbx)
			wantOK(t, run(t, k, "fig, ax = plt.subplots()\nax.bar(['a'], [1])\nfig.savefig('/work/bars.png')"), "")
			wantFiguresSaved(t, k, sbx)
			// Left open without being saved, or changed after saving.
			wantOK(t, run(t, k, "plt.figure()\nplt.plot([2, 1]);"), "")
			wantFiguresSaved(t, k, sbx, "figure_1.png")
			wantOK(t, run(t, k, "plt.plot([1, 3])\nplt.savefig('/work/changed.png')\nplt.title('changed after saving');"), "")
			wantFiguresSaved(t, k, sbx, "figure_2.png", "figure_1.png")
			wantOK(t, run(t, k, "fig, ax = plt.subplots()\nax.plot([3, 1])\nfig.savefig('/work/oo.png')\nax.set_title('changed');"), "")
			wantFiguresSaved(t, k, sbx, "figure_3.png", "figure_1.png", "figure_2.png")
		})
	}
}

// wantFiguresSaved fails unless the last run reported saving the figure
// named first in want, if any, and the figure_N.png files in /work are
// exactly want.
func wantFiguresSaved(t testing.TB, k *Kernel, sbx sandbox.Sandbox, want ...string) {
	t.Helper()
	k.mu.Lock()
	got := k.last.Figures
	k.mu.Unlock()
	if !slices.Equal(got, want[:min(len(want), 1)]) {
		t.Errorf("the run saved figures %q, want %q", got, want[:min(len(want), 1)])
	}
	files, err := sbx.List(t.Context(), sandbox.WorkDir)
	if err != nil {
		t.Fatal(err)
	}
	var onDisk []string
	for _, f := range files {
		if strings.HasPrefix(f.Path, "figure_") {
			onDisk = append(onDisk, f.Path)
		}
	}
	slices.Sort(onDisk)
	want = slices.Sorted(slices.Values(want))
	if !slices.Equal(onDisk, want) {
		t.Errorf("/work holds figures %q, want %q", onDisk, want)
	}
}

// TestFontCacheSeeded: in both modes a new sandbox's worker starts with the
// backend's matplotlib font cache, so the first chart does not build one,
// and the code's environment does not name the seed.
func TestFontCacheSeeded(t *testing.T) {
	t.Parallel()
	if testBackend.FontCache() == "" {
		t.Fatal("the local backend built no font cache")
	}
	for _, fresh := range []bool{false, true} {
		t.Run(fmt.Sprintf("fresh=%v", fresh), func(t *testing.T) {
			t.Parallel()
			k := startKernel(t, newSandbox(t), Options{Fresh: fresh})
			res := run(t, k, `import logging, os
logging.basicConfig(level=logging.DEBUG, format="%(message)s")
print(sorted(f for f in os.listdir(os.environ["MPLCONFIGDIR"]) if f.startswith("fontlist")))
print("TERP_FONTLIST" in os.environ)
import matplotlib.font_manager
`)
			if res.ExitCode != 0 || !strings.Contains(res.Stdout, "['fontlist-v") || !strings.HasSuffix(res.Stdout, "False\n") {
				t.Fatalf("exit %d, stdout %q, stderr %q", res.ExitCode, res.Stdout, res.Stderr)
			}
			if !strings.Contains(res.Stderr, "Using fontManager instance from") || strings.Contains(res.Stderr, "generated new fontManager") {
				t.Errorf("matplotlib did not use the seeded cache:\n%s", res.Stderr)
			}
		})
	}
}
