import sqlite3

import pandas as pd

db = sqlite3.connect("/work/library.sqlite")

l = pd.read_sql("SELECT loaned, returned FROM loans WHERE returned IS NOT NULL", db, parse_dates=["loaned", "returned"])
m = (l["returned"] - l["loaned"]).dt.days.mean()
print(f"Returned loans lasted {m:.2f} days on average.")
print(f"ANSWER: {m:.2f} days")
