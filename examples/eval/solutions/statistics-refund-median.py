import pandas as pd

e = pd.json_normalize(pd.read_json("/work/app_events.jsonl", lines=True).to_dict("records"))
m = e.loc[e["type"] == "refund", "order.amount"].median()
print(f"The median refund is {m:.2f} EUR.")
print(f"ANSWER: {m:.2f} EUR")
