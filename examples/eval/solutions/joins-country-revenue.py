import pandas as pd

customers = pd.read_csv("/work/customers.csv")
orders = pd.read_csv("/work/shop_orders.csv")
joined = orders.merge(customers, on="customer_id", how="inner")
by_country = joined.groupby("country")["amount_eur"].sum()
print(f"Customers in {by_country.idxmax()} ordered the most: EUR {by_country.max():,.2f}.")
print(f"ANSWER: {by_country.idxmax()}, {by_country.max():.2f} EUR")
