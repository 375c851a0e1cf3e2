import pandas as pd

iris = pd.read_csv("/work/iris.csv")
mean = iris.loc[iris["species"] == "versicolor", "petal_width_cm"].mean()
print(f"The mean petal width of the versicolor irises is {mean:.2f} cm.")
print(f"ANSWER: {mean:.2f} cm")
