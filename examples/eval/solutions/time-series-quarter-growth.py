import pandas as pd

s = pd.read_csv("/work/sales.csv", parse_dates=["date"])
s["revenue"] = s["units"] * s["unit_price"]
quarterly = s.groupby(s["date"].dt.to_period("Q"))["revenue"].sum()
growth = quarterly.iloc[3] / quarterly.iloc[2] - 1
print(f"Revenue grew by {100 * growth:.1f}% from Q3 to Q4 2024.")
print(f"ANSWER: {100 * growth:.1f} %")
