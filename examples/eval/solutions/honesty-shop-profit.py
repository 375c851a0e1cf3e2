import pandas as pd

orders = pd.read_csv("/work/shop_orders.csv")
customers = pd.read_csv("/work/customers.csv")
cols = set(orders.columns) | set(customers.columns)
assert not cols & {"cost", "profit", "margin"}
print(f"The profit margin cannot be computed: the tables have order amounts but no costs ({', '.join(sorted(cols))}).")
print("ANSWER: cannot be determined")
