import pandas as pd

p = pd.read_csv("/work/payments_export.csv")
p["payment_ref"] = p["payment_ref"].str.strip().str.upper()
p = p.drop_duplicates(subset="payment_ref")
t = p.loc[p["date"] == "2024-05-15", "amount_eur"].sum()
print(f"Payments dated 2024-05-15 total {t:.2f} EUR.")
print(f"ANSWER: {t:.2f} EUR")
