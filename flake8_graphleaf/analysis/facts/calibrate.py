"""The calibration table of the confidence levels (``confidence.json``), from judged findings.

Every finding judged in ``docs/precision-verdicts/`` (TRUE or FALSE, by running the package's own
code) is recorded in ``docs/precision-verdicts/steps.tsv`` with the steps its witness takes on
trust at the linter that re-scanned it (``bench/corpus.py record``): one row per verdict,
columns ``set key code verdict reported confidence trust``.  This module tabulates, per kind of
step, how many of the findings that took it were TRUE and FALSE, and writes the table the
analysis reads (analysis/confidence.py): a kind whose measured precision is below the threshold
(or that was judged fewer than ``min_verdicts`` times) lowers a finding's level.

    python -m flake8_graphleaf.analysis.facts.calibrate            # write confidence.json
    python -m flake8_graphleaf.analysis.facts.calibrate --check    # exit 1 if it is out of date
    python -m flake8_graphleaf.analysis.facts.calibrate --cross-validate   # leave each set out in turn

``tests/test_confidence.py`` regenerates the table from the committed rows and fails on a
difference.  Stdlib only; no third-party download.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import sys
from collections import defaultdict

THRESHOLD = 0.9
MIN_VERDICTS = 10
LEGACY = ("GLF101", "GLF102")

HERE = os.path.dirname(os.path.abspath(__file__))
TABLE = os.path.join(HERE, "confidence.json")
ROWS = os.path.normpath(os.path.join(HERE, "..", "..", "..", "docs", "precision-verdicts", "steps.tsv"))


def read_rows(path: str = ROWS) -> list[dict]:
    """The judged rows that the re-scan still reports: set, key, code, verdict, trust (a list). A
    confirmed miss (a store a run showed to break the copy) that the linter reports now is TRUE."""
    out = []
    with open(path, encoding="utf-8", newline="") as fh:
        for row in csv.DictReader((line for line in fh if not line.startswith("#")), delimiter="\t"):
            if row.get("verdict") == "MISS":
                row["verdict"] = "TRUE"  # a store a run showed to break the copy, reported now
            if row.get("verdict") not in ("TRUE", "FALSE") or row.get("reported") != "yes":
                continue
            trust = [] if row.get("trust", "-") in ("-", "") else sorted(set(row["trust"].split(",")))
            out.append({"set": row["set"], "key": row["key"], "code": row["code"], "verdict": row["verdict"],
                        "trust": trust})
    return out


def _count(rows: list[dict]) -> dict:
    t = sum(r["verdict"] == "TRUE" for r in rows)
    f = len(rows) - t
    return {"true": t, "false": f, "precision": round(t / (t + f), 4) if t + f else 0.0}


def build(rows: list[dict]) -> dict:
    by_kind: dict[str, list] = defaultdict(list)
    by_code: dict[str, list] = defaultdict(list)
    for r in rows:
        for k in r["trust"]:
            by_kind[k].append(r)
        if not r["trust"]:
            by_code[r["code"]].append(r)
            by_code["*"].append(r)
    return {
        "generated_by": "python -m flake8_graphleaf.analysis.facts.calibrate (from docs/precision-verdicts/steps.tsv)",
        "threshold": THRESHOLD,
        "min_verdicts": MIN_VERDICTS,
        "verdicts": len(rows),
        "sets": sorted({r["set"] for r in rows}),
        "kinds": {k: _count(v) for k, v in sorted(by_kind.items())},
        "proven": {k: _count(v) for k, v in sorted(by_code.items())},
    }


def render(table: dict) -> str:
    return json.dumps(table, indent=2, sort_keys=True) + "\n"


def level(trust: list[str], table: dict) -> str:
    from ..confidence import level_of

    return level_of([{"kind": k, "text": ""} for k in trust], table)


def cross_validate(rows: list[dict]) -> tuple[list[tuple], tuple]:
    """For each set left out: the default selection's (high) TRUE, FALSE and precision on it, with
    the table built from the other sets; and the TRUE findings it keeps at high (legacy norms
    apart).  Returns (per-set rows, pooled row)."""
    out = []
    pooled = [0, 0, 0, 0, 0, 0]
    for name in sorted({r["set"] for r in rows}):
        table = build([r for r in rows if r["set"] != name])
        left = [r for r in rows if r["set"] == name]
        high = [r for r in left if level(r["trust"], table) == "high"]
        t = sum(r["verdict"] == "TRUE" for r in high)
        f = len(high) - t
        true_all = sum(r["verdict"] == "TRUE" for r in left if r["code"] not in LEGACY)
        true_high = sum(r["verdict"] == "TRUE" for r in high if r["code"] not in LEGACY)
        tl = sum(r["verdict"] == "TRUE" for r in high if r["code"] not in LEGACY)
        fl = sum(r["verdict"] == "FALSE" for r in high if r["code"] not in LEGACY)
        out.append((name, t, f, t / (t + f) if t + f else None, true_high, true_all, tl, fl))
        for i, v in enumerate((t, f, true_high, true_all, tl, fl)):
            pooled[i] += v
    t, f, th, ta, tl, fl = pooled
    return out, ("pooled", t, f, t / (t + f) if t + f else None, th, ta, tl, fl)


def _pct(x) -> str:
    return "-" if x is None else f"{100 * x:.0f}%"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m flake8_graphleaf.analysis.facts.calibrate", description=__doc__.split("\n")[0])
    p.add_argument("--rows", default=ROWS, help="the recorded verdicts (default: docs/precision-verdicts/steps.tsv)")
    p.add_argument("--check", action="store_true", help="exit 1 when confidence.json differs from what the rows give")
    p.add_argument("--cross-validate", action="store_true", help="leave each set out in turn; print the table")
    args = p.parse_args(argv)
    try:
        rows = read_rows(args.rows)
    except OSError as exc:
        sys.stderr.write(f"calibrate: cannot read {args.rows}: {exc.strerror or exc}\n")
        return 2
    if args.cross_validate:
        per, pooled = cross_validate(rows)
        sys.stdout.write("| left out | high TRUE | high FALSE | precision | outside legacy norms: TRUE/FALSE at high "
                         "| TRUE kept at high (outside legacy norms) |\n|---|---|---|---|---|---|\n")
        for name, t, f, prec, th, ta, tl, fl in [*per, pooled]:
            sys.stdout.write(f"| {name} | {t} | {f} | {_pct(prec)} | {tl}/{fl} ({_pct(tl / (tl + fl) if tl + fl else None)}) "
                             f"| {th} of {ta} ({_pct(th / ta if ta else None)}) |\n")
        return 0
    text = render(build(rows))
    if args.check:
        try:
            with open(TABLE, encoding="utf-8") as fh:
                same = fh.read() == text
        except OSError:
            same = False
        if not same:
            sys.stderr.write("calibrate: confidence.json is out of date: run python -m "
                             "flake8_graphleaf.analysis.facts.calibrate\n")
        return 0 if same else 1
    with open(TABLE + ".tmp", "w", encoding="utf-8") as fh:
        fh.write(text)
    os.replace(TABLE + ".tmp", TABLE)
    sys.stdout.write(f"wrote {TABLE}: {len(rows)} verdicts, {len(build(rows)['kinds'])} kinds of step\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
