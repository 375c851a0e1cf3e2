import sqlite3

db = sqlite3.connect("/work/library.sqlite")
(n,) = db.execute("SELECT COUNT(DISTINCT b.book_id) FROM books b JOIN loans l USING (book_id) WHERE b.year < 1980").fetchone()
print(f"{n} books from before 1980 were lent at least once.")
print(f"ANSWER: {n}")
