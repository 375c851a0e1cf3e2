import pandas as pd

c = pd.read_csv("/work/clients_latin1.csv", sep=";", encoding="latin-1")
n = int((c["Saldo_EUR"] < 0).sum())
print(f"{n} clients have a negative balance.")
print(f"ANSWER: {n}")
