# Written as a notebook-trained model writes it: /mnt/data and display().
import pandas as pd

inv = pd.read_csv("/mnt/data/crm_invoices.csv", parse_dates=["date"])
inv = inv[inv["date"].dt.year == 2024]
monthly = inv.groupby(inv["date"].dt.strftime("%Y-%m"))["amount_eur"].sum().round(2)
display(monthly.to_frame())
print(f"{monthly.idxmax()} had the highest total: {monthly.max():.2f} EUR.")
print(f"ANSWER: {monthly.idxmax()}, {monthly.max():.2f} EUR")
