import re

import pandas as pd

pat = re.compile(r'^(\S+) \S+ \S+ \[([^\]]+)\] "(\S+) (\S+) [^"]*" (\d{3}) (\d+)')
rows = [pat.match(line).groups() for line in open("/work/access.log")]
log = pd.DataFrame(rows, columns=["ip", "time", "method", "path", "status", "size"])
log["status"] = log["status"].astype(int)

share = 100 * (log["status"] >= 500).mean()
print(f"{share:.1f}% of the requests got a server error.")
print(f"ANSWER: {share:.1f} %")
