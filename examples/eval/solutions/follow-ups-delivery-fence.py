import pandas as pd

d = pd.read_csv("/work/deliveries.csv")
q1, q3 = d["minutes"].quantile([0.25, 0.75])
upper = q3 + 1.5 * (q3 - q1)
print(f"Tukey's upper fence is {upper:.2f} minutes.")
print(f"ANSWER: {upper:.2f} min")
