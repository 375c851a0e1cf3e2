import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import pandas as pd

iris = pd.read_csv("/work/iris.csv")
species = ["setosa", "versicolor", "virginica"]
fig, axes = plt.subplots(1, 3, figsize=(12, 4), sharey=True)
for ax, name in zip(axes, species):
    g = iris[iris["species"] == name]
    ax.scatter(g["sepal_length_cm"], g["petal_length_cm"], s=10)
    ax.set_title(name)
    ax.set_xlabel("sepal length (cm)")
axes[0].set_ylabel("petal length (cm)")
fig.savefig("/work/iris_panels.png", dpi=100)
r = {n: iris[iris["species"] == n]["sepal_length_cm"].corr(iris[iris["species"] == n]["petal_length_cm"]) for n in species}
best = max(r, key=r.get)
print(f"Saved iris_panels.png; the correlation is strongest for {best}, r = {r[best]:.3f}.")
print(f"ANSWER: {best}, {r[best]:.3f}")
