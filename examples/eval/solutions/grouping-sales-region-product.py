import pandas as pd

s = pd.read_csv("/work/sales.csv")
s["revenue"] = s["units"] * s["unit_price"]
rev = s.groupby(["region", "product"])["revenue"].sum()
(region, product), total = rev.idxmax(), rev.max()
print(f"{product} in the {region} region brought the most revenue: {total:,.2f}.")
print(f"ANSWER: {region}, {product}, {total:.2f}")
