import pandas as pd

inv = pd.read_csv("/work/inventory_export.csv", dtype=str)
inv = inv[inv["sku"] != "sku"]
qty = inv["quantity"].str.replace(",", "").astype(int)
value = inv["unit_weight"].str.split().str[0].astype(float)
unit = inv["unit_weight"].str.split().str[1]
kg = value.where(unit == "kg", value / 1000)
print(f"All the stock together weighs {(qty * kg).sum():,.0f} kg.")
print(f"ANSWER: {(qty * kg).sum():.0f} kg")
