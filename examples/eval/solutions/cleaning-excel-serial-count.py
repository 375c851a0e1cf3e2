import pandas as pd

o = pd.read_csv("/work/manual_orders.csv", dtype={"order_date": str})
n = int(o["order_date"].str.strip().str.fullmatch(r"\d+").sum())
print(f"{n} dates are Excel serial numbers.")
print(f"ANSWER: {n}")
