import pandas as pd

c = pd.read_csv("/work/clients_latin1.csv", sep=";", encoding="latin-1")
total = c.loc[c["Stadt"] == "München", "Saldo_EUR"].sum()
print(f"The clients in München have a total balance of {total:.2f} EUR (the file is Latin-1, semicolon-separated).")
print(f"ANSWER: {total:.2f} EUR")
