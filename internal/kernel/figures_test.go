package kernel

import (
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
