import pandas as pd

b = pd.read_csv("/work/bank_statement.csv", sep=";", skiprows=5, skipfooter=3, engine="python", dtype=str)
b["Betrag"] = b["Betrag"].str.replace(".", "", regex=False).str.replace(",", ".", regex=False).astype(float)
b["Buchungstag"] = pd.to_datetime(b["Buchungstag"], format="%d.%m.%Y")
march = b[(b["Buchungstag"].dt.month == 3) & (b["Betrag"] < 0)]
total = -march["Betrag"].sum()
print(f"Debits in March 2024 add up to {total:.2f} EUR.")
print(f"ANSWER: {total:.2f} EUR")
