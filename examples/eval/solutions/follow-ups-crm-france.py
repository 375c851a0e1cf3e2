import pandas as pd

COUNTRY = {"germany": "Germany", "de": "Germany", "deutschland": "Germany", "france": "France", "fr": "France",
           "austria": "Austria", "at": "Austria", "österreich": "Austria", "switzerland": "Switzerland",
           "ch": "Switzerland", "schweiz": "Switzerland"}
accounts = pd.read_csv("/work/crm_accounts.csv", dtype=str).drop_duplicates()
accounts["key"] = accounts["account_id"].str.strip().astype(int)
accounts["country"] = accounts["country"].str.strip().str.lower().map(COUNTRY)
invoices = pd.read_csv("/work/crm_invoices.csv", dtype={"account_id": str})
invoices["key"] = invoices["account_id"].str.strip().astype(int)
matched = invoices.merge(accounts, on="key", how="inner")
print(f"{len(matched)} invoices match an account.")
print(f"ANSWER: {len(matched)}")
