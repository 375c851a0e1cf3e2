import pandas as pd

m = pd.read_csv("/work/meter_utc.csv")
local = pd.to_datetime(m["timestamp_utc"], utc=True).dt.tz_convert("Europe/Berlin")
d = m.groupby(local.dt.strftime("%Y-%m-%d"))["kwh"].sum()
print(f"{d.idxmax()} used the most: {d.max():.3f} kWh.")
print(f"ANSWER: {d.idxmax()}, {d.max():.3f} kWh")
