import pandas as pd

p = pd.read_csv("/work/payments_export.csv")
p["payment_ref"] = p["payment_ref"].str.strip().str.upper()
p = p.drop_duplicates(subset="payment_ref")

p.to_csv("/work/payments_clean.csv", index=False)
n = int((p["method"] == "card").sum())
print(f"Saved payments_clean.csv with {len(p)} payments; {n} were by card.")
print(f"ANSWER: {n}")
