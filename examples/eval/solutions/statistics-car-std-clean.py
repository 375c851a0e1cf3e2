import pandas as pd

d = pd.read_csv("/work/deliveries.csv")
q1, q3 = d["minutes"].quantile(0.25), d["minutes"].quantile(0.75)
iqr = q3 - q1
out = (d["minutes"] < q1 - 1.5 * iqr) | (d["minutes"] > q3 + 1.5 * iqr)

s = d.loc[~out & (d["vehicle"] == "car"), "minutes"].std(ddof=1)
print(f"Without outliers the cars' times have a standard deviation of {s:.2f} minutes.")
print(f"ANSWER: {s:.2f} min")
