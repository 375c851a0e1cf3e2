import pandas as pd

s = pd.read_csv("/work/sales.csv", parse_dates=["date"])
first, last = s["date"].min(), s["date"].max()
assert first.year == last.year == 2024
print(f"I cannot say: the data has no 2023 orders, it covers only {first:%d %B} to {last:%d %B %Y}.")
print("ANSWER: cannot be determined")
