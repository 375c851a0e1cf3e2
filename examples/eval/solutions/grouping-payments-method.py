import pandas as pd

p = pd.read_csv("/work/payments_export.csv")
p["payment_ref"] = p["payment_ref"].str.strip().str.upper()
p = p.drop_duplicates(subset="payment_ref")

t = p.groupby("method")["amount_eur"].sum()
print(f"{t.idxmax()} brought the most: {t.max():.2f} EUR.")
print(f"ANSWER: {t.idxmax()}, {t.max():.2f} EUR")
