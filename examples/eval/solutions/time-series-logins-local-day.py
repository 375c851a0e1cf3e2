import pandas as pd

logins = pd.read_csv("/work/logins.csv")
# The local date is the date written in the timestamp, before its UTC offset.
n = (logins["timestamp"].str[:10] == "2024-07-01").sum()
print(f"{n} log-ins happened on 1 July 2024 in the users' local time.")
print(f"ANSWER: {n}")
