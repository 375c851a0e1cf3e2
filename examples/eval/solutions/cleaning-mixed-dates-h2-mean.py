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
m = o.loc[(o["date"] >= "2024-07-01") & (o["date"] <= "2024-12-31"), "total_eur"].mean()
print(f"Orders in the second half of 2024 averaged {m:.2f} EUR.")
print(f"ANSWER: {m:.2f} EUR")
