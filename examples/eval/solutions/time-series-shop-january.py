import pandas as pd

s = pd.read_csv("/work/shop_daily.csv", parse_dates=["date"])
t = s[s["date"].dt.strftime("%Y-%m") == "2025-01"].groupby("shop")["sales_eur"].sum()
print(f"{t.idxmax()} sold the most in January 2025: {t.max():.2f} EUR.")
print(f"ANSWER: {t.idxmax()}, {t.max():.2f} EUR")
