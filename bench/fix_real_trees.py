"""Run `graphleaf fix --unsafe-fixes` over copies of real trees (the installed torch,
timm, transformers ...): it must not crash, every changed file must parse, and a
second run must change nothing.  Prints counts and times for docs/performance.md.

    python bench/fix_real_trees.py                   # torch, timm, transformers if installed
    python bench/fix_real_trees.py PATH [PATH ...]
"""

from __future__ import annotations

import ast
import hashlib
import importlib.util
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def installed(name: str) -> str | None:
    spec = importlib.util.find_spec(name) if name != "timm" else None
    if spec is not None and spec.submodule_search_locations:
        return list(spec.submodule_search_locations)[0]
    for base in sys.path:  # timm may be installed without its dependencies: find it without importing
        p = Path(base, name)
        if (p / "__init__.py").exists():
            return str(p)
    return None


def digests(root: Path) -> dict[str, str]:
    out = {}
    for dirpath, _, files in os.walk(root):
        for f in files:
            if f.endswith(".py"):
                p = Path(dirpath, f)
                out[str(p.relative_to(root))] = hashlib.sha256(p.read_bytes()).hexdigest()
    return out


def run_fix(tree: Path) -> tuple[subprocess.CompletedProcess, float]:
    t0 = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-m", "flake8_graphleaf", "fix", "--unsafe-fixes", str(tree)],
        capture_output=True, text=True,
    )
    return proc, time.perf_counter() - t0


def main(argv: list[str]) -> int:
    trees = argv or [t for t in (installed("torch"), installed("timm"), installed("transformers")) if t]
    failed = False
    for src in trees:
        with tempfile.TemporaryDirectory() as tmp:
            tree = Path(tmp, Path(src).name)
            shutil.copytree(src, tree, ignore=shutil.ignore_patterns("*.so", "*.pyc", "__pycache__", "*.dylib", "lib", "bin", "include"))
            before = digests(tree)
            first, t1 = run_fix(tree)
            after = digests(tree)
            changed = sorted(k for k in after if before.get(k) != after[k])
            unparsable = []
            for rel in changed:
                try:
                    ast.parse(Path(tree, rel).read_bytes())
                except SyntaxError as e:
                    unparsable.append(f"{rel}: {e}")
            second, t2 = run_fix(tree)
            again = sorted(k for k, v in digests(tree).items() if after.get(k) != v)
            crashed = "Traceback" in first.stderr + second.stderr
            print(f"{Path(src).name}: {len(before)} files; first run {t1:.1f}s exit {first.returncode}, "
                  f"{len(changed)} files changed; second run {t2:.1f}s exit {second.returncode}, "
                  f"{len(again)} files changed; unparsable {len(unparsable)}; traceback {crashed}")
            summary = [l for l in (first.stdout + first.stderr).splitlines() if l.startswith(("Fixed", "Found", "No "))]
            for line in summary[-3:]:
                print("   ", line)
            for rel in changed:
                print("    changed:", rel)
            for line in unparsable:
                print("    UNPARSABLE:", line)
            if unparsable or again or crashed:
                failed = True
                sys.stderr.write((first.stderr + second.stderr)[-3000:])
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
