m = matched.loc[matched["country"] == "France", "amount_eur"].mean()
print(f"Matched invoices of French accounts average {m:.2f} EUR.")
print(f"ANSWER: {m:.2f} EUR")
