import pandas as pd

customers = pd.read_csv("/work/customers.csv", parse_dates=["signup_date"])
orders = pd.read_csv("/work/shop_orders.csv", parse_dates=["order_date"])
first = orders.groupby("customer_id")["order_date"].min().rename("first_order").reset_index()
joined = customers.merge(first, on="customer_id", how="inner")
days = (joined["first_order"] - joined["signup_date"]).dt.days
print(f"Half of the customers who ordered did so within {days.median():g} days of signing up (the median wait).")
print(f"ANSWER: {days.median():.1f} days")
