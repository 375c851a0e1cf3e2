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

counts = o["date"].dt.day_name().value_counts()
assert counts.iloc[0] > counts.iloc[1]
print(f"Most orders were placed on a {counts.index[0]}: {counts.iloc[0]}.")
print(f"ANSWER: {counts.index[0]}, {counts.iloc[0]}")
