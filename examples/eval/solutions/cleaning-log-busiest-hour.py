import re

import pandas as pd

pat = re.compile(r'^(\S+) \S+ \S+ \[([^\]]+)\] "(\S+) (\S+) [^"]*" (\d{3}) (\d+)')
rows = [pat.match(line).groups() for line in open("/work/access.log")]
log = pd.DataFrame(rows, columns=["ip", "time", "method", "path", "status", "size"])
log["status"] = log["status"].astype(int)
log["size"] = log["size"].astype(int)
log["time"] = pd.to_datetime(log["time"], format="%d/%b/%Y:%H:%M:%S %z")

counts = log["time"].dt.strftime("%H:00").value_counts()
assert counts.iloc[0] > counts.iloc[1]
print(f"The busiest hour was {counts.index[0]}, with {counts.iloc[0]} requests.")
print(f"ANSWER: {counts.index[0]}, {counts.iloc[0]}")
