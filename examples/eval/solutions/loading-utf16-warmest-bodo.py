import pandas as pd

r = pd.read_csv("/work/readings_utf16.tsv", sep="\t", encoding="utf-16")
b = r[r["station"] == "Bodø"]
top = b.loc[b["temp_c"].idxmax()]
assert (b["temp_c"] == top["temp_c"]).sum() == 1
print(f"Bodø was warmest on {top['date']}, at {top['temp_c']:.2f} °C.")
print(f"ANSWER: {top['date']}, {top['temp_c']:.2f} °C")
