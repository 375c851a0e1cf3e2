import pandas as pd

p = pd.read_csv("/work/payments_export.csv")
p["payment_ref"] = p["payment_ref"].str.strip().str.upper()
p = p.drop_duplicates(subset="payment_ref")

print(f"There are {len(p)} distinct payments.")
print(f"ANSWER: {len(p)}")
