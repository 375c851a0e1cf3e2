import pandas as pd

s = pd.read_csv("/work/sensor.csv", parse_dates=["timestamp"])
near = s[s["timestamp"].between("2024-03-04 01:00", "2024-03-04 06:00")]["timestamp"]
assert not (s["timestamp"] == "2024-03-04 03:00").any()
gap = near.diff().idxmax()
print(f"There is no reading at that time: the logger recorded nothing between "
      f"{near[gap - 1]:%H:%M} and {near[gap]:%H:%M} that night, so the value is not in the data.")
print("ANSWER: cannot be determined")
