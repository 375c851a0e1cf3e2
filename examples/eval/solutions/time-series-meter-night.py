import pandas as pd

m = pd.read_csv("/work/meter_utc.csv")
local = pd.to_datetime(m["timestamp_utc"], utc=True).dt.tz_convert("Europe/Berlin")
night = (local.dt.hour >= 22) | (local.dt.hour < 6)
print(f"The night tariff hours used {m.loc[night, 'kwh'].sum():.3f} kWh.")
print(f"ANSWER: {m.loc[night, 'kwh'].sum():.3f} kWh")
