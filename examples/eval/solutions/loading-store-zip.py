import zipfile

import pandas as pd

totals = {}
with zipfile.ZipFile("/work/store_reports.zip") as z:
    for name in z.namelist():
        with z.open(name) as f:
            totals[name.removesuffix(".csv")] = pd.read_csv(f)["revenue"].sum()
best = max(totals, key=totals.get)
print(f"{best} had the highest revenue in 2024: {totals[best]:,} in total.")
print(f"ANSWER: {best}, {totals[best]}")
