#!/usr/bin/env python3
"""Writes the evaluation suite's data into data/ next to this script.

    python3 examples/eval/make_data.py

regenerates the synthetic tables, and

    python3 examples/eval/make_data.py --large

makes the tables too large to ship, in data/large/ (ignored by git), unless
they are there already: make eval and the eval tests run it. The tables come
from the standard library's random module with fixed seeds, so every Python 3.11+ writes the same bytes
(numpy's random streams are not used: they may change between releases).

    python3 examples/eval/make_data.py --sklearn DIR --penguins FILE

also rewrites the tables taken from Debian packages: DIR is sklearn's
datasets/data directory and FILE is palmerpenguins' extdata/penguins.csv
(data/SOURCES.md has the apt-get download commands). The scikit-learn files
start with a line of counts and class names instead of a header; they are
rewritten with named columns and the class as a name. Then every public table
is perturbed (perturb): the values these famous data sets are known for are
in every model's training data, and an answer recalled from there must be
wrong, so only an answer computed from the file passes.
"""

import argparse
import csv
import datetime as dt
import gzip
import io
import json
import math
import os
import random
import zipfile

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.join(HERE, "data")


def write_csv(name, header, rows):
    with open(os.path.join(DATA, name), "w", newline="") as f:
        w = csv.writer(f, lineterminator="\n")
        w.writerow(header)
        w.writerows(rows)


def fmt(x, places=2):
    return f"{x:.{places}f}"


# --- Synthetic tables ---------------------------------------------------------

REGIONS = ["North", "South", "East", "West"]
PRODUCTS = {"Widget": 4.50, "Gadget": 12.00, "Gizmo": 27.50, "Doohickey": 65.00}
# A seasonal pattern: more orders towards the end of the year.
MONTH_WEIGHT = [0.8, 0.7, 0.9, 1.0, 1.0, 1.1, 0.9, 0.8, 1.1, 1.2, 1.4, 1.8]


def sales():
    """Orders of 2024: one row per order, dated, by region and product."""
    r = random.Random(2024)
    rows = []
    day = dt.date(2024, 1, 1)
    while day.year == 2024:
        n = r.randint(0, 7) if r.random() < 0.97 else 0
        n = round(n * MONTH_WEIGHT[day.month - 1])
        for _ in range(n):
            product = r.choice(list(PRODUCTS))
            region = r.choices(REGIONS, weights=[3, 2, 2, 4])[0]
            units = r.randint(1, 12)
            price = PRODUCTS[product] * r.choice([0.9, 1.0, 1.0, 1.0, 1.1])
            rows.append([day.isoformat(), region, product, units, fmt(price)])
        day += dt.timedelta(days=1)
    rows = [[i + 1] + row for i, row in enumerate(rows)]
    write_csv("sales.csv", ["order_id", "date", "region", "product", "units", "unit_price"], rows)


FIRST = ["Anna", "Ben", "Chiara", "David", "Elif", "Femi", "Greta", "Hugo", "Ines", "Jonas",
         "Karin", "Luca", "Mara", "Nils", "Olga", "Pablo", "Rosa", "Sven", "Tara", "Yusuf"]
LAST = ["Berg", "Costa", "Dubois", "Eriksen", "Fischer", "Garcia", "Horvat", "Jansen",
        "Keller", "Lopez", "Moreau", "Novak", "Rossi", "Schmidt", "Visser", "Weber"]
COUNTRIES = ["Germany", "France", "Spain", "Italy", "Netherlands"]


def shop():
    """Customers and their orders; some orders name a customer the table lacks."""
    r = random.Random(77)
    customers = []
    for i in range(1, 121):
        signup = dt.date(2023, 1, 1) + dt.timedelta(days=r.randint(0, 540))
        country = r.choices(COUNTRIES, weights=[5, 4, 3, 3, 2])[0]
        customers.append([f"C{i:03d}", f"{r.choice(FIRST)} {r.choice(LAST)}", country, signup.isoformat()])
    write_csv("customers.csv", ["customer_id", "name", "country", "signup_date"], customers)

    # About one customer in six never orders.
    active = [c for c in customers if r.random() > 0.17]
    orders = []
    for _ in range(640):
        if r.random() < 0.06:
            cid, signup = f"C{r.randint(200, 260):03d}", dt.date(2023, 1, 1)
        else:
            c = r.choice(active)
            cid, signup = c[0], dt.date.fromisoformat(c[3])
        day = signup + dt.timedelta(days=r.randint(0, 400))
        amount = round(r.lognormvariate(3.8, 0.6), 2)
        orders.append([cid, day.isoformat(), fmt(amount)])
    orders.sort(key=lambda o: (o[1], o[0]))
    orders = [[f"O{i + 1:04d}"] + o for i, o in enumerate(orders)]
    write_csv("shop_orders.csv", ["order_id", "customer_id", "order_date", "amount_eur"], orders)


def sensor():
    """A week of 10-minute temperature readings with missing rows, NaNs and spikes."""
    r = random.Random(310)
    start = dt.datetime(2024, 3, 1)
    gap = (dt.datetime(2024, 3, 4, 1, 40), dt.datetime(2024, 3, 4, 5, 20))  # the logger was off
    rows = []
    for i in range(7 * 24 * 6):
        t = start + dt.timedelta(minutes=10 * i)
        if gap[0] <= t < gap[1] or r.random() < 0.03:
            continue
        hour = t.hour + t.minute / 60
        temp = 18 + 4 * math.sin((hour - 9) / 24 * 2 * math.pi) + r.gauss(0, 0.4)
        hum = 55 - 1.5 * (temp - 18) + r.gauss(0, 2)
        u = r.random()
        if u < 0.025:
            temp_s = ""
        elif u < 0.031:
            temp_s = fmt(r.choice([85.0, -40.0, 99.9]), 1)  # sensor faults, not weather
        else:
            temp_s = fmt(temp)
        rows.append([t.strftime("%Y-%m-%d %H:%M:%S"), temp_s, fmt(hum, 1)])
    write_csv("sensor.csv", ["timestamp", "temperature_c", "humidity_pct"], rows)


ZONES = [("Los Angeles", -7 * 60), ("New York", -4 * 60), ("London", 60),
         ("Berlin", 120), ("Kolkata", 330), ("Tokyo", 540), ("Auckland", 720)]


def events():
    """Log-ins stamped in each user's local time with its UTC offset (summer 2024)."""
    r = random.Random(55)
    rows = []
    base = dt.datetime(2024, 6, 29, tzinfo=dt.timezone.utc)
    for _ in range(400):
        city, off = r.choice(ZONES)
        utc = base + dt.timedelta(minutes=r.randint(0, 4 * 24 * 60 - 1))
        local = utc.astimezone(dt.timezone(dt.timedelta(minutes=off)))
        rows.append([local.isoformat(), city])
    rows.sort()
    rows = [[i + 1] + row for i, row in enumerate(rows)]
    write_csv("logins.csv", ["login_id", "timestamp", "city"], rows)


WAREHOUSES = ["Hamburg", "Lyon", "Porto"]


def inventory():
    """An export glued from two parts: quantities with thousands separators,
    costs as text with a currency, weights as text with a unit, and the header
    line again where the second part begins."""
    r = random.Random(9)
    header = ["sku", "warehouse", "quantity", "unit_cost", "unit_weight"]
    lines = []
    for i in range(1, 91):
        qty = r.choice([r.randint(5, 900), r.randint(1000, 25000)])
        cur = r.choice(["USD", "EUR"])
        cost = r.uniform(0.5, 80)
        kg = r.uniform(0.05, 3)
        weight = f"{round(kg * 1000)} g" if kg < 1 else f"{kg:.2f} kg"
        lines.append([f"SKU-{i:04d}", r.choice(WAREHOUSES), f"{qty:,}", f"{cur} {cost:.2f}", weight])
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(header)
    w.writerows(lines[:52])
    w.writerow(header)
    w.writerows(lines[52:])
    with open(os.path.join(DATA, "inventory_export.csv"), "w", newline="") as f:
        f.write(buf.getvalue())


def rainfall():
    """Daily rainfall from three stations, written the German way: semicolons
    between fields and decimal commas."""
    r = random.Random(12)
    stations = ["Bremen", "Kassel", "Passau"]
    lines = ["Datum;Station;Niederschlag_mm"]
    day = dt.date(2023, 1, 1)
    while day.year == 2023:
        for s in stations:
            mm = 0.0 if r.random() < 0.55 else r.expovariate(1 / 4.5)
            lines.append(f"{day.strftime('%d.%m.%Y')};{s};" + f"{mm:.1f}".replace(".", ","))
        day += dt.timedelta(days=1)
    with open(os.path.join(DATA, "rainfall_de.csv"), "w", newline="") as f:
        f.write("\n".join(lines) + "\n")


def store_reports():
    """A zip of three stores' monthly revenue, one CSV each, stored uncompressed
    with a fixed date so the archive's bytes never change."""
    r = random.Random(4)
    path = os.path.join(DATA, "store_reports.zip")
    with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as z:
        for store, level in [("store_a", 41000), ("store_b", 38500), ("store_c", 43800)]:
            buf = io.StringIO()
            buf.write("month,revenue\n")
            for m in range(1, 13):
                buf.write(f"2024-{m:02d},{round(level * r.uniform(0.8, 1.25))}\n")
            info = zipfile.ZipInfo(f"{store}.csv", date_time=(2025, 1, 2, 0, 0, 0))
            info.external_attr = 0o644 << 16
            z.writestr(info, buf.getvalue())


# --- Where real data is hard: keys, encodings, layouts, dates, logs ----------

def crm():
    """Accounts and invoices from two systems: the keys disagree (leading zeros,
    spaces, case), one country is spelled several ways, and three accounts are
    listed twice, so a plain join counts their invoices twice."""
    r = random.Random(36)
    spellings = {"Germany": ["Germany", "germany", "DE", "Deutschland", " Germany "],
                 "France": ["France", "FR", "france"], "Austria": ["Austria", "AT", "Österreich"],
                 "Switzerland": ["Switzerland", "CH", "Schweiz"]}
    regions = ["North", "South", "East", "West"]
    accounts = []
    for i in range(1, 81):
        country = r.choices(list(spellings), weights=[5, 3, 2, 2])[0]
        accounts.append([f"{i:05d}", f"{r.choice(LAST)} {r.choice(['GmbH', 'AG', 'SARL', 'KG'])}",
                         r.choice(spellings[country]), r.choice(regions)])
    accounts += [list(accounts[j]) for j in (4, 17, 52)]
    write_csv("crm_accounts.csv", ["account_id", "name", "country", "region"], accounts)
    invoices = []
    for k in range(1, 401):
        a = r.randint(1, 86)  # 81 to 86 are accounts the CRM does not have
        key = str(a) if r.random() < 0.5 else f"{a:05d}"
        if r.random() < 0.2:
            key = " " + key + " "
        day = dt.date(2024, 1, 1) + dt.timedelta(days=r.randint(0, 365))
        invoices.append([f"INV-{k:04d}", key, day.isoformat(), fmt(round(r.lognormvariate(6, 0.7), 2))])
    write_csv("crm_invoices.csv", ["invoice_id", "account_id", "date", "amount_eur"], invoices)


def encodings():
    """The same kind of table in three encodings: Latin-1, UTF-8 with a BOM,
    and UTF-16."""
    r = random.Random(1252)
    cities = ["München", "Köln", "Düsseldorf", "Nürnberg", "Zürich", "Malmö"]
    names = ["Jürgen", "Björn", "Zoë", "Søren", "Anaïs", "Łukasz", "Renée", "José"]
    rows = [[f"K{i:03d}", f"{r.choice(names)} {r.choice(LAST)}", r.choice(cities), fmt(r.uniform(-500, 9000))]
            for i in range(1, 151)]
    with open(os.path.join(DATA, "clients_latin1.csv"), "w", newline="", encoding="latin-1", errors="replace") as f:
        w = csv.writer(f, delimiter=";", lineterminator="\r\n")
        w.writerow(["Kundennr", "Name", "Stadt", "Saldo_EUR"])
        w.writerows([[a, b.replace("Ł", "L"), c, d] for a, b, c, d in rows])
    rows = [[f"P-{i:03d}", r.choice(["Äpfel", "Birnen", "Kirschen", "Pflaumen"]), r.randint(1, 400), fmt(r.uniform(0.5, 9))]
            for i in range(1, 121)]
    with open(os.path.join(DATA, "products_bom.csv"), "w", newline="", encoding="utf-8-sig") as f:
        w = csv.writer(f, lineterminator="\n")
        w.writerow(["sku", "fruit", "qty", "price_eur"])
        w.writerows(rows)
    rows = [[f"2024-05-{d:02d}", st, f"{r.gauss(20 + 3 * j, 2):.2f}"] for d in range(1, 32)
            for j, st in enumerate(["Ålesund", "Tromsø", "Bodø"])]
    with open(os.path.join(DATA, "readings_utf16.tsv"), "w", newline="", encoding="utf-16") as f:
        f.write("date\tstation\ttemp_c\n")
        f.writelines("\t".join(row) + "\n" for row in rows)


def events_jsonl():
    """App events as JSON Lines, with nested fields and some keys left out."""
    r = random.Random(5150)
    with open(os.path.join(DATA, "app_events.jsonl"), "w") as f:
        t = dt.datetime(2024, 6, 1, 8, 0)
        for i in range(1, 901):
            t += dt.timedelta(seconds=r.randint(5, 900))
            kind = r.choices(["view", "cart", "purchase", "refund"], weights=[60, 20, 15, 3])[0]
            e = {"id": i, "ts": t.isoformat() + "Z", "type": kind,
                 "user": {"id": f"u{r.randint(1, 120)}", "plan": r.choice(["free", "pro", "team"])}}
            if kind in ("purchase", "refund"):
                e["order"] = {"amount": round(r.uniform(5, 250), 2), "currency": "EUR",
                              "items": r.randint(1, 6)}
            if r.random() < 0.1:
                e["device"] = r.choice(["ios", "android", "web"])
            f.write(json.dumps(e) + "\n")


def library_db():
    """A small SQLite database: books, members and loans."""
    import sqlite3
    r = random.Random(451)
    path = os.path.join(DATA, "library.sqlite")
    if os.path.exists(path):
        os.remove(path)
    db = sqlite3.connect(path)
    db.executescript("""
        CREATE TABLE books (book_id INTEGER PRIMARY KEY, title TEXT, author TEXT, year INTEGER);
        CREATE TABLE members (member_id INTEGER PRIMARY KEY, name TEXT, joined TEXT);
        CREATE TABLE loans (loan_id INTEGER PRIMARY KEY, book_id INTEGER, member_id INTEGER,
                            loaned TEXT, due TEXT, returned TEXT);
    """)
    authors = ["Le Guin", "Lem", "Atwood", "Borges", "Calvino", "Morrison", "Murakami", "Tokarczuk"]
    db.executemany("INSERT INTO books VALUES (?, ?, ?, ?)",
                   [(i, f"Title {i}", r.choice(authors), r.randint(1950, 2020)) for i in range(1, 121)])
    db.executemany("INSERT INTO members VALUES (?, ?, ?)",
                   [(i, f"{r.choice(FIRST)} {r.choice(LAST)}", (dt.date(2020, 1, 1) + dt.timedelta(days=r.randint(0, 1500))).isoformat())
                    for i in range(1, 61)])
    loans = []
    for i in range(1, 501):
        out = dt.date(2024, 1, 1) + dt.timedelta(days=r.randint(0, 330))
        due = out + dt.timedelta(days=21)
        back = None if r.random() < 0.08 else (out + dt.timedelta(days=r.randint(1, 35))).isoformat()
        loans.append((i, r.randint(1, 120), r.randint(1, 60), out.isoformat(), due.isoformat(), back))
    db.executemany("INSERT INTO loans VALUES (?, ?, ?, ?, ?, ?)", loans)
    db.commit()
    db.execute("VACUUM")
    db.close()


def bank_statement():
    """A bank's CSV export: a preamble of account details, a header, the
    transactions (German number format), and a footer with a closing balance."""
    r = random.Random(8008)
    lines = ["Kontoauszug;;;;", "Konto;DE44 5001 0517 5407 3249 31;;;", "Zeitraum;01.01.2024 - 30.06.2024;;;",
             "Anfangssaldo;2.500,00 EUR;;;", ";;;;", "Buchungstag;Empfänger;Verwendungszweck;Betrag;Währung"]
    day = dt.date(2024, 1, 1)
    balance = 2500.0
    while day < dt.date(2024, 7, 1):
        for _ in range(r.choice([0, 0, 1, 1, 2])):
            if r.random() < 0.25:
                amt = round(r.uniform(200, 3200), 2)
                who, why = r.choice(["Arbeitgeber GmbH", "Finanzamt", "Max Weber"]), "Gutschrift"
            else:
                amt = -round(r.lognormvariate(3.5, 1.0), 2)
                who, why = r.choice(["REWE", "Deutsche Bahn", "Stadtwerke", "Amazon", "Apotheke"]), "Lastschrift"
            balance += amt
            s = f"{abs(amt):,.2f}".replace(",", "X").replace(".", ",").replace("X", ".")
            lines.append(f"{day:%d.%m.%Y};{who};{why};{'-' if amt < 0 else ''}{s};EUR")
        day += dt.timedelta(days=1)
    s = f"{balance:,.2f}".replace(",", "X").replace(".", ",").replace("X", ".")
    lines += [";;;;", f"Endsaldo;{s} EUR;;;", "Dieser Auszug wurde maschinell erstellt.;;;;"]
    with open(os.path.join(DATA, "bank_statement.csv"), "w", newline="", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")


def mixed_dates():
    """Orders typed in by hand: dates in four formats (ISO, day-first with
    dots, US month names, and Excel serial numbers)."""
    r = random.Random(1900)
    rows = []
    for i in range(1, 301):
        d = dt.date(2024, 1, 1) + dt.timedelta(days=r.randint(0, 365))
        form = r.choice(["iso", "dots", "words", "serial"])
        text = {"iso": d.isoformat(), "dots": f"{d:%d.%m.%Y}", "words": f"{d:%B} {d.day}, {d.year}",
                "serial": str((d - dt.date(1899, 12, 30)).days)}[form]
        rows.append([f"M{i:04d}", text, fmt(r.uniform(10, 500))])
    write_csv("manual_orders.csv", ["order_no", "order_date", "total_eur"], rows)


def meter_dst():
    """Half-hourly electricity readings, stamped in UTC, for the weeks around
    the two daylight-saving changes of 2024 in Berlin."""
    r = random.Random(2710)
    rows = []
    for start in [dt.datetime(2024, 3, 28), dt.datetime(2024, 10, 24)]:
        t = start
        while t < start + dt.timedelta(days=7):
            hour = (t.hour + 1) % 24
            base = 0.35 + (0.5 if 6 <= hour < 22 else 0)
            rows.append([t.strftime("%Y-%m-%dT%H:%M:%SZ"), f"{max(0.05, r.gauss(base, 0.12)):.3f}"])
            t += dt.timedelta(minutes=30)
    write_csv("meter_utc.csv", ["timestamp_utc", "kwh"], rows)


def web_log():
    """A web server's access log in the combined format."""
    r = random.Random(404)
    paths = ["/", "/index.html", "/api/orders", "/api/orders/17", "/api/users", "/static/app.js",
             "/static/logo.png", "/login", "/admin", "/api/search?q=terp"]
    ips = [f"10.0.{r.randint(0, 3)}.{r.randint(1, 254)}" for _ in range(40)] + ["203.0.113.7", "198.51.100.23"]
    t = dt.datetime(2024, 9, 14, 0, 0, 5)
    lines = []
    for _ in range(1500):
        t += dt.timedelta(seconds=r.randint(1, 115))
        path = r.choice(paths)
        status = r.choices([200, 304, 404, 500, 301], weights=[80, 8, 7, 2, 3])[0]
        size = 0 if status == 304 else r.randint(200, 90000)
        method = "POST" if path.startswith("/api/orders") and r.random() < 0.3 else "GET"
        lines.append(f'{r.choice(ips)} - - [{t:%d/%b/%Y:%H:%M:%S} +0000] "{method} {path} HTTP/1.1" {status} {size} '
                     f'"-" "Mozilla/5.0 (X11; Linux x86_64)"')
    with open(os.path.join(DATA, "access.log"), "w") as f:
        f.write("\n".join(lines) + "\n")


def wide_survey():
    """Quarterly visitors per museum, one column per quarter: a wide table."""
    r = random.Random(1968)
    museums = ["Pergamon", "Louvre", "Prado", "Uffizi", "Rijks", "Belvedere", "Tate", "Munch"]
    header = ["museum", "city"] + [f"{y}_Q{q}" for y in (2022, 2023) for q in range(1, 5)]
    cities = ["Berlin", "Paris", "Madrid", "Florence", "Amsterdam", "Vienna", "London", "Oslo"]
    rows = []
    for m, c in zip(museums, cities):
        level = r.randint(40000, 250000)
        rows.append([m, c] + [round(level * r.uniform(0.7, 1.3) * (1.1 if y == 2023 else 1)) for y in (2022, 2023) for q in range(4)])
    write_csv("museum_visits_wide.csv", header, rows)


def duplicates():
    """Payments exported twice by a sync job: exact duplicates, and the same
    payment again with its reference in other case and with spaces."""
    r = random.Random(2222)
    rows = []
    for i in range(1, 251):
        d = dt.date(2024, 4, 1) + dt.timedelta(days=r.randint(0, 60))
        rows.append([f"PAY{i:05d}", d.isoformat(), r.choice(["card", "sepa", "paypal"]), fmt(r.uniform(5, 400))])
    out = list(rows)
    for row in r.sample(rows, 30):
        out.append(list(row))
    for row in r.sample(rows, 15):
        out.append([" " + row[0].lower() + " "] + row[1:])
    r.shuffle(out)
    write_csv("payments_export.csv", ["payment_ref", "date", "method", "amount_eur"], out)


def outliers():
    """Delivery times in minutes, with a few typed-in errors."""
    r = random.Random(999)
    rows = []
    for i in range(1, 401):
        m = round(r.gammavariate(6, 6), 1)
        if r.random() < 0.025:
            m = r.choice([0.0, 999.0, 1440.0, round(m * 60, 1)])
        rows.append([f"D{i:04d}", r.choice(["bike", "car", "van"]), m])
    write_csv("deliveries.csv", ["delivery_id", "vehicle", "minutes"], rows)


def store_daily():
    """Daily sales of five shops over the turn of 2024 to 2025, with days
    a shop was closed left out."""
    r = random.Random(7)
    rows = []
    for shop in ["Aachen", "Bonn", "Celle", "Dessau", "Erfurt"]:
        level = r.uniform(800, 2400)
        d = dt.date(2024, 10, 1)
        while d <= dt.date(2025, 1, 31):
            if d.weekday() != 6 and r.random() > 0.04:
                season = 1.5 if d.month == 12 and d.day < 24 else 1.0
                rows.append([d.isoformat(), shop, fmt(level * season * r.uniform(0.6, 1.4))])
            d += dt.timedelta(days=1)
    rows.sort()
    write_csv("shop_daily.csv", ["date", "shop", "sales_eur"], rows)


# LARGE is where the table too large to print goes: made when the suite runs
# (make eval, make eval-check, the eval tests), never shipped.
LARGE = os.path.join(DATA, "large")


def requests_large():
    """A quarter of a million API requests (about 13 MB): too large for a
    model to print and read; it must compute."""
    r = random.Random(250000)
    os.makedirs(LARGE, exist_ok=True)
    path = os.path.join(LARGE, "api_requests.csv")
    t = dt.datetime(2024, 11, 1)
    endpoints = ["/v1/search", "/v1/items", "/v1/items/{id}", "/v1/cart", "/v1/checkout", "/v1/login"]
    with open(path + ".tmp", "w", newline="") as f:
        w = csv.writer(f, lineterminator="\n")
        w.writerow(["request_id", "timestamp", "region", "endpoint", "status", "latency_ms"])
        for i in range(1, 250001):
            t += dt.timedelta(milliseconds=r.randint(1, 20000))
            region = r.choices(["eu", "us", "ap"], weights=[5, 4, 2])[0]
            ep = r.choice(endpoints)
            status = r.choices([200, 400, 404, 500, 503], weights=[900, 30, 40, 15, 8])[0]
            latency = r.lognormvariate(4.2 + (0.6 if ep == "/v1/checkout" else 0) + (0.3 if region == "ap" else 0), 0.5)
            w.writerow([f"r{i:06d}", t.isoformat(timespec="milliseconds"), region, ep, status, f"{latency:.1f}"])
    os.replace(path + ".tmp", path)


# --- Tables from Debian packages ---------------------------------------------

IRIS = ["sepal_length_cm", "sepal_width_cm", "petal_length_cm", "petal_width_cm"]
WINE = ["alcohol", "malic_acid", "ash", "alcalinity_of_ash", "magnesium", "total_phenols",
        "flavanoids", "nonflavanoid_phenols", "proanthocyanins", "color_intensity", "hue",
        "od280_od315_of_diluted_wines", "proline"]
CANCER = [f"{kind}_{f}" for kind in ["mean", "error", "worst"] for f in [
    "radius", "texture", "perimeter", "area", "smoothness", "compactness", "concavity",
    "concave_points", "symmetry", "fractal_dimension"]]
CANCER = [c.replace("error_", "") + "_error" if c.startswith("error_") else c for c in CANCER]


# Columns that are codes, not measurements: perturb keeps them.
KEEP = {"year", "sex"}


def perturb(name, header, rows):
    """Returns a perturbed copy of a public table, the same for every run: about
    one row in twelve is dropped, and every numeric column is scaled by a factor
    of its own (4 to 10 percent up or down) and every value in it by a little
    noise (2 percent, normal), then written with as many decimals as the
    original value had. Missing values (NA) and text stay as they are. Means,
    totals, counts, correlations and regression coefficients all move, by more
    than the rounding the questions ask for."""
    rng = random.Random("perturb " + name)
    rows = [r for r in rows if rng.random() >= 1 / 12]

    def number(v):
        try:
            float(v)
            return True
        except ValueError:
            return v == "NA"

    numeric = [h not in KEEP and all(number(r[i]) for r in rows) and any(r[i] != "NA" for r in rows)
               for i, h in enumerate(header)]
    scale = [1 + rng.choice([-1, 1]) * rng.uniform(0.04, 0.10) for _ in header]
    out = []
    for r in rows:
        r = list(r)
        for i, v in enumerate(r):
            if not numeric[i] or v == "NA":
                continue
            places = len(v.split(".")[1]) if "." in v else 0
            x = float(v) * scale[i] * (1 + rng.gauss(0, 0.02))
            r[i] = f"{x:.{places}f}"
        out.append(r)
    return out


def sklearn_table(src, name, features, label):
    """Rewrites one of sklearn's CSVs: its first line holds the row and column
    counts and the class names; the last column is the class index."""
    with open(src, newline="") as f:
        rows = list(csv.reader(f))
    classes = rows[0][2:]
    out = [r[:-1] + [classes[int(r[-1])]] for r in rows[1:]]
    assert len(out) == int(rows[0][0]) and len(features) == int(rows[0][1])
    write_csv(name, features + [label], perturb(name, features + [label], out))


def diabetes(src):
    """Joins diabetes_data_raw (space-separated, unscaled) and diabetes_target
    (one float a line) into one CSV with named columns."""
    with gzip.open(os.path.join(src, "diabetes_data_raw.csv.gz"), "rt") as f:
        x = [line.split() for line in f if line.strip()]
    with gzip.open(os.path.join(src, "diabetes_target.csv.gz"), "rt") as f:
        y = [line.strip() for line in f if line.strip()]
    assert len(x) == len(y) == 442
    rows = [xi + [str(int(float(yi)))] for xi, yi in zip(x, y)]
    cols = ["age", "sex", "bmi", "bp"] + [f"s{i}" for i in range(1, 7)] + ["target"]
    write_csv("diabetes.csv", cols, perturb("diabetes.csv", cols, rows))


def penguins(src):
    """Palmer penguins, perturbed like the others."""
    with open(src, newline="") as f:
        rows = list(csv.reader(f))
    write_csv("penguins.csv", rows[0], perturb("penguins.csv", rows[0], rows[1:]))


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sklearn", metavar="DIR", help="sklearn/datasets/data from python3-sklearn")
    p.add_argument("--penguins", metavar="FILE", help="extdata/penguins.csv from r-cran-palmerpenguins")
    p.add_argument("--large", action="store_true",
                   help="only make data/large/, the tables too large to ship, unless they are there already")
    a = p.parse_args()
    os.makedirs(DATA, exist_ok=True)
    if a.large:
        if not os.path.exists(os.path.join(LARGE, "api_requests.csv")):
            requests_large()
        return
    sales()
    shop()
    sensor()
    events()
    inventory()
    rainfall()
    store_reports()
    crm()
    encodings()
    events_jsonl()
    library_db()
    bank_statement()
    mixed_dates()
    meter_dst()
    web_log()
    wide_survey()
    duplicates()
    outliers()
    store_daily()
    if a.sklearn:
        sklearn_table(os.path.join(a.sklearn, "iris.csv"), "iris.csv", IRIS, "species")
        sklearn_table(os.path.join(a.sklearn, "wine_data.csv"), "wine.csv", WINE, "cultivar")
        sklearn_table(os.path.join(a.sklearn, "breast_cancer.csv"), "breast_cancer.csv", CANCER, "diagnosis")
        diabetes(a.sklearn)
    if a.penguins:
        penguins(a.penguins)


if __name__ == "__main__":
    main()
