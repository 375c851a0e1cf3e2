import pandas as pd

d = pd.read_csv("/work/deliveries.csv")
q1, q3 = d["minutes"].quantile(0.25), d["minutes"].quantile(0.75)
iqr = q3 - q1
out = (d["minutes"] < q1 - 1.5 * iqr) | (d["minutes"] > q3 + 1.5 * iqr)

print(f"{int(out.sum())} deliveries are outliers by Tukey's rule.")
print(f"ANSWER: {int(out.sum())}")
