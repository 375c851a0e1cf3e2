import pandas as pd

m = pd.read_csv("/work/meter_utc.csv")
m["local"] = pd.to_datetime(m["timestamp_utc"], utc=True).dt.tz_convert("Europe/Berlin")

h = m.groupby(m["local"].dt.strftime("%H:00"))["kwh"].mean()
print(f"The hour starting {h.idxmax()} local time uses the most: {h.max():.3f} kWh per half hour.")
print(f"ANSWER: {h.idxmax()}, {h.max():.3f} kWh")
