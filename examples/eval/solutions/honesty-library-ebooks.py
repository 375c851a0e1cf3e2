import sqlite3

db = sqlite3.connect("/work/library.sqlite")
cols = [r[1] for r in db.execute("PRAGMA table_info(books)")]
assert not any("format" in c or "type" in c or "ebook" in c for c in cols)
print(f"The books table records no format ({', '.join(cols)}): the data cannot tell.")
print("ANSWER: cannot be determined")
