import pandas as pd

customers = pd.read_csv("/work/customers.csv")
orders = pd.read_csv("/work/shop_orders.csv")
idle = ~customers["customer_id"].isin(orders["customer_id"])
print(f"{idle.sum()} customers have never placed an order.")
print(f"ANSWER: {idle.sum()}")
