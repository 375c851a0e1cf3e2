import pandas as pd

p = pd.read_csv("/work/penguins.csv")
mix = pd.crosstab(p["island"], p["species"])
assert mix.loc["Biscoe", "Gentoo"] > 0 and mix.loc[["Dream", "Torgersen"], "Gentoo"].sum() == 0
print("This observational data cannot tell a causal effect of the island: only Biscoe has Gentoo penguins, "
      "the heaviest species, so island and species are confounded.")
print("ANSWER: cannot be determined")
