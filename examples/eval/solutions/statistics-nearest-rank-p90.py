import math

import pandas as pd

m = pd.read_csv("/work/deliveries.csv")["minutes"].sort_values().to_numpy()
p90 = m[math.ceil(0.9 * len(m)) - 1]
print(f"By nearest rank, the 90th percentile is {p90:.1f} minutes.")
print(f"ANSWER: {p90:.1f} min")
