import pandas as pd

m = pd.read_csv("/work/meter_utc.csv")
m["local"] = pd.to_datetime(m["timestamp_utc"], utc=True).dt.tz_convert("Europe/Berlin")

day = m[m["local"].dt.strftime("%Y-%m-%d") == "2024-03-31"]
print(f"31 March 2024 in Berlin had {len(day)} half hours (clocks went forward) and used {day['kwh'].sum():.3f} kWh.")
print(f"ANSWER: {day['kwh'].sum():.3f} kWh")
