import pandas as pd

r = pd.read_csv("/work/readings_utf16.tsv", sep="\t", encoding="utf-16")
mean = r.loc[r["station"] == "Tromsø", "temp_c"].mean()
print(f"The mean temperature at Tromsø in May 2024 was {mean:.2f} °C (the file is UTF-16 and tab-separated).")
print(f"ANSWER: {mean:.2f} °C")
