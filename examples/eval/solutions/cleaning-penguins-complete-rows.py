import pandas as pd

p = pd.read_csv("/work/penguins.csv").dropna()
print(f"{len(p)} penguins have no missing value; their mean body mass is {p['body_mass_g'].mean():.2f} g.")
print(f"ANSWER: {p['body_mass_g'].mean():.2f} g")
