import re

import pandas as pd

pat = re.compile(r'^(\S+) \S+ \S+ \[([^\]]+)\] "(\S+) (\S+) [^"]*" (\d{3}) (\d+)')
rows = [pat.match(line).groups() for line in open("/work/access.log")]
log = pd.DataFrame(rows, columns=["ip", "time", "method", "path", "status", "size"])
log["status"] = log["status"].astype(int)
log["size"] = log["size"].astype(int)
log["time"] = pd.to_datetime(log["time"], format="%d/%b/%Y:%H:%M:%S %z")

n = log.loc[log["status"] == 404, "ip"].nunique()
print(f"{n} distinct clients got a 404.")
print(f"ANSWER: {n}")
