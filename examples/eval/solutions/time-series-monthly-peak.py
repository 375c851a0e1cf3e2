import pandas as pd

s = pd.read_csv("/work/sales.csv", parse_dates=["date"])
s["revenue"] = s["units"] * s["unit_price"]
monthly = s.set_index("date")["revenue"].resample("M").sum()
peak = monthly.idxmax()
print(f"{peak:%B %Y} had the highest revenue: {monthly.max():,.2f}.")
