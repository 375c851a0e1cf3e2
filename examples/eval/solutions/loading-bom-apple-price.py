import pandas as pd

p = pd.read_csv("/work/products_bom.csv", encoding="utf-8-sig")
m = p.loc[p["fruit"] == "Äpfel", "price_eur"].mean()
print(f"Äpfel cost {m:.2f} EUR on average.")
print(f"ANSWER: {m:.2f} EUR")
