#!/usr/bin/env python3
"""Runs every case's reference solution and checks its answer, without a model.

    python3 examples/eval/check.py [ID ...]

Each solution runs in bubblewrap with a fresh temporary directory mounted at
/work, holding the case's files, as terp's sandbox would upload them. The line
it prints is checked with the batch matchers as examples/batch/README.md
describes them (Python's re stands in for RE2). This is a quick local check
for authors; the Go oracle test is the official one.

It also lints the cases: known fields, skills and levels, files that exist,
a solution for each, and expected numbers that the question itself contains
(an answer echoing the question would pass such a case without computing).
"""

import fnmatch
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
CASES = os.path.join(HERE, "cases.jsonl")
PYTHON = os.environ.get("EVAL_PYTHON", "/usr/bin/python3")  # one with numpy, pandas, matplotlib

FIELDS = {"id", "question", "files", "expect", "max_steps", "model", "skill", "level"}
EXPECT = {"contains", "regex", "number", "files"}
SKILLS = ["loading", "cleaning", "grouping", "joins", "statistics", "time-series", "charts", "files", "honesty"]
LEVELS = ["easy", "medium", "hard"]

NUMBER = re.compile(r"([+\-\u2212]?)((?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?|\.\d+)([eE][+\-]?\d+)?(\s?%)?")


def numbers(text):
    """The numbers a person reads in text: thousands separators, signs (a
    hyphen after a letter or digit is not one), and a percentage as both
    14 and 0.14."""
    out = []
    for m in NUMBER.finditer(text):
        sign, digits, exp, pct = m.groups()
        if sign == "-" and m.start() > 0 and text[m.start() - 1].isalnum():
            sign = ""
        x = float(digits.replace(",", "") + (exp or ""))
        if sign in ("-", "\u2212"):
            x = -x
        out.append(x)
        if pct:
            out.append(x / 100)
    return out


def load():
    cases = []
    with open(CASES) as f:
        for n, line in enumerate(f, 1):
            if line.strip() and not line.startswith("#"):
                c = json.loads(line)
                c["_line"] = n
                cases.append(c)
    return cases


def lint(cases):
    problems = []
    seen = set()
    for c in cases:
        where = f"cases.jsonl:{c['_line']}"
        for k in set(c) - FIELDS - {"_line"}:
            problems.append(f"{where}: unknown field {k!r}")
        for k in set(c.get("expect", {})) - EXPECT:
            problems.append(f"{where}: unknown expectation {k!r}")
        if c.get("id") in seen:
            problems.append(f"{where}: duplicate id {c.get('id')!r}")
        seen.add(c.get("id"))
        if c.get("skill") not in SKILLS:
            problems.append(f"{where}: skill {c.get('skill')!r} is not one of {SKILLS}")
        if c.get("level") not in LEVELS:
            problems.append(f"{where}: level {c.get('level')!r} is not one of {LEVELS}")
        for path in c.get("files", []):
            if not os.path.isfile(os.path.join(HERE, path)):
                problems.append(f"{where}: no file {path}")
        if not os.path.isfile(solution(c)):
            problems.append(f"{where}: no solution {os.path.relpath(solution(c), HERE)}")
        want = c.get("expect", {}).get("number")
        if want is not None:
            value, tol = number_spec(want)
            if any(abs(x - value) <= tol for x in numbers(c["question"])):
                problems.append(f"{where}: the question itself contains a number within {tol} of {value}")
    return problems


def solution(c):
    return os.path.join(HERE, "solutions", f"{c['id']}.py")


def number_spec(want):
    if isinstance(want, dict):
        return want["value"], want.get("tolerance", 0)
    return want, 0


def snapshot(d):
    state = {}
    for root, _, files in os.walk(d):
        for name in files:
            p = os.path.join(root, name)
            with open(p, "rb") as f:
                state[os.path.relpath(p, d)] = hashlib.sha256(f.read()).hexdigest()
    return state


def run(c):
    """Runs the case's solution in a fresh /work; returns its answer and the
    files it created or changed. The solution is mounted under /tmp because
    this checkout may itself live under /work."""
    with tempfile.TemporaryDirectory() as work:
        for path in c.get("files", []):
            shutil.copy(os.path.join(HERE, path), work)
        before = snapshot(work)
        p = subprocess.run(
            ["bwrap", "--ro-bind", "/", "/", "--bind", work, "/work", "--tmpfs", "/tmp",
             "--ro-bind", solution(c), "/tmp/solution.py",
             "--dev", "/dev", "--proc", "/proc", "--chdir", "/work", PYTHON, "/tmp/solution.py"],
            capture_output=True, text=True, timeout=120)
        after = snapshot(work)
        saved = [k for k, v in after.items() if before.get(k) != v]
        if p.returncode != 0:
            return None, saved, p.stderr.strip().splitlines()[-1:]
        lines = [ln for ln in p.stdout.splitlines() if ln.strip()]
        return (lines[-1] if lines else ""), saved, []


def verdict(c, answer, saved):
    """The reasons the answer fails the case's expectations, as terp batch checks them."""
    reasons = []
    e = c.get("expect", {})
    contains = e.get("contains", [])
    for text in [contains] if isinstance(contains, str) else contains:
        if text.lower() not in answer.lower():
            reasons.append(f"does not contain {text!r}")
    if "regex" in e and not re.search(e["regex"], answer):
        reasons.append(f"does not match {e['regex']!r}")
    if "number" in e:
        value, tol = number_spec(e["number"])
        found = numbers(answer)
        if not any(abs(x - value) <= tol for x in found):
            reasons.append(f"no number within {tol} of {value} (found {found})")
    for pattern in e.get("files", []):
        if not any(fnmatch.fnmatchcase(s, pattern) for s in saved):
            reasons.append(f"saved no file matching {pattern!r} (saved {saved})")
    return reasons


def main():
    cases = load()
    problems = lint(cases)
    for p in problems:
        print("LINT", p)
    only = set(sys.argv[1:])
    failed = 0
    for c in cases:
        if only and c["id"] not in only:
            continue
        answer, saved, err = run(c)
        reasons = err if answer is None else verdict(c, answer, saved)
        failed += bool(reasons)
        print(f"{'FAIL' if reasons else 'PASS'}  {c['id']}: {answer}")
        for r in reasons:
            print(f"      {r}")
    print(f"{len(cases) if not only else len(only)} cases, {failed} failed, {len(problems)} lint problems")
    return 1 if failed or problems else 0


if __name__ == "__main__":
    sys.exit(main())
