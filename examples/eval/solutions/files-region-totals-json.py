import json

import pandas as pd

s = pd.read_csv("/work/sales.csv")
s["revenue"] = s["units"] * s["unit_price"]
totals = s.groupby("region")["revenue"].sum().round(2)
with open("/work/region_totals.json", "w") as f:
    json.dump(totals.to_dict(), f, indent=2)
print(f"Saved region_totals.json; the four regions add up to {totals.sum():,.2f}.")
print(f"ANSWER: {totals.sum():.2f}")
