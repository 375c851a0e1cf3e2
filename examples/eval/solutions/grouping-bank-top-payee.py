import pandas as pd

b = pd.read_csv("/work/bank_statement.csv", sep=";", skiprows=5, skipfooter=3, engine="python", dtype=str)
b["Betrag"] = b["Betrag"].str.replace(".", "", regex=False).str.replace(",", ".", regex=False).astype(float)

t = -b[b["Betrag"] < 0].groupby("Empfänger")["Betrag"].sum()
print(f"{t.idxmax()} received the most: {t.max():.2f} EUR.")
print(f"ANSWER: {t.idxmax()}, {t.max():.2f} EUR")
