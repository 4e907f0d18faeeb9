"""Run every case: a raising case must fail with the graph-leaf error, a clean twin must exit 0."""
import os
import subprocess
import sys
import tempfile
import shutil

HERE = os.path.dirname(os.path.abspath(__file__))
ERRORS = ("Only Tensors created explicitly by the user (graph leaves)",
          "Cowardly refusing to serialize non-leaf tensor")


def run_case(path, python):
    with tempfile.TemporaryDirectory() as tmp:
        dst = os.path.join(tmp, os.path.basename(path))
        shutil.copytree(path, dst)
        p = subprocess.run([python, "main.py"], cwd=dst, capture_output=True, text=True, timeout=120)
    return p.returncode, p.stdout, p.stderr


def main():
    python = sys.argv[1] if len(sys.argv) > 1 else "/work/main/.venv/bin/python"
    bad = 0
    for name in sorted(d for d in os.listdir(HERE) if d.startswith("case")):
        rc, out, err = run_case(os.path.join(HERE, name), python)
        if name.endswith("_clean"):
            ok = rc == 0
        else:
            ok = rc != 0 and any(e in err for e in ERRORS)
        bad += not ok
        print(f"{name:14s} rc={rc:<3d} {'ok' if ok else 'WRONG'}")
    print("all as expected" if not bad else f"{bad} cases not as expected")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
