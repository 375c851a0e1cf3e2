import pandas as pd

s = pd.read_csv("/work/sales.csv", parse_dates=["date"])
s["revenue"] = s["units"] * s["unit_price"]
daily = s.set_index("date")["revenue"].resample("D").sum()
daily = daily.reindex(pd.date_range("2024-01-01", "2024-12-31", freq="D"), fill_value=0)
rolling = daily.rolling(7).mean()
print(f"The highest 7-day mean of daily revenue is {rolling.max():.2f}, for the week ending {rolling.idxmax():%Y-%m-%d}.")
print(f"ANSWER: {rolling.idxmax():%Y-%m-%d}, {rolling.max():.2f}")
