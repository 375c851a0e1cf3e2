import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import pandas as pd

s = pd.read_csv("/work/sales.csv", parse_dates=["date"])
s["revenue"] = s["units"] * s["unit_price"]
monthly = s.groupby(s["date"].dt.to_period("M"))["revenue"].sum()
fig, ax = plt.subplots(figsize=(8, 4))
ax.bar(monthly.index.strftime("%b"), monthly.values)
ax.set_ylabel("revenue")
fig.savefig("/work/monthly_revenue.png", dpi=100)
low = monthly.idxmin()
print(f"Saved monthly_revenue.png; the weakest month was {low.strftime('%B')}, with {monthly.min():,.2f} in revenue.")
print(f"ANSWER: {low.strftime('%Y-%m')}, {monthly.min():.2f}")
