import pandas as pd

r = pd.read_csv("/work/readings_utf16.tsv", sep="\t", encoding="utf-16")
n = int(((r["station"] == "Ålesund") & (r["temp_c"] > 20)).sum())
print(f"Ålesund was above 20 °C on {n} days.")
print(f"ANSWER: {n}")
