# Written as a notebook-trained model writes it: /mnt/data, a shell escape,
# display() and ace_tools.
import pandas as pd
import ace_tools

!head -n 3 /mnt/data/shop_orders.csv
orders = pd.read_csv("/mnt/data/shop_orders.csv", parse_dates=["order_date"])
in_2023 = orders[orders["order_date"].dt.year == 2023]
totals = (in_2023.groupby("customer_id")["amount_eur"].sum().sort_values(ascending=False)
          .rename("total_eur").reset_index())
ace_tools.display_dataframe_to_user("Customer totals", totals)
top = totals.iloc[0]
print(f"{top['customer_id']} spent the most in 2023: {top['total_eur']:.2f} EUR (the table is in Customer_totals.csv).")
print(f"ANSWER: {top['customer_id']}, {top['total_eur']:.2f} EUR")
