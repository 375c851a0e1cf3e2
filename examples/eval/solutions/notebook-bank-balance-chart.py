# Written as a notebook-trained model writes it: /mnt/data, a magic, display().
%matplotlib inline
import matplotlib.pyplot as plt
import pandas as pd

b = pd.read_csv("/mnt/data/bank_statement.csv", sep=";", skiprows=5, skipfooter=3, engine="python", dtype=str)
b["Betrag"] = b["Betrag"].str.replace(".", "", regex=False).str.replace(",", ".", regex=False).astype(float)
display(b.head())
balance = 2500 + b["Betrag"].cumsum()
plt.plot(pd.to_datetime(b["Buchungstag"], format="%d.%m.%Y"), balance)
plt.savefig("/mnt/data/balance.png")
low = balance.min()
print(f"The lowest balance was {low:.2f} EUR.")
print(f"ANSWER: {low:.2f} EUR")
