import sqlite3

db = sqlite3.connect("/work/library.sqlite")
rows = db.execute("SELECT b.author, COUNT(*) AS n FROM loans l JOIN books b USING (book_id) GROUP BY b.author ORDER BY n DESC").fetchall()
assert rows[0][1] > rows[1][1]
print(f"{rows[0][0]}'s books were lent most often: {rows[0][1]} loans.")
print(f"ANSWER: {rows[0][0]}, {rows[0][1]}")
