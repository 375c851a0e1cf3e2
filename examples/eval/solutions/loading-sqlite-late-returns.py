import sqlite3

db = sqlite3.connect("/work/library.sqlite")
(n,) = db.execute("SELECT COUNT(*) FROM loans WHERE returned IS NOT NULL AND returned > due").fetchone()
print(f"{n} loans came back late.")
print(f"ANSWER: {n}")
