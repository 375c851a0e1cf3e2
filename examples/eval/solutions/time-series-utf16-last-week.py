import pandas as pd

r = pd.read_csv("/work/readings_utf16.tsv", sep="\t", encoding="utf-16", parse_dates=["date"])
last = r[r["date"] >= "2024-05-25"].groupby("station")["temp_c"].mean()
print(f"{last.idxmax()} was warmest over 25 to 31 May: {last.max():.2f} °C.")
print(f"ANSWER: {last.idxmax()}, {last.max():.2f} °C")
