"""Score ``graphleaf fix`` on runnable incident cases by running them (issue 38's measurement).

A *raising* case is a script that fails before the fix; a *clean* case runs.  For each case, on
fresh copies in a temporary folder:

- raising: ``fix`` (safe fixes), run; ``fix --unsafe-fixes``, run: **runs clean** when the script
  then exits 0 (and, where a clean twin exists, prints what the twin prints);
- clean: ``fix --unsafe-fixes``, run: **broken** when it no longer exits 0 or prints something else;
- every case: a second ``fix --unsafe-fixes`` must change nothing.

Cases: ``fixtures/incidents/<name>.py`` (raising) and ``<name>_clean.py`` (its hand-fixed twin),
the fix fixtures that raise (``fixtures/fix/*.py`` without the ``.fixed`` suffix), or any folders
given on the command line (``caseNN/main.py``, a raising case unless the name ends in ``_clean``).

    python bench/fix_incidents.py                      # this checkout, the bundled cases
    python bench/fix_incidents.py --source /tmp/base   # another checkout (its package on PYTHONPATH)
    python bench/fix_incidents.py --cases /work/heldout12   # folders of cases
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _graphleaf(source: Path, cwd: Path, *args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(source))
    return subprocess.run([sys.executable, "-m", "flake8_graphleaf", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=900)


def _run(script: Path, timeout: int = 90) -> subprocess.CompletedProcess:
    """Run a case; one that hangs (a queue's reader waiting for an item that never came) fails."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    try:
        return subprocess.run([sys.executable, script.name], cwd=script.parent, env=env, capture_output=True,
                              text=True, timeout=timeout)
    except subprocess.TimeoutExpired as exc:
        return subprocess.CompletedProcess(exc.cmd, 124, exc.stdout or "", f"timed out after {timeout} s")


def bundled() -> list[tuple[str, Path, bool, Path | None]]:
    """(name, script, raising, twin) for the bundled cases."""
    out = []
    inc = ROOT / "fixtures" / "incidents"
    for p in sorted(inc.glob("*.py")):
        if p.stem.endswith("_clean"):
            out.append((f"incidents/{p.stem}", p, False, None))
        else:
            twin = inc / f"{p.stem}_clean.py"
            out.append((f"incidents/{p.stem}", p, True, twin if twin.exists() else None))
    for p in sorted((ROOT / "fixtures" / "fix").glob("*.py")):
        if not p.name.endswith(".fixed.py"):
            out.append((f"fix/{p.stem}", p, True, None))
    return out


def folders(root: Path) -> list[tuple[str, Path, bool, Path | None]]:
    out = []
    for d in sorted(root.iterdir()):
        if d.is_dir() and (d / "main.py").exists():
            clean = d.name.endswith("_clean")
            out.append((d.name, d / "main.py", not clean, None))
    return out


def score(source: Path, cases) -> list[dict]:
    rows = []
    for name, script, raising, twin in cases:
        row = {"case": name, "raising": raising}
        with tempfile.TemporaryDirectory() as tmp:
            def fresh(tag: str) -> Path:
                dest = Path(tmp, tag)
                if script.name == "main.py":
                    shutil.copytree(script.parent, dest)
                    return dest / "main.py"
                dest.mkdir()
                shutil.copyfile(script, dest / script.name)
                return dest / script.name

            before = _run(fresh("before"))
            if raising and before.returncode == 0:
                row["note"] = "does not raise before the fix"
            expected = _run(twin) if twin is not None else None
            settings = (("safe", ()), ("unsafe", ("--unsafe-fixes",))) if raising else (("unsafe", ("--unsafe-fixes",)),)
            for tag, flags in settings:
                copy = fresh(tag)
                target = "." if script.name == "main.py" else copy.name
                fixed = _graphleaf(source, copy.parent, "fix", "--no-cache", *flags, target)
                after = _run(copy)
                ok = after.returncode == 0
                if raising and ok and expected is not None and expected.returncode == 0:
                    ok = after.stdout == expected.stdout
                if not raising:
                    ok = ok and after.stdout == before.stdout
                row[tag] = ok
                row[f"{tag}_summary"] = (fixed.stdout.strip().splitlines() or [""])[-1]
                again = _graphleaf(source, copy.parent, "fix", "--no-cache", *flags, target)
                row[f"{tag}_again"] = "Fixed 0 findings in 0 files" in again.stdout
        rows.append(row)
    return rows


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--source", type=Path, default=ROOT, help="the checkout whose flake8_graphleaf runs")
    ap.add_argument("--cases", type=Path, help="a folder of case folders (caseNN/main.py)")
    args = ap.parse_args(argv)
    cases = folders(args.cases) if args.cases else bundled()
    rows = score(args.source.resolve(), cases)
    raising = [r for r in rows if r["raising"] and "note" not in r]
    clean = [r for r in rows if not r["raising"]]
    for r in rows:
        if r["raising"]:
            print(f"{r['case']:40} safe={'ok' if r.get('safe') else 'FAIL':4} unsafe={'ok' if r.get('unsafe') else 'FAIL':4}"
                  f" again={'ok' if r.get('unsafe_again') else 'CHANGED'}  {r.get('note', r.get('unsafe_summary', ''))}")
        else:
            print(f"{r['case']:40} clean: {'kept' if r.get('unsafe') else 'BROKEN'}  {r.get('unsafe_summary', '')}")
    n = len(raising)
    print(f"\nraising cases run clean after `fix`: {sum(bool(r.get('safe')) for r in raising)}/{n}; "
          f"after `fix --unsafe-fixes`: {sum(bool(r.get('unsafe')) for r in raising)}/{n}")
    print(f"clean cases broken by `fix --unsafe-fixes`: {sum(not r.get('unsafe') for r in clean)}/{len(clean)}")
    print(f"second run changed something: {sum(not r.get('unsafe_again', True) for r in rows)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
