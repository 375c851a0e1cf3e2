import pandas as pd

b = pd.read_csv("/work/bank_statement.csv", sep=";", skiprows=5, skipfooter=3, engine="python")
print(f"The statement lists {len(b)} transactions between its preamble and its closing balance.")
print(f"ANSWER: {len(b)}")
