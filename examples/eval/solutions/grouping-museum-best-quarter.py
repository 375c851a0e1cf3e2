import pandas as pd

w = pd.read_csv("/work/museum_visits_wide.csv")
long = w.melt(id_vars=["museum", "city"], var_name="period", value_name="visitors")
q = long.groupby(long["period"].str[-2:])["visitors"].sum()
print(f"{q.idxmax()} is the busiest quarter: {q.max()} visitors.")
print(f"ANSWER: {q.idxmax()}, {q.max()}")
