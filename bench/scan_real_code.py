"""Run the analysis, as `graphleaf check` runs it (each file in the whole-program view of its
package), over every .py file of unpacked packages, and list every finding for the precision
review in docs/precision.md.  Counts per code and crashes go to stderr.

    python bench/scan_real_code.py SRC_ROOT findings.txt [PACKAGE ...]

SRC_ROOT holds one folder per package (the import folder unpacked from a pip-downloaded wheel);
each finding is written as ``PACKAGE/relpath:line:col: CODE message``, the key the verdict files
in docs/precision-verdicts/ use.  ``--argument-stores`` also lists GLF010.
"""

from __future__ import annotations

import collections
import os
import sys
import time
import traceback

# The checkout this script lives in, not whatever flake8_graphleaf the interpreter has installed
# (an editable install of another checkout): an A/B scan of two checkouts must scan each one.
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from flake8_graphleaf.analysis import Options, analyze_source  # noqa: E402
from flake8_graphleaf.project.resolver import FileResolver  # noqa: E402


def main(root: str, out_path: str, packages: list[str], argument_stores: bool = False) -> int:
    packages = packages or sorted(os.listdir(root))
    counts: collections.Counter[str] = collections.Counter()
    crashes = files = unparsable = 0
    resolver = FileResolver([root], use_sys_path=False)
    t0 = time.process_time()
    with open(out_path, "w") as out:
        for package in packages:
            for dirpath, dirnames, filenames in os.walk(os.path.join(root, package)):
                dirnames.sort()
                for name in sorted(filenames):
                    if not name.endswith(".py"):
                        continue
                    path = os.path.join(dirpath, name)
                    rel = os.path.relpath(path, root)
                    files += 1
                    try:
                        with open(path, encoding="utf-8") as fh:
                            source = fh.read()
                        options = Options(argument_stores=argument_stores, **resolver.options_for(path))
                        findings = analyze_source(source, path, options)
                    except (SyntaxError, UnicodeDecodeError, ValueError):
                        unparsable += 1
                        continue
                    except Exception:  # noqa: BLE001 - a crash is what this script looks for
                        crashes += 1
                        out.write(f"CRASH {rel}\n{traceback.format_exc()}\n")
                        continue
                    for f in findings:
                        counts[f.code] += 1
                        out.write(f"{rel}:{f.line}:{f.col + 1}: {f.code} {f.message}\n")
    print(
        f"{root}: {files} files, {unparsable} unparsable, {crashes} crashes, "
        f"{dict(sorted(counts.items()))}, {time.process_time() - t0:.1f}s CPU",
        file=sys.stderr,
    )
    return 1 if crashes else 0


if __name__ == "__main__":
    args = [a for a in sys.argv[1:] if a != "--argument-stores"]
    if len(args) < 2:
        sys.exit(__doc__)
    sys.exit(main(args[0], args[1], args[2:], "--argument-stores" in sys.argv))
