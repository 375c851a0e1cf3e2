import pandas as pd

s = pd.read_csv("/work/shop_daily.csv", parse_dates=["date"]).sort_values(["shop", "date"])
s["r7"] = s.groupby("shop")["sales_eur"].transform(lambda x: x.rolling(7).mean())
v = s.loc[s["shop"] == "Bonn", "r7"].max()
print(f"Bonn's highest 7-row rolling mean is {v:.2f} EUR.")
print(f"ANSWER: {v:.2f} EUR")
