import pandas as pd

w = pd.read_csv("/work/museum_visits_wide.csv")
assert not any(c.startswith("2024") for c in w.columns)
print(f"The file ends with 2023 ({', '.join(w.columns[2:])}): it has no 2024 figures.")
print("ANSWER: cannot be determined")
