import pandas as pd

d = pd.read_csv("/work/deliveries.csv")
assert "drone" not in set(d["vehicle"].str.lower())
print(f"There are no drone deliveries (vehicles: {', '.join(sorted(d['vehicle'].unique()))}), so there is no such mean.")
print("ANSWER: cannot be determined")
