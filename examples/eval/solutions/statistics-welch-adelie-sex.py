import numpy as np
import pandas as pd

p = pd.read_csv("/work/penguins.csv")
adelie = p[p["species"] == "Adelie"].dropna(subset=["body_mass_g", "sex"])
m = adelie.loc[adelie["sex"] == "male", "body_mass_g"]
f = adelie.loc[adelie["sex"] == "female", "body_mass_g"]
t = (m.mean() - f.mean()) / np.sqrt(m.var(ddof=1) / len(m) + f.var(ddof=1) / len(f))
print(f"Welch's t statistic for male minus female Adelie body mass is {t:.2f}.")
print(f"ANSWER: {t:.2f}")
