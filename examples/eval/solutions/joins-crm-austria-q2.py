import pandas as pd

COUNTRY = {"germany": "Germany", "de": "Germany", "deutschland": "Germany", "france": "France", "fr": "France",
           "austria": "Austria", "at": "Austria", "österreich": "Austria", "switzerland": "Switzerland",
           "ch": "Switzerland", "schweiz": "Switzerland"}
a = pd.read_csv("/work/crm_accounts.csv", dtype=str).drop_duplicates()
a["key"] = a["account_id"].str.strip().astype(int)
a["country"] = a["country"].str.strip().str.lower().map(COUNTRY)

i = pd.read_csv("/work/crm_invoices.csv", dtype={"account_id": str}, parse_dates=["date"])
i["key"] = i["account_id"].str.strip().astype(int)
j = i.merge(a, on="key", how="inner")
n = int(((j["country"] == "Austria") & (j["date"].dt.quarter == 2) & (j["date"].dt.year == 2024)).sum())
print(f"{n} invoices of Q2 2024 went to Austrian accounts.")
print(f"ANSWER: {n}")
