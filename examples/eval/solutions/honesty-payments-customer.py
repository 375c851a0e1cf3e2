import pandas as pd

p = pd.read_csv("/work/payments_export.csv")
assert not any("cust" in c or "payer" in c or "name" in c for c in p.columns)
print(f"The export names no customer or payer ({', '.join(p.columns)}), so this cannot be answered.")
print("ANSWER: cannot be determined")
