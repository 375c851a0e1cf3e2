import sqlite3

import pandas as pd

db = sqlite3.connect("/work/library.sqlite")

(n,) = db.execute("SELECT COUNT(*) FROM (SELECT member_id FROM loans GROUP BY member_id HAVING COUNT(*) > 10)").fetchone()
print(f"{n} members have more than ten loans.")
print(f"ANSWER: {n}")
