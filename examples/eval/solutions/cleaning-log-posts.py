import re

n = sum(1 for line in open("/work/access.log") if re.search(r'"POST ', line))
print(f"The log has {n} POST requests.")
print(f"ANSWER: {n}")
