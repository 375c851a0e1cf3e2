import pandas as pd

s = pd.read_csv("/work/sensor.csv", parse_dates=["timestamp"])
s["temperature_c"] = s["temperature_c"].where(s["temperature_c"].between(-20, 50))
daily = s.groupby(s["timestamp"].dt.date)["temperature_c"].agg(["min", "max", "mean"]).round(2)
daily.index.name = "date"
daily.to_csv("/work/daily_summary.csv")
spread = daily["max"] - daily["min"]
print(f"Saved daily_summary.csv; {spread.idxmax()} had the widest range, {spread.max():.2f} °C.")
print(f"ANSWER: {spread.idxmax()}, {spread.max():.2f} °C")
