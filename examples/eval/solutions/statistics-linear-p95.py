import pandas as pd

v = pd.read_csv("/work/shop_daily.csv")["sales_eur"].quantile(0.95)
print(f"The 95th percentile of daily sales is {v:.2f} EUR.")
print(f"ANSWER: {v:.2f} EUR")
