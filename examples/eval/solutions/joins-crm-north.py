import pandas as pd

COUNTRY = {"germany": "Germany", "de": "Germany", "deutschland": "Germany", "france": "France", "fr": "France",
           "austria": "Austria", "at": "Austria", "österreich": "Austria", "switzerland": "Switzerland",
           "ch": "Switzerland", "schweiz": "Switzerland"}
a = pd.read_csv("/work/crm_accounts.csv", dtype=str).drop_duplicates()
a["key"] = a["account_id"].str.strip().astype(int)
a["country"] = a["country"].str.strip().str.lower().map(COUNTRY)
assert a["country"].notna().all() and a["key"].is_unique
i = pd.read_csv("/work/crm_invoices.csv", dtype={"account_id": str})
i["key"] = i["account_id"].str.strip().astype(int)
j = i.merge(a, on="key", how="inner")

total = j.loc[j["region"] == "North", "amount_eur"].sum()
print(f"Accounts in the North region were invoiced {total:.2f} EUR.")
print(f"ANSWER: {total:.2f} EUR")
