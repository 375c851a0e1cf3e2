import pandas as pd

EUR_USD = 1.08
inv = pd.read_csv("/work/inventory_export.csv", dtype=str)
inv = inv[inv["sku"] != "sku"]
qty = inv["quantity"].str.replace(",", "").astype(int)
cur = inv["unit_cost"].str.split().str[0]
cost = inv["unit_cost"].str.split().str[1].astype(float)
usd = cost.where(cur == "USD", cost * EUR_USD)
print(f"The stock is worth ${(qty * usd).sum():,.0f} in US dollars.")
print(f"ANSWER: {(qty * usd).sum():.0f} USD")
