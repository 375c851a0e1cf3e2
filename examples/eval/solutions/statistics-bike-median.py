import pandas as pd

d = pd.read_csv("/work/deliveries.csv")
m = d.loc[d["vehicle"] == "bike", "minutes"].median()
print(f"Bikes take {m:.1f} minutes at the median.")
print(f"ANSWER: {m:.1f} min")
