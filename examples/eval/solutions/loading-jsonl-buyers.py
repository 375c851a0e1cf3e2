import json

buyers = set()
with open("/work/app_events.jsonl") as f:
    for line in f:
        e = json.loads(line)
        if e["type"] == "purchase":
            buyers.add(e["user"]["id"])
print(f"{len(buyers)} distinct users made a purchase.")
print(f"ANSWER: {len(buyers)}")
