import pandas as pd

s = pd.read_csv("/work/sales.csv")
s["revenue"] = s["units"] * s["unit_price"]
rev = s.groupby(["region", "product"])["revenue"].sum()
share = rev / rev.groupby(level="region").transform("sum")
top = share.groupby(level="region").max()
region = top.idxmax()
product = share[region].idxmax()
print(f"In the {region} region, {product} takes the largest share of any region's revenue: {100 * top.max():.1f}%.")
print(f"ANSWER: {region}, {100 * top.max():.1f} %")
