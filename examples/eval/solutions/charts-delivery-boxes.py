import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt
import pandas as pd

d = pd.read_csv("/work/deliveries.csv")
fig, ax = plt.subplots()
d.boxplot(column="minutes", by="vehicle", ax=ax)
fig.savefig("/work/delivery_box.png", dpi=100)
n = int((d["vehicle"] == "car").sum())
print(f"Saved delivery_box.png; cars made {n} deliveries.")
print(f"ANSWER: {n}")
