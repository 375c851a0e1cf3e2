november = daily[(month == "2024-11") & (daily["shop"] == best)]["sales_eur"].sum()
growth = 100 * (december[best] / november - 1)
print(f"{best}'s December was {growth:.1f}% above its November.")
print(f"ANSWER: {growth:.1f} %")
