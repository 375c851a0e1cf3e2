import pandas as pd

d = pd.read_csv("/work/deliveries.csv")
q1, q3 = d["minutes"].quantile(0.25), d["minutes"].quantile(0.75)
iqr = q3 - q1
out = (d["minutes"] < q1 - 1.5 * iqr) | (d["minutes"] > q3 + 1.5 * iqr)

m = d.loc[~out & (d["vehicle"] == "van"), "minutes"].mean()
print(f"Without the outliers, vans took {m:.2f} minutes on average.")
print(f"ANSWER: {m:.2f} min")
