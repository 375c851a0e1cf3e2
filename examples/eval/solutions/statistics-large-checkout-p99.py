import pandas as pd

r = pd.read_csv("/work/api_requests.csv")
p99 = r.loc[r["endpoint"] == "/v1/checkout", "latency_ms"].quantile(0.99)
print(f"The 99th percentile of checkout latency is {p99:.1f} ms.")
print(f"ANSWER: {p99:.1f} ms")
