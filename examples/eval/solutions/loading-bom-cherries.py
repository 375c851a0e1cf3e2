import pandas as pd

p = pd.read_csv("/work/products_bom.csv", encoding="utf-8-sig")
k = p[p["fruit"] == "Kirschen"]
value = (k["qty"] * k["price_eur"]).sum()
print(f"The Kirschen rows are worth {value:.2f} EUR.")
print(f"ANSWER: {value:.2f} EUR")
