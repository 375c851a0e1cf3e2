import pandas as pd

p = pd.read_csv("/work/penguins.csv")
mean = p.loc[p["species"] == "Gentoo", "body_mass_g"].mean()
print(f"The mean body mass of Gentoo penguins is {mean:.2f} g.")
print(f"ANSWER: {mean:.2f} g")
