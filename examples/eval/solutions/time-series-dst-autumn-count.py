import pandas as pd

m = pd.read_csv("/work/meter_utc.csv")
m["local"] = pd.to_datetime(m["timestamp_utc"], utc=True).dt.tz_convert("Europe/Berlin")

n = int((m["local"].dt.strftime("%Y-%m-%d") == "2024-10-27").sum())
print(f"{n} readings fall on 27 October 2024 in Berlin: the day had 25 hours.")
print(f"ANSWER: {n}")
