n = int(((d["vehicle"] == "van") & (d["minutes"] > upper)).sum())
print(f"{n} van deliveries lie above the fence.")
print(f"ANSWER: {n}")
