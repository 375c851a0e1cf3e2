import pandas as pd

w = pd.read_csv("/work/museum_visits_wide.csv")
assert not any("price" in c or "revenue" in c or "eur" in c.lower() for c in w.columns)
print("The file counts visitors only; it has no ticket prices or revenue, so this cannot be answered.")
print("ANSWER: cannot be determined")
