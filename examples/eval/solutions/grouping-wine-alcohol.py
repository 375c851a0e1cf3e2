import pandas as pd

w = pd.read_csv("/work/wine.csv")
means = w.groupby("cultivar")["alcohol"].mean()
print(f"Cultivar {means.idxmax()} has the highest mean alcohol content, {means.max():.2f}%.")
print(f"ANSWER: {means.idxmax()}, {means.max():.2f}")
