import pandas as pd

s = pd.read_csv("/work/sensor.csv")
t = s["temperature_c"]
valid = t[(t >= -20) & (t <= 50)]
faults = ((t < -20) | (t > 50)).sum()
print(f"Leaving out {faults} fault readings and the missing ones, the mean temperature is {valid.mean():.2f} °C.")
print(f"ANSWER: {valid.mean():.2f} °C")
