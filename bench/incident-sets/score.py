"""Score flake8-graphleaf on a held-out incident set (set12/, set13/: each folder's score.py runs this
one on its own cases).

    python3 score.py [BIN] --set DIR [--repo /work/main] [--commit REV | --working-tree] [--python PY] [--only caseNN,...]

BIN is the bin folder of a venv that has the linter's dependencies (default /work/main/.venv/bin).
By default the linter scored is the committed tree of REV (default: HEAD of --repo), exported with
`git archive` into _score/linter-<sha>/ and put first on PYTHONPATH, so uncommitted edits in the repo do
not leak into the score and nothing is written into the repo. --working-tree scores whatever BIN's
`graphleaf` imports instead. Cases are run with --python (default BIN/python; it needs torch).

For each case folder (copied under _score/<sha>/, never modified in place), from inside the copy:
  detection  `graphleaf check --output-format json .` (default selection, high) and with `--confidence low`:
             a raising case's `# BREAKS` line is FOUND when a finding is on it; any finding in a clean
             twin is a FALSE ALARM (its lines are counted).
  fixing     raising: fresh copy, `graphleaf fix .`, run main.py (exit 0 = fixed); another fresh copy,
             `graphleaf fix --unsafe-fixes .`, run. clean: `graphleaf fix --unsafe-fixes .`, run: must exit 0
             and print the same stdout as before (else BROKEN). After each unsafe fix a second
             `graphleaf fix --unsafe-fixes .` must say "Fixed 0 findings" (else NOT-IDEMPOTENT).
Prints a per-case table and totals; writes _score/<sha>/results.json and table.txt.
"""
import argparse
import difflib
import json
import os
import re
import shutil
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))  # the set's folder: --set
ERRORS = ("Only Tensors created explicitly by the user (graph leaves)",
          "Cowardly refusing to serialize non-leaf tensor",
          "functions with out=... arguments don't support automatic differentiation")
GRAPHLEAF = "import sys; from flake8_graphleaf.cli import entry; sys.argv[0] = 'graphleaf'; sys.exit(entry())"
TIMEOUT = 300


def sh(cmd, cwd, env, timeout=TIMEOUT):
    try:
        p = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
        return p.returncode, p.stdout, p.stderr
    except subprocess.TimeoutExpired as e:
        return 124, e.stdout or "", (e.stderr or "") + "\n[score.py: timed out]"


def case_files(path):
    out = []
    for root, dirs, files in os.walk(path):
        dirs[:] = sorted(d for d in dirs if d != "__pycache__" and not d.startswith("."))
        for f in sorted(files):
            out.append(os.path.relpath(os.path.join(root, f), path))
    return out


def breaks_lines(path):
    lines = set()
    for rel in case_files(path):
        if not rel.endswith(".py"):
            continue
        with open(os.path.join(path, rel)) as fh:
            for i, line in enumerate(fh, 1):
                if re.search(r"#\s*BREAKS\b", line):
                    lines.add((rel, i))
    return lines


def fresh_copy(src, dst):
    if os.path.exists(dst):
        shutil.rmtree(dst)
    shutil.copytree(src, dst, ignore=shutil.ignore_patterns("__pycache__"))
    return dst


def snapshot(path):
    return {rel: open(os.path.join(path, rel)).read() for rel in case_files(path) if rel.endswith(".py")}


def added_lines(before, after):
    n = 0
    for rel, text in after.items():
        old = before.get(rel, "").splitlines()
        for line in difflib.unified_diff(old, text.splitlines(), lineterm="", n=0):
            if line.startswith("+") and not line.startswith("+++"):
                n += 1
    return n


def check(copy_dir, env, extra):
    rc, out, err = sh(GRAPHLEAF_CMD + ["check", "--output-format", "json", *extra, "."], copy_dir, env)
    if rc not in (0, 1):
        return None, f"check rc={rc}: {err.strip()[-300:]}"
    try:
        data = json.loads(out or "[]")
    except json.JSONDecodeError:
        return None, f"check: unreadable json: {out[:200]}"
    found = []
    for f in data:
        rel = os.path.relpath(os.path.realpath(f["filename"]), os.path.realpath(copy_dir))
        found.append({"file": rel, "row": f["location"]["row"], "code": f["code"],
                      "confidence": f.get("confidence"), "fix": (f.get("fix") or {}).get("applicability")})
    return found, None


def fix(copy_dir, env, unsafe):
    cmd = GRAPHLEAF_CMD + ["fix"] + (["--unsafe-fixes"] if unsafe else []) + ["."]
    rc, out, err = sh(cmd, copy_dir, env)
    text = (out + err).strip()
    summary = [l for l in text.splitlines() if re.search(r"\b(Fixed|Would fix|No fix|left)\b", l)]
    return rc, text, (summary[-1] if summary else text.splitlines()[-1] if text else "")


def run_main(copy_dir, py, env):
    rc, out, err = sh([py, "main.py"], copy_dir, env, timeout=180)
    kind = "ok" if rc == 0 else ("graph-leaf error" if any(e in err for e in ERRORS) else "other error")
    last = err.strip().splitlines()[-1] if err.strip() else ""
    return rc, out, kind, last


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("bin", nargs="?", default="/work/main/.venv/bin")
    ap.add_argument("--repo", default="/work/main")
    ap.add_argument("--commit", default="HEAD")
    ap.add_argument("--working-tree", action="store_true")
    ap.add_argument("--python", default=None)
    ap.add_argument("--only", default="")
    ap.add_argument("--set", required=True, help="the set's folder (caseNN/, caseNN_clean/)")
    args = ap.parse_args()
    global HERE
    HERE = os.path.abspath(args.set)

    py_linter = os.path.join(args.bin, "python")
    py_cases = args.python or py_linter
    env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1")
    env.pop("PYTHONPATH", None)
    if args.working_tree:
        label = "working-tree"
        rc, ver, _ = sh([py_linter, "-c", "import flake8_graphleaf, os; print(os.path.dirname(flake8_graphleaf.__file__))"], HERE, env)
        label_detail = ver.strip()
    else:
        rc, sha, err = sh(["git", "-C", args.repo, "rev-parse", args.commit], HERE, env)
        if rc:
            sys.exit(f"score.py: cannot resolve {args.commit} in {args.repo}: {err.strip()}")
        sha = sha.strip()
        label = sha[:10]
        src = os.path.join(HERE, "_score", f"linter-{sha[:10]}")
        if not os.path.isdir(os.path.join(src, "flake8_graphleaf")):
            os.makedirs(src, exist_ok=True)
            archive = subprocess.run(["git", "-C", args.repo, "archive", sha], capture_output=True, check=True).stdout
            subprocess.run(["tar", "-x", "-C", src], input=archive, check=True)
        env["PYTHONPATH"] = src
        rc, where, _ = sh([py_linter, "-c", "import flake8_graphleaf, os; print(os.path.dirname(flake8_graphleaf.__file__))"], HERE, env)
        if os.path.realpath(where.strip()) != os.path.realpath(os.path.join(src, "flake8_graphleaf")):
            sys.exit(f"score.py: the exported linter is not the one imported ({where.strip()})")
        label_detail = f"{sha} (git archive of {args.repo})"
    global GRAPHLEAF_CMD
    GRAPHLEAF_CMD = [py_linter, "-c", GRAPHLEAF]

    work = os.path.join(HERE, "_score", label)
    os.makedirs(work, exist_ok=True)
    only = {c.strip() for c in args.only.split(",") if c.strip()}
    cases = sorted(d for d in os.listdir(HERE) if re.fullmatch(r"case\d+(_clean)?", d) and (not only or d in only))
    print(f"linter: {label_detail}\ncases: {len(cases)}  ({time.strftime('%Y-%m-%d %H:%M:%S UTC', time.gmtime())})\n", flush=True)

    results = []
    for name in cases:
        src_case = os.path.join(HERE, name)
        clean = name.endswith("_clean")
        r = {"case": name, "clean": clean}
        base = fresh_copy(src_case, os.path.join(work, name, "run"))
        rc, base_out, kind, last = run_main(base, py_cases, env)
        r["before"] = kind
        for sel, extra in (("high", []), ("low", ["--confidence", "low"])):
            d = fresh_copy(src_case, os.path.join(work, name, f"check-{sel}"))
            found, problem = check(d, env, extra)
            r[f"findings_{sel}"] = found if found is not None else problem
        if not clean:
            marks = sorted(breaks_lines(src_case))
            r["breaks"] = [f"{f}:{l}" for f, l in marks]
            for sel in ("high", "low"):
                fs = r[f"findings_{sel}"] if isinstance(r[f"findings_{sel}"], list) else []
                hit = {(f["file"], f["row"]) for f in fs}
                r[f"found_{sel}"] = [f"{f}:{l}" for f, l in marks if (f, l) in hit]
            for mode, unsafe in (("safe", False), ("unsafe", True)):
                d = fresh_copy(src_case, os.path.join(work, name, f"fix-{mode}"))
                before = snapshot(d)
                frc, text, summary = fix(d, env, unsafe)
                rc, out, kind, last = run_main(d, py_cases, env)
                r[f"fix_{mode}"] = {"fix_rc": frc, "summary": summary, "added_lines": added_lines(before, snapshot(d)),
                                    "run_rc": rc, "run": kind, "last": last, "runs_clean": rc == 0}
                if unsafe:
                    _, _, again = fix(d, env, True)
                    r["second_fix"] = again
                    r["idempotent"] = "Fixed 0 findings" in again
        else:
            d = fresh_copy(src_case, os.path.join(work, name, "fix-unsafe"))
            before = snapshot(d)
            frc, text, summary = fix(d, env, True)
            rc, out, kind, last = run_main(d, py_cases, env)
            r["fix_unsafe"] = {"fix_rc": frc, "summary": summary, "added_lines": added_lines(before, snapshot(d)),
                               "run_rc": rc, "run": kind, "last": last,
                               "same_stdout": out == base_out}
            r["broken"] = not (rc == 0 and out == base_out)
            _, _, again = fix(d, env, True)
            r["second_fix"] = again
            r["idempotent"] = "Fixed 0 findings" in again
        results.append(r)
        print(line_for(r), flush=True)

    print()
    tot = totals(results)
    for k, v in tot.items():
        print(f"{k:44s} {v}")
    with open(os.path.join(work, "results.json"), "w") as fh:
        json.dump({"linter": label_detail, "results": results, "totals": tot}, fh, indent=1)
    with open(os.path.join(work, "table.txt"), "w") as fh:
        fh.write(f"linter: {label_detail}\n")
        fh.write("\n".join(line_for(r) for r in results) + "\n\n")
        fh.write("\n".join(f"{k:44s} {v}" for k, v in tot.items()) + "\n")
    return 0


def fmt_findings(fs):
    if not isinstance(fs, list):
        return f"ERROR({fs})"
    return ",".join(f"{f['code']}@{os.path.basename(f['file'])}:{f['row']}" for f in fs) or "-"


def line_for(r):
    if r["clean"]:
        fu = r["fix_unsafe"]
        return (f"{r['case']:14s} CLEAN  before={r['before']:<16s} high[{fmt_findings(r['findings_high'])}] "
                f"low[{fmt_findings(r['findings_low'])}] unsafe-fix: {'BROKEN' if r['broken'] else 'ok'} "
                f"(+{fu['added_lines']} lines; {fu['summary']}) second: {'ok' if r['idempotent'] else 'NOT-IDEMPOTENT'}")
    fs, fu = r["fix_safe"], r["fix_unsafe"]
    return (f"{r['case']:14s} RAISE  before={r['before']:<16s} found high {len(r['found_high'])}/{len(r['breaks'])} "
            f"low {len(r['found_low'])}/{len(r['breaks'])} high[{fmt_findings(r['findings_high'])}] "
            f"| safe: {'RUNS' if fs['runs_clean'] else fs['run']} (+{fs['added_lines']}) "
            f"| unsafe: {'RUNS' if fu['runs_clean'] else fu['run']} (+{fu['added_lines']}) "
            f"second: {'ok' if r['idempotent'] else 'NOT-IDEMPOTENT'}")


def totals(results):
    raising = [r for r in results if not r["clean"]]
    clean = [r for r in results if r["clean"]]

    def n_lines(r, sel):
        fs = r[f"findings_{sel}"]
        return len({(f["file"], f["row"]) for f in fs}) if isinstance(fs, list) else 0

    return {
        "raising cases / clean twins": f"{len(raising)} / {len(clean)}",
        "raising cases that raise before (sanity)": f"{sum(r['before'] == 'graph-leaf error' for r in raising)}/{len(raising)}",
        "clean twins that run before (sanity)": f"{sum(r['before'] == 'ok' for r in clean)}/{len(clean)}",
        "BREAKS lines found, default (high)": f"{sum(len(r['found_high']) for r in raising)}/{sum(len(r['breaks']) for r in raising)}",
        "raising cases with >=1 line found, high": f"{sum(bool(r['found_high']) for r in raising)}/{len(raising)}",
        "BREAKS lines found, --confidence low": f"{sum(len(r['found_low']) for r in raising)}/{sum(len(r['breaks']) for r in raising)}",
        "clean lines reported, default (high)": f"{sum(n_lines(r, 'high') for r in clean)} (in {sum(bool(n_lines(r, 'high')) for r in clean)}/{len(clean)} twins)",
        "clean lines reported, --confidence low": f"{sum(n_lines(r, 'low') for r in clean)} (in {sum(bool(n_lines(r, 'low')) for r in clean)}/{len(clean)} twins)",
        "raising cases run clean after `fix` (safe)": f"{sum(r['fix_safe']['runs_clean'] for r in raising)}/{len(raising)}",
        "raising cases run clean after `fix --unsafe-fixes`": f"{sum(r['fix_unsafe']['runs_clean'] for r in raising)}/{len(raising)}",
        "clean twins broken by `fix --unsafe-fixes`": f"{sum(r['broken'] for r in clean)}/{len(clean)}",
        "second unsafe fix not 'Fixed 0 findings'": f"{sum(not r['idempotent'] for r in results)}/{len(results)}",
    }


if __name__ == "__main__":
    sys.exit(main())
