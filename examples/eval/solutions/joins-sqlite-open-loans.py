import sqlite3

db = sqlite3.connect("/work/library.sqlite")
(n,) = db.execute("SELECT COUNT(DISTINCT member_id) FROM loans WHERE returned IS NULL").fetchone()
print(f"{n} members still have a book out.")
print(f"ANSWER: {n}")
