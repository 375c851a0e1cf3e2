import pandas as pd

customers = pd.read_csv("/work/customers.csv")
orders = pd.read_csv("/work/shop_orders.csv")
unknown = ~orders["customer_id"].isin(customers["customer_id"])
print(f"{unknown.sum()} orders name a customer that customers.csv does not have.")
print(f"ANSWER: {unknown.sum()}")
