# Written as a notebook-trained model writes it: /mnt/data, a magic and
# display().
%matplotlib inline
import pandas as pd
import matplotlib.pyplot as plt

sales = pd.read_csv("/mnt/data/sales.csv")
sales["revenue"] = sales["units"] * sales["unit_price"]
per_region = sales.groupby("region")["revenue"].sum().sort_values()
display(per_region.to_frame())
per_region.plot.bar()
plt.ylabel("revenue")
plt.savefig("/mnt/data/region_revenue.png")
print(f"{per_region.index[0]} brought in the least revenue: {per_region.iloc[0]:.2f}.")
print(f"ANSWER: {per_region.index[0]}, {per_region.iloc[0]:.2f}")
