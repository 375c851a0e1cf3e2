import pandas as pd

inv = pd.read_csv("/work/inventory_export.csv", dtype=str)
inv = inv[inv["sku"] != "sku"]  # the header line repeated where the second part begins
qty = inv["quantity"].str.replace(",", "").astype(int)
print(f"The export lists {len(inv)} SKUs with {qty.sum():,} units in stock in total.")
print(f"ANSWER: {qty.sum()}")
