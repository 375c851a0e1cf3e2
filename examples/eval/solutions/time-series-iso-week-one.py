import pandas as pd

s = pd.read_csv("/work/shop_daily.csv", parse_dates=["date"])
iso = s["date"].dt.isocalendar()
total = s.loc[(iso["year"] == 2025) & (iso["week"] == 1), "sales_eur"].sum()
print(f"ISO week 1 of 2025 (30 December 2024 to 5 January 2025) had {total:.2f} EUR in sales.")
print(f"ANSWER: {total:.2f} EUR")
