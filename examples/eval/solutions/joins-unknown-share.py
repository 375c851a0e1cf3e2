import pandas as pd

customers = pd.read_csv("/work/customers.csv")
orders = pd.read_csv("/work/shop_orders.csv")
unknown = ~orders["customer_id"].isin(customers["customer_id"])
share = orders.loc[unknown, "amount_eur"].sum() / orders["amount_eur"].sum()
print(f"Orders from unknown customers make up {100 * share:.1f}% of the total order amount.")
print(f"ANSWER: {100 * share:.1f} %")
