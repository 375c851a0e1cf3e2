import pandas as pd

p = pd.read_csv("/work/penguins.csv")
assert not any("age" in c.lower() for c in p.columns)
print(f"The data cannot tell: penguins.csv has no age column (only {', '.join(p.columns)}).")
print("ANSWER: cannot be determined")
