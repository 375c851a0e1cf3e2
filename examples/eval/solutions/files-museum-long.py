import pandas as pd

w = pd.read_csv("/work/museum_visits_wide.csv")
long = w.melt(id_vars=["museum", "city"], var_name="quarter", value_name="visitors")
long["year"] = long["quarter"].str[:4].astype(int)

long["quarter"] = long["quarter"].str[-1].astype(int)
long[["museum", "year", "quarter", "visitors"]].to_csv("/work/museum_visits_long.csv", index=False)
print(f"Saved museum_visits_long.csv ({len(long)} rows); the busiest quarter had {long['visitors'].max()} visitors.")
print(f"ANSWER: {long['visitors'].max()}")
