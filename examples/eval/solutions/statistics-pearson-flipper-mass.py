import pandas as pd

p = pd.read_csv("/work/penguins.csv").dropna(subset=["flipper_length_mm", "body_mass_g"])
r = p["flipper_length_mm"].corr(p["body_mass_g"])
print(f"The Pearson correlation between flipper length and body mass is {r:.3f}.")
print(f"ANSWER: {r:.3f}")
