import pandas as pd

w = pd.read_csv("/work/museum_visits_wide.csv")
long = w.melt(id_vars=["museum", "city"], var_name="quarter", value_name="visitors")
long["year"] = long["quarter"].str[:4].astype(int)

y = long.pivot_table(index="museum", columns="year", values="visitors", aggfunc="sum")
g = 100 * (y[2023] / y[2022] - 1)
print(f"{g.idxmax()} grew the most: {g.max():.1f}% more visitors in 2023.")
print(f"ANSWER: {g.idxmax()}, {g.max():.1f} %")
