import re

import pandas as pd

pat = re.compile(r'^(\S+) \S+ \S+ \[([^\]]+)\] "(\S+) (\S+) [^"]*" (\d{3}) (\d+)')
rows = [pat.match(line).groups() for line in open("/work/access.log")]
log = pd.DataFrame(rows, columns=["ip", "time", "method", "path", "status", "size"])
log["status"] = log["status"].astype(int)
log["size"] = log["size"].astype(int)
log["time"] = pd.to_datetime(log["time"], format="%d/%b/%Y:%H:%M:%S %z")

n = int(log.loc[(log["status"] == 200) & log["path"].str.startswith("/api/"), "size"].sum())
print(f"Successful /api/ requests sent {n} bytes.")
print(f"ANSWER: {n}")
