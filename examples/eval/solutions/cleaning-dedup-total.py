import pandas as pd

p = pd.read_csv("/work/payments_export.csv")
p["payment_ref"] = p["payment_ref"].str.strip().str.upper()
p = p.drop_duplicates(subset="payment_ref")

print(f"Counting each payment once, they total {p['amount_eur'].sum():.2f} EUR.")
print(f"ANSWER: {p['amount_eur'].sum():.2f} EUR")
