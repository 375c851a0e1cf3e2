import pandas as pd

m = pd.read_csv("/work/meter_utc.csv")
assert list(m.columns) == ["timestamp_utc", "kwh"]
print("The file has only the energy used (kwh), no price or tariff, so the cost cannot be computed.")
print("ANSWER: cannot be determined")
