import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt
import pandas as pd

s = pd.read_csv("/work/shop_daily.csv", parse_dates=["date"])
fig, ax = plt.subplots(figsize=(10, 4))
for shop, g in s.groupby("shop"):
    ax.plot(g["date"], g["sales_eur"], label=shop)
ax.legend()
fig.savefig("/work/shop_sales.png", dpi=100)
a = s[(s["shop"] == "Aachen") & (s["date"].dt.strftime("%Y-%m") == "2024-12")]["sales_eur"].sum()
print(f"Saved shop_sales.png; Aachen sold {a:.2f} EUR in December 2024.")
print(f"ANSWER: {a:.2f} EUR")
