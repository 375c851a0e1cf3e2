import pandas as pd

p = pd.read_csv("/work/penguins.csv").dropna(subset=["sex"])
means = p.groupby(["species", "sex"])["body_mass_g"].mean()
(species, sex), mass = means.idxmax(), means.max()
print(f"{sex.capitalize()} {species} penguins are the heaviest group, at {mass:.2f} g on average.")
print(f"ANSWER: {species} {sex}, {mass:.2f} g")
