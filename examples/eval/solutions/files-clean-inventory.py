import pandas as pd

inv = pd.read_csv("/work/inventory_export.csv", dtype=str)
inv = inv[inv["sku"] != "sku"]
qty = inv["quantity"].str.replace(",", "").astype(int)
cur, cost = inv["unit_cost"].str.split().str[0], inv["unit_cost"].str.split().str[1].astype(float)
w, unit = inv["unit_weight"].str.split().str[0].astype(float), inv["unit_weight"].str.split().str[1]
clean = pd.DataFrame({
    "sku": inv["sku"],
    "warehouse": inv["warehouse"],
    "quantity": qty,
    "currency": cur,
    "unit_cost": cost,
    "unit_weight_kg": w.where(unit == "kg", w / 1000),
})
clean.to_csv("/work/clean_inventory.csv", index=False)
hamburg = clean.loc[clean["warehouse"] == "Hamburg", "quantity"].sum()
print(f"Saved clean_inventory.csv with {len(clean)} rows; Hamburg holds {hamburg:,} units.")
print(f"ANSWER: {hamburg}")
