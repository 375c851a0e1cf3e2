import pandas as pd

s = pd.read_csv("/work/shop_daily.csv", parse_dates=["date"])
iso = s["date"].dt.isocalendar()
s["week"] = iso["year"].astype(str) + "-W" + iso["week"].astype(str).str.zfill(2)
t = s.groupby("week")["sales_eur"].sum()
print(f"The best week was {t.idxmax()}, with {t.max():.2f} EUR.")
print(f"ANSWER: {t.idxmax()}, {t.max():.2f} EUR")
