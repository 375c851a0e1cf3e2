import pandas as pd

e = pd.json_normalize(pd.read_json("/work/app_events.jsonl", lines=True).to_dict("records"))
total = e.loc[(e["type"] == "purchase") & (e["user.plan"] == "pro"), "order.amount"].sum()
print(f"Purchases by pro users add up to {total:.2f} EUR.")
print(f"ANSWER: {total:.2f} EUR")
