import pandas as pd

s = pd.read_csv("/work/shop_daily.csv", parse_dates=["date"])
m = s.groupby(s["date"].dt.day_name())["sales_eur"].mean()
print(f"{m.idxmax()} has the highest mean: {m.max():.2f} EUR.")
print(f"ANSWER: {m.idxmax()}, {m.max():.2f} EUR")
