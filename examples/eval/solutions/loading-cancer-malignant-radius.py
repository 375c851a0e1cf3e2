import pandas as pd

bc = pd.read_csv("/work/breast_cancer.csv")
mal = bc[bc["diagnosis"] == "malignant"]
print(f"The {len(mal)} malignant tumours have a mean radius (mean_radius) of {mal['mean_radius'].mean():.2f}.")
print(f"ANSWER: {mal['mean_radius'].mean():.2f}")
