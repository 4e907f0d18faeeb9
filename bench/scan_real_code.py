"""Run the analysis over every .py file under a tree (an installed package: torch,
timm, transformers ...) and list every finding, for the precision review in
docs/precision.md.  Counts per code and crashes go to stdout.

    python bench/scan_real_code.py "$(python -c 'import os, torch; print(os.path.dirname(torch.__file__))')" findings.txt
"""

from __future__ import annotations

import collections
import os
import sys
import time
import traceback

from flake8_graphleaf.analysis import analyze_source


def main(root: str, out_path: str) -> int:
    counts: collections.Counter[str] = collections.Counter()
    crashes = files = unparsable = 0
    t0 = time.process_time()
    with open(out_path, "w") as out:
        for dirpath, dirnames, filenames in os.walk(root):
            dirnames.sort()
            for name in sorted(filenames):
                if not name.endswith(".py"):
                    continue
                path = os.path.join(dirpath, name)
                files += 1
                try:
                    with open(path, encoding="utf-8") as fh:
                        source = fh.read()
                    findings = analyze_source(source, path)
                except (SyntaxError, UnicodeDecodeError, ValueError):
                    unparsable += 1
                    continue
                except Exception:  # noqa: BLE001 - a crash is what this script looks for
                    crashes += 1
                    out.write(f"CRASH {path}\n{traceback.format_exc()}\n")
                    continue
                for f in findings:
                    counts[f.code] += 1
                    out.write(f"{path}:{f.line}:{f.col + 1}: {f.code} {f.message}\n")
    print(
        f"{os.path.basename(root.rstrip('/'))}: {files} files, {unparsable} unparsable, {crashes} crashes, "
        f"{dict(sorted(counts.items()))}, {time.process_time() - t0:.1f}s CPU"
    )
    return 1 if crashes else 0


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    sys.exit(main(sys.argv[1], sys.argv[2]))
