# Written as a notebook-trained model writes it: /mnt/data and display().
import pandas as pd

e = pd.json_normalize(pd.read_json("/mnt/data/app_events.jsonl", lines=True).to_dict("records"))
pivot = pd.crosstab(e["type"], e["user.plan"])
display(pivot)
print(f"Team-plan users made {pivot.loc['refund', 'team']} refunds.")
print(f"ANSWER: {pivot.loc['refund', 'team']}")
