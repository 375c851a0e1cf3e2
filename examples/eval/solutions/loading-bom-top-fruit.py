import pandas as pd

p = pd.read_csv("/work/products_bom.csv", encoding="utf-8-sig")
t = p.groupby("fruit")["qty"].sum().sort_values(ascending=False)
assert t.iloc[0] > t.iloc[1]
print(f"{t.index[0]} has the most in stock: {t.iloc[0]} units.")
print(f"ANSWER: {t.index[0]}, {t.iloc[0]}")
