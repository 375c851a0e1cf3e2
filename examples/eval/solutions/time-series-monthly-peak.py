import pandas as pd

s = pd.read_csv("/work/sales.csv", parse_dates=["date"])
s["revenue"] = s["units"] * s["unit_price"]
monthly = s.groupby(s["date"].dt.to_period("M"))["revenue"].sum()
peak = monthly.idxmax()
print(f"{peak.strftime('%B %Y')} had the highest revenue: {monthly.max():,.2f}.")
print(f"ANSWER: {peak.strftime('%Y-%m')}, {monthly.max():.2f}")
