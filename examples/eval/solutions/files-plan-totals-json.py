import json

import pandas as pd

e = pd.json_normalize(pd.read_json("/work/app_events.jsonl", lines=True).to_dict("records"))
t = e[e["type"] == "purchase"].groupby("user.plan")["order.amount"].sum().round(2)
with open("/work/plan_purchases.json", "w") as f:
    json.dump(t.to_dict(), f)
print(f"Saved plan_purchases.json; all plans together: {t.sum():.2f} EUR.")
print(f"ANSWER: {t.sum():.2f} EUR")
