import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import pandas as pd

w = pd.read_csv("/work/wine.csv")
fig, ax = plt.subplots()
ax.hist(w["alcohol"], bins=20)
ax.set_xlabel("alcohol (%)")
fig.savefig("/work/alcohol_hist.png", dpi=100)
print(f"Saved the histogram as alcohol_hist.png; the median alcohol content is {w['alcohol'].median():.3f}%.")
print(f"ANSWER: {w['alcohol'].median():.2f}")
