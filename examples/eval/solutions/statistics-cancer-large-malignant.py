import pandas as pd

bc = pd.read_csv("/work/breast_cancer.csv")
large = bc[bc["mean_radius"] > 15]
share = (large["diagnosis"] == "malignant").mean()
print(f"Of the {len(large)} tumours with mean_radius above 15, {100 * share:.1f}% are malignant.")
print(f"ANSWER: {100 * share:.1f} %")
