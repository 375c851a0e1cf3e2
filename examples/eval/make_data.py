#!/usr/bin/env python3
"""Writes the evaluation suite's data into data/ next to this script.

    python3 examples/eval/make_data.py

regenerates the synthetic tables. They come from the standard library's
random module with fixed seeds, so every Python 3.11+ writes the same bytes
(numpy's random streams are not used: they may change between releases).

    python3 examples/eval/make_data.py --sklearn DIR --penguins FILE

also rewrites the tables taken from Debian packages: DIR is sklearn's
datasets/data directory and FILE is palmerpenguins' extdata/penguins.csv
(data/SOURCES.md has the apt-get download commands). Penguins is copied as is.
The scikit-learn files start with a line of counts and class names instead of
a header; they are rewritten with named columns and the class as a name, and
every value is kept as the text the original file has.
"""

import argparse
import csv
import datetime as dt
import gzip
import io
import math
import os
import random
import shutil
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


# --- Tables from Debian packages ---------------------------------------------

IRIS = ["sepal_length_cm", "sepal_width_cm", "petal_length_cm", "petal_width_cm"]
WINE = ["alcohol", "malic_acid", "ash", "alcalinity_of_ash", "magnesium", "total_phenols",
        "flavanoids", "nonflavanoid_phenols", "proanthocyanins", "color_intensity", "hue",
        "od280_od315_of_diluted_wines", "proline"]
CANCER = [f"{kind}_{f}" for kind in ["mean", "error", "worst"] for f in [
    "radius", "texture", "perimeter", "area", "smoothness", "compactness", "concavity",
    "concave_points", "symmetry", "fractal_dimension"]]
CANCER = [c.replace("error_", "") + "_error" if c.startswith("error_") else c for c in CANCER]


def sklearn_table(src, name, features, label):
    """Rewrites one of sklearn's CSVs: its first line holds the row and column
    counts and the class names; the last column is the class index."""
    with open(src, newline="") as f:
        rows = list(csv.reader(f))
    classes = rows[0][2:]
    out = [r[:-1] + [classes[int(r[-1])]] for r in rows[1:]]
    assert len(out) == int(rows[0][0]) and len(features) == int(rows[0][1])
    write_csv(name, features + [label], out)


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
    write_csv("diabetes.csv", cols, rows)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sklearn", metavar="DIR", help="sklearn/datasets/data from python3-sklearn")
    p.add_argument("--penguins", metavar="FILE", help="extdata/penguins.csv from r-cran-palmerpenguins")
    a = p.parse_args()
    os.makedirs(DATA, exist_ok=True)
    sales()
    shop()
    sensor()
    events()
    inventory()
    rainfall()
    store_reports()
    if a.sklearn:
        sklearn_table(os.path.join(a.sklearn, "iris.csv"), "iris.csv", IRIS, "species")
        sklearn_table(os.path.join(a.sklearn, "wine_data.csv"), "wine.csv", WINE, "cultivar")
        sklearn_table(os.path.join(a.sklearn, "breast_cancer.csv"), "breast_cancer.csv", CANCER, "diagnosis")
        diabetes(a.sklearn)
    if a.penguins:
        shutil.copyfile(a.penguins, os.path.join(DATA, "penguins.csv"))


if __name__ == "__main__":
    main()
