import pandas as pd

logins = pd.read_csv("/work/logins.csv")
utc = pd.to_datetime(logins["timestamp"], utc=True)
n = (utc.dt.strftime("%Y-%m-%d") == "2024-06-30").sum()
print(f"{n} log-ins happened on 30 June 2024 in UTC.")
print(f"ANSWER: {n}")
