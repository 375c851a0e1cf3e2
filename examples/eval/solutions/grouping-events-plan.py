import pandas as pd

e = pd.json_normalize(pd.read_json("/work/app_events.jsonl", lines=True).to_dict("records"))
c = e.loc[e["type"] == "purchase", "user.plan"].value_counts()
assert c.iloc[0] > c.iloc[1]
print(f"Users on the {c.index[0]} plan made the most purchases: {c.iloc[0]}.")
print(f"ANSWER: {c.index[0]}, {c.iloc[0]}")
