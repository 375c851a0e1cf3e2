import datetime as dt

import pandas as pd

def parse(s):
    s = s.strip()
    if s.isdigit():
        return pd.Timestamp(dt.date(1899, 12, 30) + dt.timedelta(days=int(s)))
    if "." in s:
        return pd.to_datetime(s, format="%d.%m.%Y")
    if s[:1].isalpha():
        return pd.to_datetime(s, format="%B %d, %Y")
    return pd.to_datetime(s, format="%Y-%m-%d")

o = pd.read_csv("/work/manual_orders.csv", dtype={"order_date": str})
o["date"] = o["order_date"].map(parse)

total = o.loc[(o["date"].dt.year == 2024) & (o["date"].dt.month == 3), "total_eur"].sum()
print(f"Orders placed in March 2024 total {total:.2f} EUR.")
print(f"ANSWER: {total:.2f} EUR")
