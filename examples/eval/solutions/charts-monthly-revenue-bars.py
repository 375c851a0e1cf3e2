import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import pandas as pd

s = pd.read_csv("/work/sales.csv", parse_dates=["date"])
s["revenue"] = s["units"] * s["unit_price"]
monthly = s.set_index("date")["revenue"].resample("M").sum()
fig, ax = plt.subplots(figsize=(8, 4))
ax.bar(monthly.index.strftime("%b"), monthly.values)
ax.set_ylabel("revenue")
fig.savefig("/work/monthly_revenue.png", dpi=100)
low = monthly.idxmin()
print(f"Saved monthly_revenue.png; the weakest month was {low:%B}, with {monthly.min():,.2f} in revenue.")
