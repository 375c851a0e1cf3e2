import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import pandas as pd

p = pd.read_csv("/work/penguins.csv").dropna(subset=["flipper_length_mm", "body_mass_g"])
fig, ax = plt.subplots()
ax.scatter(p["flipper_length_mm"], p["body_mass_g"], s=10)
ax.set_xlabel("flipper length (mm)")
ax.set_ylabel("body mass (g)")
fig.savefig("/work/flipper_mass.png", dpi=100)
print(f"I saved the scatter plot of {len(p)} penguins as flipper_mass.png.")
print(f"ANSWER: {len(p)}")
