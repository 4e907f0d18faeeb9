"""Score the static analysis on fixtures/projects/copygraph: for each `# expect: GLFnnn` marker,
found (reported on that line with that code) or missed; every reported line that is not marked
(extra; a marked line reported with another code counts as extra, and its marker as missed).

    python bench/copygraph_score.py             # graphleaf check --isolated on the fixture
    python bench/copygraph_score.py --quiet     # the totals only

Not a test: the analysis does not find most of these shapes yet. Exit status 0 whatever the score.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PROJECT = ROOT / "fixtures" / "projects" / "copygraph"
EXPECT = re.compile(r"#\s*expect:\s*(GLF\d+)")
LINE = re.compile(r"^(?P<path>.+?):(?P<line>\d+):\d+: (?P<code>GLF\d+) (?P<message>.*)$")


def marked() -> dict[tuple[str, int, str], str]:
    out = {}
    for path in sorted(PROJECT.rglob("*.py")):
        for i, text in enumerate(path.read_text().splitlines(), start=1):
            m = EXPECT.search(text)
            if m:
                out[(path.relative_to(PROJECT).as_posix(), i, m.group(1))] = text.split("#")[0].strip()
    return out


def reported(stdout: str) -> dict[tuple[str, int, str], str]:
    out = {}
    for line in stdout.splitlines():
        m = LINE.match(line)
        if m:
            rel = Path(m.group("path")).resolve().relative_to(PROJECT).as_posix()
            out.setdefault((rel, int(m.group("line")), m.group("code")), m.group("message"))
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quiet", action="store_true", help="print the totals only")
    args = parser.parse_args(argv)
    r = subprocess.run([sys.executable, "-m", "flake8_graphleaf", "check", "--isolated", "--output-format", "concise",
                        str(PROJECT)], capture_output=True, text=True, cwd=ROOT, timeout=600)
    if r.returncode not in (0, 1):
        print(r.stdout + r.stderr, file=sys.stderr)
        print(f"graphleaf check failed (exit {r.returncode})", file=sys.stderr)
        return 2
    want, got = marked(), reported(r.stdout)
    found = sorted(k for k in want if k in got)
    missed = sorted(k for k in want if k not in got)
    extra = sorted(k for k in got if k not in want)
    codes = sorted({k[2] for k in [*want, *got]})
    if not args.quiet:
        for key in sorted(want):
            path, line, code = key
            print(f"{'found ' if key in got else 'missed'} {path}:{line} {code}  {want[key]}")
        for key in extra:
            path, line, code = key
            print(f"extra  {path}:{line} {code}  {got[key]}")
        print()
        for code in codes:
            n_want = sum(1 for k in want if k[2] == code)
            n_found = sum(1 for k in found if k[2] == code)
            n_extra = sum(1 for k in extra if k[2] == code)
            print(f"{code}: {n_found}/{n_want} found, {n_extra} extra")
    print(f"total: {len(found)}/{len(want)} found, {len(missed)} missed, {len(extra)} extra")
    return 0


if __name__ == "__main__":
    sys.exit(main())
