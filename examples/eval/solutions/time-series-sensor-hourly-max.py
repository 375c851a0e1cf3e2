import pandas as pd

s = pd.read_csv("/work/sensor.csv", parse_dates=["timestamp"])
t = s["temperature_c"].where(s["temperature_c"].between(-20, 50))
hourly = t.groupby(s["timestamp"].dt.strftime("%Y-%m-%d %H:00")).mean()
print(f"The warmest hour was {hourly.idxmax()}, with a mean of {hourly.max():.2f} °C.")
print(f"ANSWER: {hourly.idxmax()}, {hourly.max():.2f} °C")
