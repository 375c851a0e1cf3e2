import pandas as pd

w = pd.read_csv("/work/wine.csv")
print(f"The sample standard deviation of color_intensity is {w['color_intensity'].std(ddof=1):.3f}.")
print(f"ANSWER: {w['color_intensity'].std(ddof=1):.3f}")
