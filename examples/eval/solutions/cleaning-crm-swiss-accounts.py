import pandas as pd

COUNTRY = {"germany": "Germany", "de": "Germany", "deutschland": "Germany", "france": "France", "fr": "France",
           "austria": "Austria", "at": "Austria", "österreich": "Austria", "switzerland": "Switzerland",
           "ch": "Switzerland", "schweiz": "Switzerland"}
a = pd.read_csv("/work/crm_accounts.csv", dtype=str).drop_duplicates()
a["key"] = a["account_id"].str.strip().astype(int)
a["country"] = a["country"].str.strip().str.lower().map(COUNTRY)

n = a.loc[a["country"] == "Switzerland", "key"].nunique()
print(f"{n} distinct accounts are in Switzerland.")
print(f"ANSWER: {n}")
