import pandas as pd

daily = pd.read_csv("/work/shop_daily.csv", parse_dates=["date"])
month = daily["date"].dt.strftime("%Y-%m")
december = daily[month == "2024-12"].groupby("shop")["sales_eur"].sum()
best = december.idxmax()
print(f"{best} sold the most in December 2024: {december.max():.2f} EUR.")
print(f"ANSWER: {best}, {december.max():.2f} EUR")
