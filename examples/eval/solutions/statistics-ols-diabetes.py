import numpy as np
import pandas as pd

d = pd.read_csv("/work/diabetes.csv")
X = np.column_stack([np.ones(len(d)), d["bmi"], d["bp"]])
coef, *_ = np.linalg.lstsq(X, d["target"], rcond=None)
print(f"With bp held fixed, each unit of BMI adds {coef[1]:.2f} to the target (OLS coefficient of bmi).")
print(f"ANSWER: {coef[1]:.2f}")
