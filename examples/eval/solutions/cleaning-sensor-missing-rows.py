import pandas as pd

s = pd.read_csv("/work/sensor.csv", parse_dates=["timestamp"])
expected = pd.date_range("2024-03-01 00:00", "2024-03-07 23:50", freq="10min")
missing = expected.difference(s["timestamp"])
print(f"{len(missing)} of the {len(expected)} expected 10-minute timestamps have no row.")
print(f"ANSWER: {len(missing)}")
