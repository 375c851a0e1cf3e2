import pandas as pd

d = pd.read_csv("/work/deliveries.csv")
assert not any("dist" in c or "km" in c for c in d.columns)
print(f"deliveries.csv has no distance ({', '.join(d.columns)}): the data cannot tell.")
print("ANSWER: cannot be determined")
