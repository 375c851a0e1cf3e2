import pandas as pd

p = pd.read_csv("/work/penguins.csv").dropna(subset=["body_mass_g"])
for name, group in p.groupby("species"):
    group.to_csv(f"/work/{name.lower()}.csv", index=False)
sizes = p["species"].value_counts()
print(f"Wrote adelie.csv, chinstrap.csv and gentoo.csv; gentoo.csv has {sizes['Gentoo']} rows.")
print(f"ANSWER: {sizes['Gentoo']}")
