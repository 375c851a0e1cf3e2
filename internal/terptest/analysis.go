package terptest

import "fmt"

// AnalysisSteps are five tool calls of a typical analysis of
// examples/sales.csv, uploaded as /work/sales.csv, each importing and
// loading what it needs, as a model writes them when it does not count on
// a persistent session (and as it must in script mode). The kernel's
// benchmarks and the one against the seed's loop (internal/cli) run them.
var AnalysisSteps = []string{
	`import pandas as pd
df = pd.read_csv("/work/sales.csv")
print(df.shape)
print(df.describe())`,

	`import pandas as pd
df = pd.read_csv("/work/sales.csv", parse_dates=["month"])
df["growth_pct"] = df["revenue"].pct_change() * 100
print(df.round(2).to_string(index=False))`,

	`import pandas as pd
import matplotlib.pyplot as plt
df = pd.read_csv("/work/sales.csv", parse_dates=["month"])
fig, ax = plt.subplots(figsize=(8, 4))
ax.plot(df["month"], df["revenue"], marker="o")
ax.set_title("Monthly revenue")
ax.set_ylabel("revenue")
fig.autofmt_xdate()
fig.tight_layout()
fig.savefig("/work/chart.png", dpi=100)
plt.close(fig)
print("saved /work/chart.png")`,

	`import pandas as pd
df = pd.read_csv("/work/sales.csv", parse_dates=["month"])
df["rolling_3"] = df["revenue"].rolling(3).mean()
print(df.tail(6).to_string(index=False))`,

	`import pandas as pd
df = pd.read_csv("/work/sales.csv", parse_dates=["month"])
growth = df["revenue"].pct_change()
best = df.loc[growth.idxmax(), "month"]
print(f"total revenue {df['revenue'].sum():,}")
print(f"mean monthly growth {growth.mean() * 100:.2f}%")
print(f"best month {best:%Y-%m} ({growth.max() * 100:.1f}%)")`,
}

// PrintMiB is a program that writes n MiB to stdout in 1 KiB lines: the
// flood the output benchmarks time.
func PrintMiB(n int) string {
	return fmt.Sprintf("import sys\nline = \"x\" * 1023 + \"\\n\"\nfor _ in range(%d):\n    sys.stdout.write(line)\n", n<<10)
}
