import sqlite3

db = sqlite3.connect("/work/library.sqlite")
cols = [r[1] for r in db.execute("PRAGMA table_info(members)")]
assert not any("birth" in c or "age" in c for c in cols)
print(f"The members table has no birth date or age ({', '.join(cols)}): the data cannot tell.")
print("ANSWER: cannot be determined")
