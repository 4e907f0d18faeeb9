"""Run every case of held-out incident set 13.

A raising case must fail with the graph-leaf error (deepcopy, non-leaf serialization across a process
boundary, or the DataLoader worker collate's autograd error) and carry at least one `# BREAKS` mark;
a clean twin must exit 0, print the same stdout on a second run, and carry no mark.

    python3 verify.py [PYTHON]      (PYTHON needs torch; default /work/main/.venv/bin/python)
"""
import os
import re
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ERRORS = ("Only Tensors created explicitly by the user (graph leaves)",
          "Cowardly refusing to serialize non-leaf tensor",
          "functions with out=... arguments don't support automatic differentiation")


def run_case(path, python):
    with tempfile.TemporaryDirectory() as tmp:
        dst = os.path.join(tmp, os.path.basename(path))
        shutil.copytree(path, dst, ignore=shutil.ignore_patterns("__pycache__"))
        env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1")
        env.pop("PYTHONPATH", None)
        p = subprocess.run([python, "main.py"], cwd=dst, capture_output=True, text=True, timeout=180, env=env)
    return p.returncode, p.stdout, p.stderr


def marks(path):
    n = 0
    for root, dirs, files in os.walk(path):
        dirs[:] = [d for d in dirs if d != "__pycache__"]
        for f in files:
            if f.endswith(".py"):
                with open(os.path.join(root, f)) as fh:
                    n += sum(bool(re.search(r"#\s*BREAKS\b", line)) for line in fh)
    return n


def main():
    python = sys.argv[1] if len(sys.argv) > 1 else "/work/main/.venv/bin/python"
    bad = 0
    for name in sorted(d for d in os.listdir(HERE) if re.fullmatch(r"case\d+(_clean)?", d)):
        path = os.path.join(HERE, name)
        rc, out, err = run_case(path, python)
        n = marks(path)
        if name.endswith("_clean"):
            rc2, out2, _ = run_case(path, python)
            ok = rc == 0 and rc2 == 0 and out == out2 and n == 0
            why = "" if ok else f" (rc={rc}/{rc2} same_stdout={out == out2} marks={n}) {err.strip()[-200:]}"
        else:
            hit = [e for e in ERRORS if e in err]
            ok = rc != 0 and bool(hit) and n > 0
            why = "" if ok else f" (marks={n}) {err.strip()[-200:]}"
        bad += not ok
        print(f"{name:14s} rc={rc:<3d} marks={n} {'ok' if ok else 'WRONG' + why}", flush=True)
    print("all as expected" if not bad else f"{bad} cases not as expected")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
