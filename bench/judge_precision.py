"""Compare a scan (bench/scan_real_code.py output) with the verdicts in docs/precision-verdicts/:
per code, how many of the judged TRUE findings are still reported, how many of the judged FALSE
ones, and which reported findings nobody has judged yet.

    python bench/judge_precision.py findings.txt [more.txt ...] [--list]
"""

from __future__ import annotations

import collections
import glob
import os
import re
import sys

VERDICTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "docs", "precision-verdicts")
LINE = re.compile(r"(\S+?:\d+:\d+): (GLF\d+) (.*)")


def load_verdicts() -> dict[tuple[str, str], tuple[str, str]]:
    out = {}
    for path in sorted(glob.glob(os.path.join(VERDICTS, "*.tsv"))):
        for line in open(path, encoding="utf-8"):
            parts = line.rstrip("\n").split("\t")
            if len(parts) >= 3 and not line.startswith("#"):
                out[(parts[0], parts[1])] = (parts[2], parts[3] if len(parts) > 3 else "")
    return out


def main(paths: list[str], listing: bool) -> int:
    verdicts = load_verdicts()
    found: dict[tuple[str, str], str] = {}
    for p in paths:
        for line in open(p, encoding="utf-8"):
            m = LINE.match(line.strip())
            if m:
                found[(m.group(1), m.group(2))] = m.group(3)
    table: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    for key, (verdict, _) in verdicts.items():
        table[key[1]][(verdict, key in found)] += 1
    print("| code | judged TRUE | TRUE still reported | judged FALSE | FALSE still reported |")
    print("|---|---|---|---|---|")
    tot = collections.Counter()
    for code in sorted(table):
        c = table[code]
        row = (c[("TRUE", True)] + c[("TRUE", False)], c[("TRUE", True)], c[("FALSE", True)] + c[("FALSE", False)], c[("FALSE", True)])
        tot.update({"t": row[0], "tk": row[1], "f": row[2], "fk": row[3]})
        print(f"| {code} | {row[0]} | {row[1]} | {row[2]} | {row[3]} |")
    print(f"| all | {tot['t']} | {tot['tk']} ({100 * tot['tk'] / max(tot['t'], 1):.0f}%) | {tot['f']} | "
          f"{tot['fk']} ({100 * tot['fk'] / max(tot['f'], 1):.0f}%) |")
    unjudged = sorted(k for k in found if k not in verdicts)
    print(f"\nreported, not judged: {len(unjudged)}")
    if listing:
        for k in unjudged:
            print("  NEW", k[0], k[1], found[k][:140])
        for key, (verdict, cause) in sorted(verdicts.items()):
            if verdict == "FALSE" and key in found:
                print("  FALSE", cause, key[0], key[1])
            if verdict == "TRUE" and key not in found:
                print("  LOST", key[0], key[1])
    return 0


if __name__ == "__main__":
    args = [a for a in sys.argv[1:] if a != "--list"]
    if not args:
        sys.exit(__doc__)
    sys.exit(main(args, "--list" in sys.argv))
