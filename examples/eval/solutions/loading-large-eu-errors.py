import pandas as pd

r = pd.read_csv("/work/api_requests.csv")
n = int(((r["region"] == "eu") & (r["status"] >= 500)).sum())
print(f"{n} of the {len(r)} requests were eu requests with a server error.")
print(f"ANSWER: {n}")
