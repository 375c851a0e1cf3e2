import pandas as pd

w = pd.read_csv("/work/museum_visits_wide.csv")
print(f"All museums together had {w['2023_Q3'].sum()} visitors in Q3 2023.")
print(f"ANSWER: {w['2023_Q3'].sum()}")
