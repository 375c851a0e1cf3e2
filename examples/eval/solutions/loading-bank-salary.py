import pandas as pd

b = pd.read_csv("/work/bank_statement.csv", sep=";", skiprows=5, skipfooter=3, engine="python", dtype=str)
b["Betrag"] = b["Betrag"].str.replace(".", "", regex=False).str.replace(",", ".", regex=False).astype(float)
total = b.loc[(b["Empfänger"] == "Arbeitgeber GmbH") & (b["Betrag"] > 0), "Betrag"].sum()
print(f"Arbeitgeber GmbH paid in {total:.2f} EUR.")
print(f"ANSWER: {total:.2f} EUR")
