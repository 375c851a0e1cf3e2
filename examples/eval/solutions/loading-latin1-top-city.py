import pandas as pd

c = pd.read_csv("/work/clients_latin1.csv", sep=";", encoding="latin-1")
n = c["Stadt"].value_counts()
assert n.iloc[0] > n.iloc[1]
print(f"{n.index[0]} has the most clients: {n.iloc[0]}.")
print(f"ANSWER: {n.index[0]}, {n.iloc[0]}")
